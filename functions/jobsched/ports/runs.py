"""The run side's ports: the run row and the claim (the records the run store takes and returns), the
run-queue message, the dead run, and the interfaces the worker, the sweeper and the scheduler need from the
run store, the run queue and the dead-run notifier.

Every instant is an int of epoch milliseconds (UTC) unless its name ends in ``_s`` (epoch seconds)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from jobsched.clock import iso_utc
from jobsched.models import Job, Run, RunKind, RunStatus, from_ms
from jobsched.ports.jobs import AuditEvent
from jobsched.ports.targets import TargetCall
from jobsched.ports.tries import Rerun, TryRecord

if TYPE_CHECKING:
    from jobsched.ports.limits import RunLimits

MAX_DELAY_S = 900
"""SQS DelaySeconds limit: a run message is deferred by at most this."""
SWEEP_SHARDS = 16
"""Shards of the sweep index (``SweepRows.sweep_due`` reads one at a time). Only the failure path (``retrying``
runs, ``dead`` runs owing their alert) and manual runs enter it: a scheduled run that succeeds on its first try
never does (see bench/README.md)."""


def run_id(job_id: str, scheduled_for_ms: int) -> str:
    """The deterministic run id of ``(job_id, scheduled_for)``: ``<job_id>@<epoch ms>``.

    Every target receives it as its idempotency key, so each delivery of one run carries the same key.
    """
    return f"{job_id}@{scheduled_for_ms}"


def sweep_shard(job_id: str) -> int:
    """The sweep-index shard (0..``SWEEP_SHARDS``-1) of a job's runs: a stable hash of the job id."""
    return int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") % SWEEP_SHARDS


FAILURE_STATUSES = frozenset({RunStatus.RETRYING, RunStatus.DEAD, RunStatus.SKIPPED})
"""The statuses a run is listed under in its owner's failed runs (design §3.4): a row in one of them whose
``owner`` is known is in the sparse ``failures`` index, which nothing on the happy path writes."""


@dataclass(frozen=True)
class RunFilter:
    """Which runs a listing keeps: only ``status`` and ``kind`` when set, and ``since_ms <= scheduled_for <
    until_ms`` (epoch ms; None: unbounded)."""

    status: RunStatus | None = None
    kind: RunKind | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def matches(self, row: RunRow) -> bool:
        return (
            (self.status is None or row.status is RunStatus(self.status))
            and (self.kind is None or row.kind is self.kind)
            and (self.since_ms is None or row.scheduled_for >= self.since_ms)
            and (self.until_ms is None or row.scheduled_for < self.until_ms)
        )

    def before(self, before_ms: int | None) -> int | None:
        """The tighter of ``before_ms`` and ``until_ms``: rows are kept strictly before it (None: unbounded)."""
        bounds = [bound for bound in (before_ms, self.until_ms) if bound is not None]
        return min(bounds) if bounds else None


