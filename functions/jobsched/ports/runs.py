"""The run side's ports: the run row and the claim (the records the run store takes and returns), the
run-queue message, the dead run, and the interfaces the worker, the sweeper and the scheduler need from the
run store, the run queue and the dead-run notifier.

Every instant is an int of epoch milliseconds (UTC) unless its name ends in ``_s`` (epoch seconds)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from jobsched.models import Job, Run, RunKind, RunStatus, from_ms
from jobsched.targets.base import TargetCall, iso_utc

MAX_DELAY_S = 900
"""SQS DelaySeconds limit: a run message is deferred by at most this."""
SWEEP_SHARDS = 16
"""Shards of the sweep index (``SweepRows.sweep_due`` reads one at a time). Each run enters and leaves the
index once: 16 shards x 1,000 writes/s per DynamoDB key / 2 = 8,000 runs/s (see bench/README.md)."""


def run_id(job_id: str, scheduled_for_ms: int) -> str:
    """The deterministic run id of ``(job_id, scheduled_for)``: ``<job_id>@<epoch ms>``.

    Every target receives it as its idempotency key, so each delivery of one run carries the same key.
    """
    return f"{job_id}@{scheduled_for_ms}"


def sweep_shard(job_id: str) -> int:
    """The sweep-index shard (0..``SWEEP_SHARDS``-1) of a job's runs: a stable hash of the job id."""
    return int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") % SWEEP_SHARDS


class RunKey(NamedTuple):
    """The key of a run: ``(job_id, scheduled_for)`` (epoch ms)."""

    job_id: str
    scheduled_for: int


@dataclass(frozen=True)
class RunRow:
    """One run as stored: the record every run store takes and returns (DynamoDB item layout in
    ``jobsched.store.layout``). ``(job_id, scheduled_for)`` is its key: a fire exists once.

    - ``status``/``kind``: ``RunStatus``/``RunKind``; ``attempt``: tries claimed so far (0 before the first).
    - ``enqueued_at`` (when the row was saved), ``dispatch_at`` (the fire plus the job's jitter offset),
      ``started_at``/``heartbeat_at`` (the current claim's start and last beat), ``retry_at`` (next try due,
      ``retrying`` only), ``finished_at``: epoch ms. ``lateness_ms``: first start minus ``scheduled_for``.
    - ``worker``: the current claim's worker id; ``error``: the last error (or skip reason).
    - ``owner``: the job's owner when known at creation (manual runs); ``term``: fencing term of the scheduler
      that saved it.
    - ``skipped_count``/``skipped_through``: a summary of several skipped fires, the last one epoch ms.
    - ``sweep_at``: when the sweeper next looks at it (None: not in the sweep index); ``sweeps``: how many
      times the sweeper re-enqueued it; ``notify_pending``: a dead run whose dead-run message and alert are
      not confirmed sent.
    - ``expires_at_s``: retention end (epoch s, the table's TTL).
    """

    job_id: str
    scheduled_for: int
    status: RunStatus = RunStatus.QUEUED
    kind: RunKind = RunKind.SCHEDULED
    attempt: int = 0
    enqueued_at: int | None = None
    dispatch_at: int | None = None
    started_at: int | None = None
    heartbeat_at: int | None = None
    retry_at: int | None = None
    finished_at: int | None = None
    lateness_ms: int | None = None
    worker: str | None = None
    error: str | None = None
    owner: str | None = None
    term: int | None = None
    skipped_count: int | None = None
    skipped_through: int | None = None
    sweep_at: int | None = None
    sweeps: int = 0
    notify_pending: bool = False
    expires_at_s: int | None = None

    @property
    def run_id(self) -> str:
        return run_id(self.job_id, self.scheduled_for)

    @property
    def key(self) -> RunKey:
        return RunKey(self.job_id, self.scheduled_for)

    def as_run(self) -> Run:
        """The API's ``Run`` of this row (instants as UTC datetimes)."""

        def instant(value: int | None) -> Any:
            return from_ms(value) if value is not None else None

        return Run(
            id=self.run_id,
            job_id=self.job_id,
            scheduled_for=from_ms(self.scheduled_for),
            status=self.status,
            kind=self.kind,
            attempt=self.attempt,
            enqueued_at=instant(self.enqueued_at),
            started_at=instant(self.started_at),
            finished_at=instant(self.finished_at),
            worker=self.worker,
            error=self.error,
            lateness_ms=self.lateness_ms,
            skipped_count=self.skipped_count,
            skipped_through=instant(self.skipped_through),
        )


