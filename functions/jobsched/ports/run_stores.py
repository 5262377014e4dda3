"""The interfaces the worker, the sweeper, the scheduler and the API need from the run store, the job store
(a job as the worker runs it), the run queue, its dead-letter queue, the dead-run notifier and the targets.

Every instant is an int of epoch milliseconds (UTC)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from jobsched.models import Job
from jobsched.ports.jobs import AuditEvent, StoredJob
from jobsched.ports.run_messages import DeadLetter, DeadRun, RunMessage
from jobsched.ports.runs import (
    EVERY_RUN,
    BufferAnswer,
    BufferRequest,
    Cancel,
    Claim,
    ClaimRequest,
    DeadTransition,
    KeyedInsert,
    OverlapHolder,
    OverlapRequest,
    Owned,
    Renewal,
    Rerun,
    RerunRequest,
    RetryTransition,
    RunFilter,
    RunKey,
    RunRow,
    SweepDeferral,
    SweepPage,
)
from jobsched.ports.targets import TargetCall
from jobsched.ports.tries import TryRecord


class RunTransitions(Protocol):
    """The run-row writes shared by the worker and the sweeper (``jobsched.dynamodb.runs.RunStore``,
    ``jobsched.memory.runs.MemoryRunStore``): the result of a failed try and the dead run's notifications.

    Each write taking an ``Owned`` is one conditional write on that claim (the row is ``running`` with its
    attempt and worker; when ``owned.heartbeat_at`` is set, also that beat): True when written, False when the
    row is no longer that claim's. Transient storage failures raise ``jobsched.ports.errors.StoreUnavailable``.

    - ``retry``: ``running -> retrying`` as :class:`RetryTransition` tells.
    - ``dead``: ``running -> dead`` as :class:`DeadTransition` tells.
    - ``notified``: a dead run's notifications went out; it leaves the sweep index.
    - ``skip``: ``running -> skipped`` at ``now_ms`` with ``reason`` as its error.

    ``tries`` (of ``retry``'s and ``dead``'s records, and of ``RunRows.succeed``): the row's tries with the one
    just ended (``jobsched.domain.tries.with_try``), written in the same write; None leaves them as stored.
    """

    def retry(self, owned: Owned, change: RetryTransition) -> bool: ...

    def dead(self, owned: Owned, change: DeadTransition) -> bool: ...

    def notified(self, job_id: str, scheduled_for_ms: int) -> bool: ...

    def skip(self, owned: Owned, *, now_ms: int, reason: str) -> bool: ...


class RunClaims(Protocol):
    """The claim of a run, shared by the worker (``RunRows``) and the sweeper (``SweepRows``); its rules are
    those told in ``RunRows``."""

    def claim(self, request: ClaimRequest) -> Claim: ...


class RunCancels(Protocol):
    """The cancel of a run (``POST .../cancel``; any later caller that stops a run, e.g. an overlap policy)."""

    def cancel(self, key: RunKey, *, now_ms: int, by: str, reason: str | None = None) -> Cancel:
        """``queued|retrying|running -> cancelled`` at ``now_ms`` (epoch ms) by ``by`` with ``reason``: one
        conditional write (``cancel`` of ``jobsched.domain.run_states``); ``Cancel(True, the row before)`` or
        ``Cancel(False, the row as stored, None when absent)``. Raises ``StoreUnavailable``."""
        ...


class RunRows(RunTransitions, RunClaims, RunCancels, Protocol):
    """The worker's run lifecycle: claim, heartbeat, success, give-back (each conditioned on the ``Owned``
    claim, as in ``RunTransitions``), one read, and the cancel of another run (``overlap: replace``).

    ``claim`` is one conditional write: ``queued|retrying -> running`` (a ``retrying`` run once its ``retry_at``
    is at most the request's ``retry_due_by_ms``), or a ``running`` run whose ``heartbeat_at`` is older than
    ``stale_before_ms`` (a lost worker's), or, when ``create`` is given and the run has no row, a new row made
    of ``create`` claimed at once (:class:`ClaimRequest`). The claim sets
    ``worker``, ``attempt + 1``, ``started_at = heartbeat_at = now_ms`` and, on the first try, ``lateness_ms``.
    Returns ``Claim(True, the row as it was before: create itself for a new row)`` or ``Claim(False, the row as
    stored, None when there is none)``: a fire has at most one row, so a duplicate message of a finished run
    is refused. ``succeed`` with ``chain_sweep_at_ms`` (epoch ms) keeps the run in the sweep index until then:
    a run of a job with downstream jobs, until their runs are made (design §2.1)."""

    def heartbeat(self, owned: Owned, *, now_ms: int) -> bool: ...

    def renew(self, owned: Owned, *, now_ms: int) -> Renewal:
        """A running try's heartbeat (the ``heartbeat`` write, 1 request): ``Renewal(True)``, or refused with the
        row as stored, read from the refused write (a ``cancelled`` row of this attempt: the try must stop,
        design §5.8)."""
        ...

    def stopped(self, owned: Owned, *, tries: tuple[TryRecord, ...]) -> bool:
        """Record ``tries`` (with the try a cancel stopped) on the run of the claim ``owned``, once ``cancelled``
        (``stopped``: only the claim's attempt and worker). False: not that claim's cancelled run."""
        ...

    def succeed(
        self,
        owned: Owned,
        *,
        now_ms: int,
        tries: tuple[TryRecord, ...] | None = None,
        chain_sweep_at_ms: int | None = None,
    ) -> bool: ...

    def give_back(self, owned: Owned, *, before: RunRow) -> bool: ...

    def put_new(self, row: RunRow) -> RunRow | None:
        """Insert ``row`` only if its key has no row (a chained run, design §2.1): None when written, else the
        existing row."""
        ...

    def clear_sweep(self, job_id: str, scheduled_for_ms: int) -> bool:
        """Take a finished run out of the sweep index (a succeeded run whose downstream runs are made)."""
        ...

    def watch(self, owned: Owned, *, sweep_at_ms: int) -> bool:
        """Put a run still running under the claim ``owned`` (``attempt``, ``worker``) into the sweep index at
        ``sweep_at_ms`` (epoch ms) when it is not there yet. False: it is not (any more) running under that
        claim, or it is in the index already. 1 request."""
        ...

    def get(self, job_id: str, scheduled_for_ms: int) -> RunRow | None: ...

    def list_for_job(
        self, job_id: str, limit: int, where: RunFilter = EVERY_RUN, before_ms: int | None = None
    ) -> tuple[list[RunRow], int | None]: ...


class SweepRows(RunTransitions, RunClaims, Protocol):
    """The sweeper's reads and writes on the runs: the due keys of one shard of the sweep index (a page,
    ``sweep_at <= now_ms``), the rows of those keys, conditional moves of ``sweep_at``, and the claim (as in
    ``RunRows``) by which it records dead a run whose message was dead-lettered before any try, with its
    ``give_back`` (as in ``RunRows``) when that cannot be recorded."""

    def give_back(self, owned: Owned, *, before: RunRow) -> bool: ...

    def sweep_due(self, shard: int, now_ms: int, limit: int, cursor: Any = None) -> SweepPage: ...

    def get_many(self, keys: Sequence[RunKey]) -> list[RunRow]: ...

    def defer_sweep(self, deferral: SweepDeferral) -> bool: ...

    def clear_sweep(self, job_id: str, scheduled_for_ms: int) -> bool: ...


class JobSpecs(Protocol):
    """A job as the worker runs it (``get_spec``: None when deleted; ``get_specs``: a batch's jobs by id, the
    deleted ones left out) and its overlap lock (``jobsched.dynamodb.jobs.JobStore``): ``acquire_overlap`` returns
    None when taken (:class:`OverlapRequest` tells when), else the try holding it; ``release_overlap`` gives it
    back if the try holds it, or hands it to the fire waiting for it (``overlap: buffer_one``), whose run id it
    returns; ``buffer_overlap`` makes a fire the one that waits (:class:`BufferRequest`)."""

    def get_spec(self, job_id: str) -> Job | None: ...

    def get_specs(self, job_ids: Sequence[str]) -> dict[str, Job]: ...

    def dependents(self, job_id: str) -> list[StoredJob]:
        """The live jobs whose ``after`` names ``job_id`` (design §2.1), by name. Raises ``StoreUnavailable``."""
        ...

    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder | None: ...

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool: ...

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> str | None: ...

    def buffer_overlap(self, request: BufferRequest) -> BufferAnswer: ...

    def list_events(
        self, job_id: str, limit: int, before: str | None = None
    ) -> tuple[list[AuditEvent], str | None]: ...


class RunSender(Protocol):
    """Sends run messages (``jobsched.aws.queue.RunQueue``). Raises on refusal."""

    def send(self, messages: Sequence[RunMessage]) -> None: ...


class VisibilityExtender(Protocol):
    """Extends in-flight messages' visibility: one (``RunQueue.change_visibility``), or a received batch's
    (``RunQueue.change_visibility_batch``, one request per 10)."""

    def change_visibility(self, receipt_handle: str, seconds: int) -> None: ...

    def change_visibility_batch(self, receipt_handles: Sequence[str], seconds: int) -> None: ...


class DeadLetters(Protocol):
    """The run queue's dead-letter queue, as the sweeper drains it (``jobsched.aws.queue.DeadLetterQueue``;
    the fake ``jobsched.memory.queue.MemoryDeadLetters``): ``receive`` up to ``limit`` messages (they stay
    invisible for the queue's visibility timeout, then come back unless deleted), ``delete`` one. Raise on
    failure."""

    def receive(self, limit: int) -> list[DeadLetter]: ...

    def delete(self, receipt_handle: str) -> None: ...


class DeadRunSink(Protocol):
    """Dead-run queue + owner alert (``jobsched.aws.alerts.DeadRunNotifier``). Raises on failure."""

    def notify(self, dead: DeadRun) -> None: ...


class TargetRunner(Protocol):
    """Runs one try against a target (``jobsched.targets.Targets``); raises ``TargetFailed``."""

    def execute(self, target: Any, call: TargetCall) -> str: ...


class RunWriter(Protocol):
    """What the scheduler's tick needs of the run store: conditional inserts of new runs (the existing row
    when the key is taken) and a job's rows in a range of ``scheduled_for`` (to split skipped summaries)."""

    def put_new(self, row: RunRow) -> RunRow | None: ...

    def rows_between(self, job_id: str, first_ms: int, last_ms: int, limit: int) -> list[RunRow]: ...


class RunHistory(RunCancels, Protocol):
    """What the API's use cases need of the run store (``jobsched.dynamodb.runs.RunStore``; the in-memory fake
    ``jobsched.memory.runs.MemoryRunStore``): manual and backfill runs, one run, a job's history page."""

    def put_new(self, row: RunRow) -> RunRow | None: ...

    def put_new_keyed(self, row: RunRow, *, owner: str, idempotency_key: str) -> KeyedInsert: ...

    def get(self, job_id: str, scheduled_for_ms: int) -> RunRow | None: ...

    def rows_between(self, job_id: str, first_ms: int, last_ms: int, limit: int) -> list[RunRow]: ...

    def list_for_job(
        self, job_id: str, limit: int, where: RunFilter = EVERY_RUN, before_ms: int | None = None
    ) -> tuple[list[RunRow], int | None]:
        """A page of the job's runs kept by ``where``, newest first, older than ``before_ms``; and the last row's
        ``scheduled_for`` when more may follow (else None). Read strongly consistent: a dead-run streak counted
        just after a run's own write (``domain.alerting``) sees every run recorded before it."""
        ...

    def list_failed(
        self, owner: str, limit: int, where: RunFilter = EVERY_RUN, before: tuple[int, str] | None = None
    ) -> tuple[list[RunRow], tuple[int, str] | None]:
        """A page of ``owner``'s runs in a failure status (:data:`FAILURE_STATUSES`) kept by ``where``, across
        their jobs, newest ``scheduled_for`` first (ties by job id, descending), after ``before`` =
        ``(scheduled_for, job_id)`` in that order; and
        the last row's ``(scheduled_for, job_id)`` when more may follow (else None)."""

    def rerun(self, request: RerunRequest) -> Rerun:
        """Put a finished run back on its way (:class:`RerunRequest`), one conditional write: the row must be
        ``dead`` (its notifications sent: no ``notify_pending``) or ``skipped`` (one fire, not a summary of
        several, unless ``request.summary``). It becomes ``queued`` at ``now_ms`` with ``attempt`` 0, ``reruns``
        + 1, ``rerun_key = key_digest``, ``expires_at_s`` as the request says and ``sweep_at = sweep_at_ms`` (the
        sweep index: the sweeper enqueues it if its message never comes); its worker, start, heartbeat, finish,
        retry, error, ``skipped_count`` and ``skipped_through`` are cleared; ``tries`` are kept (the new round's are
        told apart by their ``round``). Returns ``Rerun(True, the row as written)`` or ``Rerun(False, the row
        as stored, None when absent)``."""
        ...