EVERY_RUN = RunFilter()
"""The filter that keeps every run."""


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
    - ``tries``: the tries run so far, oldest first, bounded (``jobsched.ports.tries``); ``reruns``: how many times
      the run was re-run (``POST .../retry``: each starts a new round of tries); ``rerun_key``: the digest of the
      ``Idempotency-Key`` of the last re-run (a repeat of that request is a replay, not a conflict).
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
    tries: tuple[TryRecord, ...] = ()
    reruns: int = 0
    rerun_key: str | None = None

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
    sweep_after_ms: int | None = 120_000,
    term: int | None = None,
    owner: str | None = None,
    skipped_count: int | None = None,
    skipped_through: int | None = None,
    error: str | None = None,
) -> RunRow:
    """A new run row saved at ``now_ms``, attempt 0, kept ``retention_days`` (``expires_at_s``).

    ``dispatch_at`` defaults to ``scheduled_for``. A ``skipped`` run is finished at once; any other enters the
    sweep index at ``now + sweep_after_ms`` (so the sweeper re-enqueues it if its message never comes), unless
    ``sweep_after_ms`` is None: a run whose message is its durable record (design §4.7) stays out of the index.
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
        sweep_at=None if skipped or sweep_after_ms is None else now_ms + sweep_after_ms,
        expires_at_s=now_ms // 1000 + retention_days * 86400,
    )


def failed_page(
    rows: Iterable[RunRow], owner: str, limit: int, where: RunFilter, before: tuple[int, str] | None
) -> tuple[list[RunRow], tuple[int, str] | None]:
    """``RunHistory.list_failed`` on ``rows`` (any rows; ``owner``'s in a failure status are kept): the page of
    those kept by ``where`` and older than ``before`` = ``(scheduled_for, job_id)``, newest first (ties by job
    id, descending), at most ``limit``; and the last row's ``(scheduled_for, job_id)`` when more follow, else
    None. For a store that reads the candidates and pages them itself."""
    kept = sorted(
        (
            r
            for r in rows
            if r.owner == owner
            and r.status in FAILURE_STATUSES
            and where.matches(r)
            and (before is None or (r.scheduled_for, r.job_id) < before)
        ),
        key=lambda r: (r.scheduled_for, r.job_id),
        reverse=True,
    )
    page = kept[:limit]
    return page, ((page[-1].scheduled_for, page[-1].job_id) if len(kept) > limit else None)


@dataclass(frozen=True)
class Claim:
    """The answer of ``RunRows.claim``: ``claimed`` True with ``before`` the row as the claim found it, or
    False with ``before`` the row as stored (None: there is no such run)."""

    claimed: bool
    before: RunRow | None


@dataclass(frozen=True)
class ClaimRequest:
    """A worker asking for run ``(job_id, scheduled_for_ms)`` (``RunClaims.claim``; instants epoch ms): claimed
    by ``worker`` at ``now_ms`` when ``queued``, ``retrying`` with its ``retry_at`` at most ``retry_due_by_ms``,
    or ``running`` with a ``heartbeat_at`` older than ``stale_before_ms`` (a lost worker's); with ``create``, a
    run with no row gets one made of ``create`` (a scheduled run: its message was its only record). With
    ``queued_by_ms``, an existing row is claimed only when its ``enqueued_at`` is absent or at most
    ``queued_by_ms``: its current round was queued when the message asking was sent (the dead-letter drain's
    claim, ``message_round_began``)."""

    job_id: str
    scheduled_for_ms: int
    worker: str
    now_ms: int
    stale_before_ms: int
    retry_due_by_ms: int
    create: RunRow | None = None
    queued_by_ms: int | None = None

    @property
    def key(self) -> RunKey:
        return RunKey(self.job_id, self.scheduled_for_ms)


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
class RetryTransition:
    """``RunTransitions.retry``: the claimed run becomes ``retrying`` with ``error``, its next try due at
    ``retry_at_ms`` and ``sweep_at`` moved to ``sweep_at_ms`` (epoch ms, past the retry, so the sweeper re-enqueues
    the run only if the retry message never comes); ``tries``: the row's tries with the one just ended."""

    error: str
    retry_at_ms: int
    sweep_at_ms: int
    tries: tuple[TryRecord, ...] | None = None


@dataclass(frozen=True)
class DeadTransition:
    """``RunTransitions.dead``: the claimed run becomes ``dead`` at ``now_ms`` (epoch ms) with ``error`` and
    ``attempt = final_attempt`` (the last try that ran), ``notify_pending`` and ``sweep_at = notify_at_ms`` (kept
    in the sweep index until ``notified``: the sweeper sends a notification lost to a crash); ``tries``: the
    row's tries with the one just ended."""

    now_ms: int
    error: str
    final_attempt: int
    notify_at_ms: int
    tries: tuple[TryRecord, ...] | None = None


@dataclass(frozen=True)
class SweepDeferral:
    """``SweepRows.defer_sweep``: move run ``(job_id, scheduled_for_ms)``'s ``sweep_at`` to ``sweep_at_ms``
    (epoch ms) if its status and ``sweep_at`` are still the ``status`` and ``seen_sweep_at`` the sweeper saw;
    ``sweeps``: how many times the sweeper re-enqueued it (None: left as stored)."""

    job_id: str
    scheduled_for_ms: int
    status: RunStatus
    seen_sweep_at: int
    sweep_at_ms: int
    sweeps: int | None = None

    @property
    def key(self) -> RunKey:
        return RunKey(self.job_id, self.scheduled_for_ms)


@dataclass(frozen=True)
class RerunRequest:
    """``RunHistory.rerun`` of run ``(job_id, scheduled_for_ms)``: queued again at ``now_ms`` with ``sweep_at =
    sweep_at_ms`` (epoch ms) and kept until ``expires_at_s`` (epoch s, the row's TTL: a new round is kept the
    retention from its re-run, so it cannot expire while it runs); ``key_digest``: the digest of the re-run
    request's ``Idempotency-Key`` (None: none); ``summary``: a skipped summary row of several fires may be re-run
    too (a backfill running its first fire: the row then stands for that fire alone, its
    ``skipped_count``/``skipped_through`` removed)."""

    job_id: str
    scheduled_for_ms: int
    now_ms: int
    sweep_at_ms: int
    expires_at_s: int
    key_digest: str | None = None
    summary: bool = False

    @classmethod
    def at(
        cls,
        job_id: str,
        scheduled_for_ms: int,
        *,
        now_ms: int,
        sweep_at_ms: int,
        retention_days: int,
        key_digest: str | None = None,
        summary: bool = False,
    ) -> RerunRequest:
        """The re-run at ``now_ms`` (epoch ms) of a run kept ``retention_days`` from then (as ``new_run`` keeps a
        new row)."""
        return cls(
            job_id,
            scheduled_for_ms,
            now_ms=now_ms,
            sweep_at_ms=sweep_at_ms,
            expires_at_s=now_ms // 1000 + retention_days * 86400,
            key_digest=key_digest,
            summary=summary,
        )

    @property
    def key(self) -> RunKey:
        return RunKey(self.job_id, self.scheduled_for_ms)


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
class OverlapRequest:
    """A try asking for its job's overlap lock (``JobSpecs.acquire_overlap``): job ``job_id``'s lock for the try
    ``(run_id, attempt, worker)`` at ``now_ms``. Granted when free, when its holder's ``heartbeat_at`` is older
    than ``stale_before_ms`` (epoch ms: the holder was lost) or when the holder is this run (a retry or a
    takeover of it); with ``replacing`` (a holder as a refusal returned it), exactly when that holder still holds
    it (and ``held_after_ms``). ``expires_at_s`` (epoch s) bounds how long a lock left behind by a crash is kept."""

    job_id: str
    run_id: str
    attempt: int
    worker: str
    now_ms: int
    stale_before_ms: int
    expires_at_s: int
    replacing: OverlapHolder | None = None
    held_after_ms: int | None = None
    """A lock whose ``heartbeat_at`` is later than this (epoch ms) is held on past its try's record by a try that
    may still run (``Worker`` holds it so: a timed-out try that did not stop, a ``lambda`` target's function):
    it is not taken even by its own run (a retry). None: no such check."""

    @property
    def holder(self) -> OverlapHolder:
        """The lock as this request takes it: held by its try, beaten at ``now_ms``."""
        return OverlapHolder(self.run_id, self.attempt, self.worker, self.now_ms)


@dataclass(frozen=True)
class RunMessage:
    """The body of a run-queue message: the run's key. ``delay_s`` (0-900) defers delivery.

    A scheduled run has no row until a worker claims it: its message is its durable record (design §4.7), so
    the scheduler adds what the claim writes into the new row: ``dispatch_at`` (the fire plus the job's jitter
    offset) and ``enqueued_at``, epoch ms, and ``term`` (the fencing term of the scheduler that sent it).
    ``enqueued_at`` is when the message was sent, at or after its run's current round was queued (the row's
    ``enqueued_at``, which a re-run or a backfill sets anew): every sender sets it, so a letter of an earlier
    round is told apart (``message_round_began``). All are optional (messages of earlier versions carry none)
    and take no part in equality: a message names its run by key.
    """

    job_id: str
    scheduled_for: int  # epoch ms
    delay_s: int = 0
    dispatch_at: int | None = field(default=None, compare=False)
    enqueued_at: int | None = field(default=None, compare=False)
    term: int | None = field(default=None, compare=False)

    def body(self) -> str:
        data: dict[str, Any] = {"job_id": self.job_id, "scheduled_for": self.scheduled_for}
        if self.dispatch_at is not None:
            data["dispatch_at"] = self.dispatch_at
        if self.enqueued_at is not None:
            data["enqueued_at"] = self.enqueued_at
        if self.term is not None:
            data["term"] = self.term
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def parse(cls, body: str) -> RunMessage:
        """Parse a message body: a JSON object with ``job_id`` (a string) and ``scheduled_for`` (a JSON integer),
        and optionally ``dispatch_at``, ``enqueued_at`` and ``term`` (JSON integers or null). Raises ValueError
        (the parse's own errors wrapped) for a malformed one: a field missing or of another type (``true``,
        ``1.5``, ``1.0`` or ``"1"`` is not an integer), an instant outside years 1-9999 (``from_ms``: no run has
        such a fire, and no date can show it), or a ``term`` outside 0..2^63-1 (a 64-bit column's)."""
        try:
            data = json.loads(body)
            if not isinstance(data, dict):
                raise TypeError(f"a JSON object is expected, not {type(data).__name__}")
            job_id = data["job_id"]
            if not isinstance(job_id, str):
                raise TypeError(f"job_id is a {type(job_id).__name__}, not a string")
            optional = {
                name: _integer(data, name)
                for name in ("dispatch_at", "enqueued_at", "term")
                if data.get(name) is not None
            }
            scheduled_for = _integer(data, "scheduled_for")
            for instant in (scheduled_for, optional.get("dispatch_at"), optional.get("enqueued_at")):
                if instant is not None:
                    from_ms(instant)
            if not 0 <= optional.get("term", 0) < 2**63:
                raise ValueError(f"term {optional['term']} is outside 0..2^63-1")
            return cls(job_id=job_id, scheduled_for=scheduled_for, **optional)
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as error:
            raise ValueError(f"malformed run message: {body[:200]!r}") from error


def _integer(data: dict[str, Any], name: str) -> int:
    """``data[name]`` when it is an integer (a bool is not one, though Python's ``bool`` is an ``int``). Raises
    KeyError when absent, TypeError for any other type."""
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is a {type(value).__name__}, not an integer")
    return value


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


@dataclass(frozen=True)
class DeadLetter:
    """A message of the run queue's dead-letter queue: its ``body`` (a ``RunMessage`` body, or anything a
    producer got wrong), the ``receipt_handle`` that deletes it, how many times the run queue delivered it
    before redriving it here (``receive_count``, 0 when unknown), and ``message``, the body parsed by the queue
    adapter (None: the body is not a run message)."""

    body: str
    receipt_handle: str
    receive_count: int = 0
    message: RunMessage | None = field(kw_only=True)


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
    alert: bool = (
        True  # the job's alerts.on_dead: whether the owner's alert goes out with the dead-run message
    )

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

    - ``retry``: ``running -> retrying`` as :class:`RetryTransition` tells.
    - ``dead``: ``running -> dead`` as :class:`DeadTransition` tells.
    - ``notified``: a dead run's notifications went out; it leaves the sweep index.
    - ``skip``: ``running -> skipped`` at ``now_ms`` with ``reason`` as its error.

    ``tries`` (of ``retry``'s and ``dead``'s records, and of ``RunRows.succeed``): the row's tries with the one
    just ended (``jobsched.ports.tries.with_try``), written in the same write; None leaves them as stored.
    """

    def retry(self, owned: Owned, change: RetryTransition) -> bool: ...

    def dead(self, owned: Owned, change: DeadTransition) -> bool: ...

    def notified(self, job_id: str, scheduled_for_ms: int) -> bool: ...

    def skip(self, owned: Owned, *, now_ms: int, reason: str) -> bool: ...


class RunClaims(Protocol):
    """The claim of a run, shared by the worker (``RunRows``) and the sweeper (``SweepRows``); its rules are
    those told in ``RunRows``."""

    def claim(self, request: ClaimRequest) -> Claim: ...


def message_round_began(message: RunMessage, row: RunRow) -> bool:
    """Whether ``row``'s current round (its ``enqueued_at``, set when the row was made or re-run) had begun when
    ``message`` was sent (its ``enqueued_at``): the message may belong to that round. False only when both are
    known and the row's round began later: the message was sent for an earlier round (a re-run's or a backfill's
    row made after a letter of the same run was dead-lettered), and nothing it asked for is owed any more."""
    return message.enqueued_at is None or row.enqueued_at is None or row.enqueued_at <= message.enqueued_at


def claim_message(
    runs: RunClaims,
    message: RunMessage,
    *,
    worker: str,
    now_ms: int,
    retry_due_by_ms: int,
    settings: RunLimits,
    same_round: bool = False,
) -> Claim:
    """Claim the run of a run-queue ``message`` for ``worker`` at ``now_ms`` (epoch ms), as ``RunRows.claim``
    does: a running run counts as lost when its beat is older than ``settings.heartbeat_stale_s``; a scheduled
    run with no row yet gets one made from the message (its ``enqueued_at``, or ``now_ms``; its
    ``dispatch_at`` and ``term``), kept ``settings.retention_days`` and out of the sweep index. With
    ``same_round``, an existing row is claimed only in the round the message was sent for
    (``ClaimRequest.queued_by_ms`` = the message's ``enqueued_at``: see ``message_round_began``)."""
    create = new_run(
        message.job_id,
        message.scheduled_for,
        now_ms=message.enqueued_at if message.enqueued_at is not None else now_ms,
        retention_days=settings.retention_days,
        dispatch_at_ms=message.dispatch_at,
        sweep_after_ms=None,
        term=message.term,
    )
    stale_before_ms = now_ms - settings.heartbeat_stale_s * 1000
    return runs.claim(
        ClaimRequest(
            message.job_id,
            message.scheduled_for,
            worker,
            now_ms,
            stale_before_ms,
            retry_due_by_ms,
            create,
            queued_by_ms=message.enqueued_at if same_round else None,
        )
    )


class RunRows(RunTransitions, RunClaims, Protocol):
    """The worker's run lifecycle: claim, heartbeat, success, give-back (each conditioned on the ``Owned``
    claim, as in ``RunTransitions``), and one read.

    ``claim`` is one conditional write: ``queued|retrying -> running`` (a ``retrying`` run once its ``retry_at``
    is at most the request's ``retry_due_by_ms``), or a ``running`` run whose ``heartbeat_at`` is older than
    ``stale_before_ms`` (a lost worker's), or, when ``create`` is given and the run has no row, a new row made
    of ``create`` claimed at once (:class:`ClaimRequest`). The claim sets
    ``worker``, ``attempt + 1``, ``started_at = heartbeat_at = now_ms`` and, on the first try, ``lateness_ms``.
    Returns ``Claim(True, the row as it was before: create itself for a new row)`` or ``Claim(False, the row as
    stored, None when there is none)``: a fire has at most one row, so a duplicate message of a finished run
    is refused."""

    def heartbeat(self, owned: Owned, *, now_ms: int) -> bool: ...

    def succeed(self, owned: Owned, *, now_ms: int, tries: tuple[TryRecord, ...] | None = None) -> bool: ...

    def give_back(self, owned: Owned, *, before: RunRow) -> bool: ...

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
    deleted ones left out) and its overlap lock (``jobsched.store.jobs.JobStore``): ``acquire_overlap`` returns
    None when taken (:class:`OverlapRequest` tells when), else the try holding it."""

    def get_spec(self, job_id: str) -> Job | None: ...

    def get_specs(self, job_ids: Sequence[str]) -> dict[str, Job]: ...

    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder | None: ...

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool: ...

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> None: ...

    def list_events(
        self, job_id: str, limit: int, before: str | None = None
    ) -> tuple[list[AuditEvent], str | None]: ...


class RunSender(Protocol):
    """Sends run messages (``jobsched.adapters.queue.RunQueue``). Raises on refusal."""

    def send(self, messages: Sequence[RunMessage]) -> None: ...


class VisibilityExtender(Protocol):
    """Extends in-flight messages' visibility: one (``RunQueue.change_visibility``), or a received batch's
    (``RunQueue.change_visibility_batch``, one request per 10)."""

    def change_visibility(self, receipt_handle: str, seconds: int) -> None: ...

    def change_visibility_batch(self, receipt_handles: Sequence[str], seconds: int) -> None: ...


class DeadLetters(Protocol):
    """The run queue's dead-letter queue, as the sweeper drains it (``jobsched.adapters.queue.DeadLetterQueue``;
    the fake ``jobsched.memory.queue.MemoryDeadLetters``): ``receive`` up to ``limit`` messages (they stay
    invisible for the queue's visibility timeout, then come back unless deleted), ``delete`` one. Raise on
    failure."""

    def receive(self, limit: int) -> list[DeadLetter]: ...

    def delete(self, receipt_handle: str) -> None: ...


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