def new_run(
    job_id: str,
    scheduled_for_ms: int,
    *,
    now_ms: int,
    retention_days: int,
    status: RunStatus = RunStatus.QUEUED,
    kind: RunKind = RunKind.SCHEDULED,
    dispatch_at_ms: int | None = None,
    sweep_after_ms: int = 120_000,
    term: int | None = None,
    owner: str | None = None,
    skipped_count: int | None = None,
    skipped_through: int | None = None,
    error: str | None = None,
) -> RunRow:
    """A new run row saved at ``now_ms``, attempt 0, kept ``retention_days`` (``expires_at_s``).

    ``dispatch_at`` defaults to ``scheduled_for``. A ``skipped`` run is finished at once; any other enters the
    sweep index at ``now + sweep_after_ms`` (so the sweeper re-enqueues it if its message never comes).
    """
    skipped = status is RunStatus.SKIPPED
    return RunRow(
        job_id=job_id,
        scheduled_for=scheduled_for_ms,
        status=status,
        kind=kind,
        attempt=0,
        enqueued_at=now_ms,
        dispatch_at=dispatch_at_ms if dispatch_at_ms is not None else scheduled_for_ms,
        finished_at=now_ms if skipped else None,
        error=error,
        owner=owner,
        term=term,
        skipped_count=skipped_count,
        skipped_through=skipped_through,
        sweep_at=None if skipped else now_ms + sweep_after_ms,
        expires_at_s=now_ms // 1000 + retention_days * 86400,
    )


@dataclass(frozen=True)
class Claim:
    """The answer of ``RunRows.claim``: ``claimed`` True with ``before`` the row as the claim found it, or
    False with ``before`` the row as stored (None: there is no such run)."""

    claimed: bool
    before: RunRow | None


@dataclass(frozen=True)
class Owned:
    """A claim as the run-transition writes condition on it: the run ``(job_id, scheduled_for)`` (epoch ms)
    running under ``(attempt, worker)``; the sweeper adds the stale ``heartbeat_at`` (epoch ms) it saw, so a
    beat since then wins. ``owner``: the run's owner when known (for a dead run's alert when its job is gone).
    """

    job_id: str
    scheduled_for: int
    attempt: int
    worker: str
    heartbeat_at: int | None = None
    owner: str | None = None

    @property
    def run_id(self) -> str:
        return run_id(self.job_id, self.scheduled_for)

    @classmethod
    def of(cls, row: RunRow, *, with_heartbeat: bool = False) -> Owned:
        """The claim ``row`` is under as stored (``worker`` "" when unset); ``with_heartbeat``: also fenced on
        the row's ``heartbeat_at``, so a beat since the row was read wins."""
        return cls(
            job_id=row.job_id,
            scheduled_for=row.scheduled_for,
            attempt=row.attempt,
            worker=row.worker or "",
            heartbeat_at=row.heartbeat_at if with_heartbeat else None,
            owner=row.owner,
        )


@dataclass(frozen=True)
class KeyedInsert:
    """The answer of ``RunRows.put_new_keyed``: ``created`` (both the run and its key were written); else
    ``key_used`` (the key was used before: ``key_run_at`` is the ``scheduled_for`` of the run it created, None
    when not readable) or ``existing`` (the run's key ``(job_id, scheduled_for)`` is taken by that row)."""

    created: bool
    key_used: bool = False
    key_run_at: int | None = None
    existing: RunRow | None = None


@dataclass(frozen=True)
class SweepPage:
    """One page of the sweep index: the due run keys, oldest ``sweep_at`` first, and the opaque cursor of
    the next page (None: no more)."""

    keys: list[RunKey]
    cursor: Any = None


@dataclass(frozen=True)
class OverlapHolder:
    """The try holding a job's overlap lock (``overlap: skip``): its run id, attempt and worker, and the
    lock's last ``heartbeat_at`` (epoch ms; None when unknown)."""

    run_id: str
    attempt: int | None = None
    worker: str | None = None
    heartbeat_at: int | None = None


