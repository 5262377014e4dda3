"""The run side's records: the run row and its key, the claim and the other requests the run store takes and
the answers it returns, and the overlap lock's records. The run-queue messages are in
``jobsched.ports.run_messages``, the interfaces in ``jobsched.ports.run_stores``.

Every instant is an int of epoch milliseconds (UTC) unless its name ends in ``_s`` (epoch seconds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from jobsched.models import RunKind, RunStatus
from jobsched.ports.tries import TryRecord

SWEEP_SHARDS = 16
"""Shards of the sweep index (``SweepRows.sweep_due`` reads one at a time; ``jobsched.domain.runs.sweep_shard``
places a job's runs). Only the failure path (``retrying`` runs, ``dead`` runs owing their alert) and manual runs
enter it: a scheduled run that succeeds on its first try never does (see bench/README.md)."""


def run_id(job_id: str, scheduled_for_ms: int) -> str:
    """The deterministic run id of ``(job_id, scheduled_for)``: ``<job_id>@<epoch ms>``.

    Every target receives it as its idempotency key, so each delivery of one run carries the same key.
    """
    return f"{job_id}@{scheduled_for_ms}"


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


class OfARun:
    """A record about one run, ``(job_id, scheduled_for)`` (epoch ms): its ``run_id`` and its ``key``."""

    job_id: str
    scheduled_for: int

    @property
    def run_id(self) -> str:
        return run_id(self.job_id, self.scheduled_for)

    @property
    def key(self) -> RunKey:
        return RunKey(self.job_id, self.scheduled_for)


@dataclass(frozen=True)
class RunRow(OfARun):
    """One run as stored: the record every run store takes and returns (DynamoDB item layout in
    ``jobsched.dynamodb.layout``). ``(job_id, scheduled_for)`` is its key: a fire exists once.

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
    - ``cancelled_by``/``cancel_reason``: on a ``cancelled`` run, who cancelled it and why (the reason given, if
      any); ``cancelled_from``: the status the cancel found (``running``: a try was stopped).
    - ``upstream_run_id``: a chained run's (kind ``chained``) upstream run, whose end made it (design §2.1).
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
    cancelled_by: str | None = None
    cancel_reason: str | None = None
    cancelled_from: RunStatus | None = None
    upstream_run_id: str | None = None


@dataclass(frozen=True)
class Claim:
    """The answer of ``RunRows.claim``: ``claimed`` True with ``before`` the row as the claim found it, or
    False with ``before`` the row as stored (None: there is no such run)."""

    claimed: bool
    before: RunRow | None


@dataclass(frozen=True)
class Renewal:
    """The answer of ``RunRows.renew`` (a try's heartbeat): ``renewed``, or refused with ``row`` the row as stored
    (None: there is none; ``cancelled`` with this claim's attempt: an operator cancelled the run)."""

    renewed: bool
    row: RunRow | None = None


@dataclass(frozen=True)
class Cancel:
    """The answer of ``RunCancels.cancel``: ``cancelled`` True with ``before`` the row as the cancel found it
    (queued, retrying or running), or False with ``before`` the row as stored (None: there is no such run)."""

    cancelled: bool
    before: RunRow | None


@dataclass(frozen=True)
class ClaimRequest:
    """A worker asking for run ``key`` (``RunClaims.claim``; instants epoch ms): claimed by ``worker`` at
    ``now_ms`` when ``queued``, ``retrying`` with its ``retry_at`` at most ``retry_due_by_ms``, or ``running``
    with a ``heartbeat_at`` older than ``stale_before_ms`` (a lost worker's); with ``create``, a run with no row
    gets one made of ``create`` (a scheduled run: its message was its only record). With ``queued_by_ms``, an
    existing row is claimed only when its ``enqueued_at`` is absent or at most ``queued_by_ms``: its current
    round was queued when the message asking was sent (the dead-letter drain's claim,
    ``jobsched.domain.runs.message_round_began``)."""

    key: RunKey
    worker: str
    now_ms: int
    stale_before_ms: int
    retry_due_by_ms: int
    create: RunRow | None = None
    queued_by_ms: int | None = None


@dataclass(frozen=True)
class Owned(OfARun):
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
    """``SweepRows.defer_sweep``: move run ``key``'s ``sweep_at`` to ``sweep_at_ms``
    (epoch ms) if its status and ``sweep_at`` are still the ``status`` and ``seen_sweep_at`` the sweeper saw;
    ``sweeps``: how many times the sweeper re-enqueued it (None: left as stored)."""

    key: RunKey
    status: RunStatus
    seen_sweep_at: int
    sweep_at_ms: int
    sweeps: int | None = None


@dataclass(frozen=True)
class RerunRequest:
    """``RunHistory.rerun`` of run ``key``: queued again at ``now_ms`` with ``sweep_at =
    sweep_at_ms`` (epoch ms) and kept until ``expires_at_s`` (epoch s, the row's TTL: a new round is kept the
    retention from its re-run, so it cannot expire while it runs); ``key_digest``: the digest of the re-run
    request's ``Idempotency-Key`` (None: none); ``summary``: a skipped summary row of several fires may be re-run
    too (a backfill running its first fire: the row then stands for that fire alone, its
    ``skipped_count``/``skipped_through`` removed)."""

    key: RunKey
    now_ms: int
    sweep_at_ms: int
    expires_at_s: int
    key_digest: str | None = None
    summary: bool = False


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
    """The try holding a job's overlap lock (``overlap: skip``, ``buffer_one``, ``replace``): its run id, attempt and worker,
    and the lock's last ``heartbeat_at`` (epoch ms; None when unknown). ``buffered``: the run id of the fire
    waiting for the lock under ``buffer_one`` (None, or the holder's own run id: no fire waits). A holder whose
    ``worker`` is ``RESERVED_WORKER`` is a waiting fire the lock was handed to when its holder let go
    (``JobSpecs.release_overlap``): its try has not taken it yet."""

    run_id: str
    attempt: int | None = None
    worker: str | None = None
    heartbeat_at: int | None = None
    buffered: str | None = None

    @property
    def waiting(self) -> str | None:
        """The run id of the fire waiting for the lock, else None."""
        return self.buffered if self.buffered is not None and self.buffered != self.run_id else None

    @property
    def reserved(self) -> bool:
        """Whether the lock was handed to a waiting fire that has not taken it yet."""
        return self.worker == RESERVED_WORKER


RESERVED_WORKER = "buffered"
"""The ``worker`` of an overlap lock handed by its holder to the fire waiting for it (``overlap: buffer_one``): no
worker holds it; only that fire's try takes it, and a lock so held is never stale (``OverlapRequest``)."""


@dataclass(frozen=True)
class BufferRequest:
    """A fire asking to wait for its job's overlap lock (``JobSpecs.buffer_overlap``, ``overlap: buffer_one``):
    job ``job_id``'s run ``run_id`` becomes the fire that waits when the lock is held and no other fire waits;
    with ``replacing`` (a waiting fire's run id, known to be over), exactly when that fire still waits."""

    job_id: str
    run_id: str
    replacing: str | None = None


@dataclass(frozen=True)
class BufferAnswer:
    """The answer of ``JobSpecs.buffer_overlap``: ``buffered`` (the run now waits for the lock), else the lock as
    stored, ``holder`` (None: nobody holds it)."""

    buffered: bool
    holder: OverlapHolder | None = None


@dataclass(frozen=True)
class OverlapRequest:
    """A try asking for its job's overlap lock (``JobSpecs.acquire_overlap``): job ``job_id``'s lock for the try
    ``(run_id, attempt, worker)`` at ``now_ms``. Granted when free, when the holder is this run (a retry or a
    takeover of it, or the waiting fire the lock was handed to), or when its holder's ``heartbeat_at`` is older
    than ``stale_before_ms`` (epoch ms: the holder was lost) and the holder is not a reserved one
    (``RESERVED_WORKER``) and no other fire waits for it (``OverlapHolder.waiting``); with ``replacing`` (a
    holder as a refusal returned it), exactly when that holder still holds it and no other fire waits. Taking it
    keeps the fire that waits (taken by that fire, none waits any more). ``expires_at_s`` (epoch s) bounds how
    long a lock left behind by a crash is kept."""

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
class Rerun:
    """The answer of ``RunHistory.rerun``: ``done`` (the run was put back to ``queued``) with ``row`` as written,
    or not done with ``row`` as stored (None: there is no such run)."""

    done: bool
    row: RunRow | None = None