@dataclass(frozen=True)
class RunMessage:
    """The body of a run-queue message: the run's key. ``delay_s`` (0-900) defers delivery."""

    job_id: str
    scheduled_for: int  # epoch ms
    delay_s: int = 0

    def body(self) -> str:
        return json.dumps({"job_id": self.job_id, "scheduled_for": self.scheduled_for}, separators=(",", ":"))

    @classmethod
    def parse(cls, body: str) -> RunMessage:
        """Parse a message body; raises ValueError (KeyError/TypeError wrapped) for a malformed one."""
        try:
            data = json.loads(body)
            return cls(job_id=str(data["job_id"]), scheduled_for=int(data["scheduled_for"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"malformed run message: {body[:200]!r}") from error


@dataclass(frozen=True)
class Delivery:
    """One delivery of a run message to a worker (built from an SQS record by ``adapters.queue.delivery_of``).

    ``worker`` names the claimer (the Lambda request id, or host/pid/thread); ``receipt_handle`` is None when
    the delivery is not from SQS (nothing to extend); ``receive_count`` is SQS's ApproximateReceiveCount;
    ``remaining_ms`` returns the milliseconds left in the invocation (None: no limit)."""

    message: RunMessage
    worker: str
    receipt_handle: str | None = None
    receive_count: int = 1
    remaining_ms: Callable[[], int] | None = None


class QueueSendError(Exception):
    """Some messages of a batch were not accepted; ``failed`` lists them."""

    def __init__(self, failed: list[RunMessage]) -> None:
        super().__init__(f"{len(failed)} run message(s) not accepted by SQS")
        self.failed = failed


@dataclass(frozen=True)
class DeadRun:
    """A run that ended ``dead``. Instants are epoch ms (UTC); ``attempts`` is the number of tries made."""

    run_id: str
    job_id: str
    scheduled_for_ms: int
    attempts: int
    error: str
    dead_at_ms: int
    owner: str | None = None
    job_name: str | None = None
    schedule: str | None = None
    timezone: str | None = None
    target_type: str | None = None
    input: Any = None

    def envelope(self) -> dict[str, Any]:
        """The dead-run queue message: the run envelope (``run_id, job_id, scheduled_for, attempt, input``)
        plus ``owner``, ``job_name``, ``schedule``, ``timezone``, ``target_type``, ``error``, ``dead_at``."""
        return {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "scheduled_for": iso_utc(self.scheduled_for_ms),
            "attempt": self.attempts,
            "input": self.input,
            "owner": self.owner,
            "job_name": self.job_name,
            "schedule": self.schedule,
            "timezone": self.timezone,
            "target_type": self.target_type,
            "error": self.error,
            "dead_at": iso_utc(self.dead_at_ms),
        }


# --- the interfaces ------------------------------------------------------------------


class RunTransitions(Protocol):
    """The run-row writes shared by the worker and the sweeper (``jobsched.store.runs.RunStore``,
    ``jobsched.memory.runs.MemoryRunStore``): the result of a failed try and the dead run's notifications.

    Each write taking an ``Owned`` is one conditional write on that claim (the row is ``running`` with its
    attempt and worker; when ``owned.heartbeat_at`` is set, also that beat): True when written, False when the
    row is no longer that claim's. Transient storage failures raise ``jobsched.ports.errors.StoreUnavailable``.

    - ``retry``: ``running -> retrying`` with ``error``, the next try due at ``retry_at_ms`` and ``sweep_at``
      moved to ``sweep_at_ms``.
    - ``dead``: ``running -> dead`` at ``now_ms`` with ``attempt = final_attempt``, ``notify_pending`` and
      ``sweep_at = notify_at_ms`` (kept in the sweep index until ``notified``).
    - ``notified``: a dead run's notifications went out; it leaves the sweep index.
    - ``skip``: ``running -> skipped`` at ``now_ms`` with ``reason`` as its error.
    """

    def retry(self, owned: Owned, *, error: str, retry_at_ms: int, sweep_at_ms: int) -> bool: ...

    def dead(
        self, owned: Owned, *, now_ms: int, error: str, final_attempt: int, notify_at_ms: int
    ) -> bool: ...

    def notified(self, job_id: str, scheduled_for_ms: int) -> bool: ...

    def skip(self, owned: Owned, *, now_ms: int, reason: str) -> bool: ...


class RunRows(RunTransitions, Protocol):
    """The worker's run lifecycle: claim, heartbeat, success, give-back (each conditioned on the ``Owned``
    claim, as in ``RunTransitions``), and one read."""

    def claim(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        worker: str,
        now_ms: int,
        stale_before_ms: int,
        retry_due_by_ms: int,
    ) -> Claim: ...

    def heartbeat(self, owned: Owned, *, now_ms: int) -> bool: ...

    def succeed(self, owned: Owned, *, now_ms: int) -> bool: ...

    def give_back(self, owned: Owned, *, before: RunRow) -> bool: ...

    def get(self, job_id: str, scheduled_for_ms: int) -> RunRow | None: ...


class SweepRows(RunTransitions, Protocol):
    """The sweeper's reads and writes on the runs: the due keys of one shard of the sweep index (a page,
    ``sweep_at <= now_ms``), the rows of those keys, and conditional moves of ``sweep_at``."""

    def sweep_due(self, shard: int, now_ms: int, limit: int, cursor: Any = None) -> SweepPage: ...

    def get_many(self, keys: Sequence[RunKey]) -> list[RunRow]: ...

    def defer_sweep(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        status: RunStatus,
        seen_sweep_at: int,
        sweep_at_ms: int,
        sweeps: int | None = None,
    ) -> bool: ...

    def clear_sweep(self, job_id: str, scheduled_for_ms: int) -> bool: ...


class JobSpecs(Protocol):
    """A job as the worker runs it (``get_spec``: None when deleted) and its overlap lock
    (``jobsched.store.jobs.JobStore``): ``acquire_overlap`` returns None when taken, else the try holding it."""

    def get_spec(self, job_id: str) -> Job | None: ...

    def acquire_overlap(
        self,
        job_id: str,
        *,
        run_id: str,
        attempt: int,
        worker: str,
        now_ms: int,
        stale_before_ms: int,
        expires_at_s: int,
        replacing: OverlapHolder | None = None,
    ) -> OverlapHolder | None: ...

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool: ...

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> None: ...


class RunSender(Protocol):
    """Sends run messages (``jobsched.adapters.queue.RunQueue``). Raises on refusal."""

    def send(self, messages: Sequence[RunMessage]) -> None: ...


class VisibilityExtender(Protocol):
    """Extends an in-flight message's visibility (``RunQueue.change_visibility``)."""

    def change_visibility(self, receipt_handle: str, seconds: int) -> None: ...


class DeadRunSink(Protocol):
    """Dead-run queue + owner alert (``jobsched.adapters.alerts.DeadRunNotifier``). Raises on failure."""

    def notify(self, dead: DeadRun) -> None: ...


class TargetRunner(Protocol):
    """Runs one try against a target (``jobsched.targets.Targets``); raises ``TargetFailed``."""

    def execute(self, target: Any, call: TargetCall) -> str: ...


class RunWriter(Protocol):
    """What the scheduler's tick needs of the run store: conditional inserts of new runs (the existing row
    when the key is taken) and a job's rows in a range of ``scheduled_for`` (to split skipped summaries)."""

    def put_new(self, row: RunRow) -> RunRow | None: ...

    def rows_between(self, job_id: str, first_ms: int, last_ms: int, limit: int) -> list[RunRow]: ...


class RunHistory(Protocol):
    """What the API's use cases need of the run store (``jobsched.store.runs.RunStore``; the in-memory fake
    ``jobsched.memory.runs.MemoryRunStore``): manual runs, one run, a job's history page."""

    def put_new(self, row: RunRow) -> RunRow | None: ...

    def put_new_keyed(self, row: RunRow, *, owner: str, idempotency_key: str) -> KeyedInsert: ...

    def get(self, job_id: str, scheduled_for_ms: int) -> RunRow | None: ...

    def list_for_job(
        self, job_id: str, limit: int, *, status: RunStatus | None = None, before_ms: int | None = None
    ) -> tuple[list[RunRow], int | None]: ...
