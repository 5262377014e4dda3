"""The job side's ports: a job's scheduling state, its due-index entry, the stored job, and the interfaces
the tick (:class:`DueIndex`) and the API's ``JobService`` (:class:`JobRepository`) need from the job store.

Instants are epoch ms (UTC) unless a name says otherwise. Implemented by ``jobsched.dynamodb.jobs.JobStore``
(DynamoDB) and ``jobsched.memory.jobs.MemoryJobStore`` (in memory), held to one contract
(``tests/contract/test_job_store_contract.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from jobsched.models import Job, JobEventKind, JobSettings, MissedPolicy, Priority
from jobsched.ports.quotas import UsageChange

DEFAULT_CATCH_UP_WINDOW_S: int = JobSettings.model_fields["catch_up_window_s"].default
"""Catch-up window of a scheduling state stored before the field existed: the job model's default."""
DEFAULT_MISFIRE_GRACE_S: int = JobSettings.model_fields["misfire_grace_s"].default
"""Misfire grace of a scheduling state stored before the field existed: the job model's default."""


EARLY = "early"
"""The due-index lane of entries written at least ``registration.TIMER_LEAD_MS`` before their due instant: filed at
their due instant, so a reader that passed an instant never sees an entry of this lane appear behind it."""
LATE = "late"
"""The lane of entries written closer to their due instant than that (a rate of a few seconds, a catch-up, a job
created or resumed due now): filed at ``max(due_at, written at)``; a reader passes them only once they are
older than its margin, so one written a little late is still read."""
INDEX = "index"
"""The lane of the due index kept on the scheduling item (design, Upgrades in flight): a job's entry lives on it (the
``due`` GSI), so it leaves the index when the job moves. Read only while a deployment still holds such entries
(``DueIndex.due_lanes``)."""
EARLY_HIGH = "early-high"
"""The :data:`EARLY` lane of ``high`` jobs' entries: read by every tick whatever backlog the other lanes hold, so a
``high`` fire is never behind a ``normal`` one due at the same time (design §4.10)."""
LATE_HIGH = "late-high"
"""The :data:`LATE` lane of ``high`` jobs' entries (see :data:`EARLY_HIGH`)."""
TIMER_LANES = (EARLY, LATE, EARLY_HIGH, LATE_HIGH)
LATE_LANES = frozenset({LATE, LATE_HIGH})
"""The lanes sorted by writing rather than by due instant (:data:`LATE`'s rules: read whole, passed late)."""
HIGH_LANES = frozenset({EARLY_HIGH, LATE_HIGH})
"""The lanes of ``high`` jobs' entries."""
HIGH_SHARD = 0
"""The one due shard whose :data:`HIGH_LANES` hold entries: ``high`` jobs are few (the fires that need their
instant), so a tick reads two more lanes per bucket, not two per shard."""


def hinted_priority(value: object) -> Priority:
    """The priority a stored due entry names (``value``: its stored text, or None); ``normal`` for none or one no
    code path of ours writes: an entry is a hint that orders a tick's reads, and the job's state, read
    consistently, decides what runs."""
    try:
        return Priority(str(value)) if value is not None else Priority.NORMAL
    except ValueError:
        return Priority.NORMAL


def timer_lane(*, early: bool, priority: Priority) -> str:
    """The timer lane of an entry: :data:`EARLY` or :data:`LATE` (``early``: written at least
    ``registration.TIMER_LEAD_MS`` ahead), their ``-high`` lanes for a ``high`` job."""
    if priority is Priority.HIGH:
        return EARLY_HIGH if early else LATE_HIGH
    return EARLY if early else LATE


@dataclass(frozen=True)
class DueEntry:
    """A job's entry in the due index: due at ``due_at`` (epoch ms, the dispatch instant: ``next_run_at`` plus
    the jitter offset), filed under scheduler ``partition``, time ``bucket`` (``position // bucket width``),
    write ``shard`` and ``lane`` (:data:`EARLY`, :data:`LATE` or :data:`INDEX`), sorted by ``position``
    (epoch ms: ``max(due_at, written at)``; None on entries written before it existed: ``due_at``).
    ``version``: the scheduling state's ``version`` the entry was written for (None before versions).
    ``owner`` (None on entries written before it was kept) and ``priority`` (the job's, ``high`` ones in the
    ``-high`` lanes) order the due fires a tick dispatches (design §4.10); neither takes part in equality.

    An entry is a hint: stores may keep an entry after its job moved on (timer items are never deleted, only
    expired), and the tick compares each with the job's state read consistently
    (``jobsched.domain.registration.due_entry`` makes them)."""

    job_id: str
    partition: int
    bucket: int
    shard: int
    due_at: int
    lane: str = EARLY
    position: int | None = None
    version: int | None = None
    owner: str | None = field(default=None, compare=False)
    priority: Priority = field(default=Priority.NORMAL, compare=False)

    def __post_init__(self) -> None:
        if self.position is None:
            object.__setattr__(self, "position", self.due_at)
        object.__setattr__(self, "priority", Priority(self.priority))

    @property
    def at(self) -> int:
        """Where the entry sorts in its lane (epoch ms): ``position`` (``due_at`` when not given)."""
        assert self.position is not None  # set by __post_init__
        return self.position

    @property
    def order(self) -> tuple[int, str, int, int]:
        """The entry's place in its lane, ``(at, job_id, due_at, version or -1)``: a read cursor
        (``DueQuery.start``)."""
        return (self.at, self.job_id, self.due_at, -1 if self.version is None else self.version)

    @property
    def lane_key(self) -> tuple[int, int, str]:
        """``(bucket, shard, lane)``: the lane of its partition the entry is read from."""
        return (self.bucket, self.shard, self.lane)

    @property
    def rank(self) -> tuple[int, int]:
        """How far the job's state had got when the entry was written, ``(version or -1, due_at)``: a state
        whose own rank is higher has moved past the entry."""
        return (-1 if self.version is None else self.version, self.due_at)


@dataclass(frozen=True)
class SchedulingState:
    """A job's scheduling state: small and hot, what the scheduler reads and moves every run.

    ``next_run_at``: the nominal fire (``scheduled_for`` of the next run), None once the schedule has ended.
    ``due``: the job's due-index entry, present iff the job is active (not paused, ``next_run_at`` set).
    ``partition``: the scheduler partition the job is homed in; ``term``: fencing token of the last scheduler
    that moved it (never lowered by an edit); ``version``: counts the API's rewrites (None on states written
    before versions existed; a move lands only on the version it was planned from). ``anchor_at``: a rate's
    anchor; ``end_at``: no fire after it; ``on_time_from``: set when the API accepted a one-off whose instant
    was already past (its lateness counts from then). ``jitter_offset_ms``: the job's fixed dispatch delay.
    ``owner``: the job's owner (None on states written before it was kept), so the fires the tick records
    ``skipped`` are listed among the owner's failed runs (``GET /runs``); ``alert_on_skipped``: the job's
    ``alerts.on_skipped``, so the tick alerts the owner of the fires it records skipped. ``priority``: the
    job's, so the tick files its next entry in its priority's lane (design §4.10).
    """

    job_id: str
    partition: int
    schedule: str
    timezone: str = "UTC"
    anchor_at: int | None = None
    end_at: int | None = None
    missed: MissedPolicy = MissedPolicy.CATCH_UP
    catch_up_window_s: int = DEFAULT_CATCH_UP_WINDOW_S
    misfire_grace_s: int = DEFAULT_MISFIRE_GRACE_S
    jitter_offset_ms: int = 0
    paused: bool = False
    term: int = 0
    version: int | None = None
    next_run_at: int | None = None
    on_time_from: int | None = None
    due: DueEntry | None = None
    owner: str | None = None
    alert_on_skipped: bool = False
    priority: Priority = Priority.NORMAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "priority", Priority(self.priority))


@dataclass(frozen=True)
class Unreadable:
    """A stored scheduling state no code path of ours wrote (a wrong type, an unknown policy): ``reason`` says
    what is wrong. The tick reports it and leaves it where it is."""

    job_id: str
    reason: str


@dataclass(frozen=True)
class StoredJob:
    """A live job as stored: ``job`` (its settings; ``paused`` and ``next_run_at`` taken from ``state``) and its
    scheduling ``state`` (None only if it was never written)."""

    job: Job
    state: SchedulingState | None


@dataclass(frozen=True)
class AuditEvent:
    """One entry of a job's audit trail (design §3.2): ``kind`` done by ``actor`` at ``at`` (epoch ms, UTC).

    ``key`` tells apart the job's events of one millisecond and makes a repeated write of the same event land
    on itself (the service uses e.g. ``updated-v3``, the job's version after the change, or a run's id);
    ``detail``: JSON-able facts (changed fields, a reason, a run id); ``expires_at``: epoch seconds after which
    the store may drop it (kept as long as run history), None to keep it.
    """

    job_id: str
    at: int
    key: str
    kind: JobEventKind
    actor: str
    detail: dict[str, Any]
    expires_at: int | None = None

    @property
    def position(self) -> str:
        """Where the event sorts among the job's events (by ``at``, then ``key``): the listing's cursor."""
        return f"{self.at:013d}#{self.key}"

    @property
    def changed_fields(self) -> frozenset[str]:
        """The job's fields an ``updated`` event changed (the names its ``detail["fields"]`` lists, as the service
        records them); empty for any other kind of event or a detail without that list."""
        fields = self.detail.get("fields") if self.kind is JobEventKind.UPDATED else None
        if not isinstance(fields, list | tuple):
            return frozenset()
        return frozenset(name for name in fields if isinstance(name, str))


@dataclass(frozen=True)
class Rewrite:
    """A rewrite of a live job (``JobRepository.replace``: PATCH, pause, resume, an auto-pause): its new ``job``
    and ``state``, written only while the stored job's ``updated_at`` (epoch ms) is still
    ``expected_updated_at`` and, with ``expected_state = (next_run_at or None, term)`` as the caller read them,
    no scheduler moved the job (or a newer leader stamped it) since, so an edit never undoes a fire's move nor
    lowers the fencing term; ``event`` is recorded and ``usage`` added to its owner's quota usage with it (all or
    nothing; ``jobsched.ports.quotas``)."""

    job: Job
    state: SchedulingState
    expected_updated_at: int
    expected_state: tuple[int | None, int] | None = None
    event: AuditEvent | None = None
    usage: UsageChange | None = None
    relink: tuple[str | None, str | None] | None = None
    """``(upstream id before, after)`` when the rewrite changes the job's ``after`` (PATCH): a store that keeps
    the chain mark (``Job.downstream_count``, design §2.1) counts the new upstream in the same write and uncounts
    the old one after it."""
    expected_quota_rate: int | Literal["kept"] | None = "kept"
    """The stored job's ``Job.quota_rate`` as the caller read it (``"kept"``: the new ``job``'s, which the rewrite
    keeps): written only while the stored job still holds it, so a rewrite never undoes a count made meanwhile
    (by the recount or another edit) and its ``usage`` is added once (design §4.11)."""

    @property
    def quota_rate_read(self) -> int | None:
        """The ``Job.quota_rate`` the stored job must hold for the rewrite to land (``expected_quota_rate``)."""
        return self.job.quota_rate if self.expected_quota_rate == "kept" else self.expected_quota_rate


def change_key(version: int) -> str:
    """The ``AuditEvent.key`` of a job change: the job's version after it (zero-padded, so one millisecond's
    changes sort in the order they were made)."""
    return f"v{version:09d}"


@dataclass(frozen=True)
class Move:
    """A fenced move of job ``job_id`` after a fire (``DueIndex.move``; instants epoch ms).

    Lands only when the stored state still has ``expected_next_run_at`` and ``expected_version`` (None: a state
    written before versions, still without one), is in the due index, is homed in ``partition`` and has a
    ``term`` not above ``term`` (the mover's fencing term, which the state takes). ``next_run_at=None`` ends the
    schedule; ``due=None`` leaves the index; ``to_partition`` re-homes the job (its term restarts at 0, the new
    partition's leaders' terms being unrelated to this one's)."""

    job_id: str
    expected_next_run_at: int
    expected_version: int | None
    partition: int
    term: int
    next_run_at: int | None
    due: DueEntry | None
    to_partition: int | None = None

    @property
    def rehome(self) -> bool:
        """Whether the move re-homes the job in another partition."""
        return self.to_partition is not None and self.to_partition != self.partition

    @property
    def new_term(self) -> int:
        """The term the moved state takes: 0 when re-homed, else ``term``."""
        return 0 if self.rehome else self.term


DuePageToken = object
"""Where a page of a due-index query stopped (opaque: only the store that issued it reads it)."""


DueCursor: TypeAlias = tuple[int, str, int, int]
"""A read position in a lane: the ``DueEntry.order`` of the last entry a reader passed."""


@dataclass(frozen=True)
class DueQuery:
    """One page of a due-index read (``DueIndex.query_due``): the entries filed under ``(partition, bucket,
    shard)`` in ``lane``, sorted after ``start`` (a ``DueEntry.order``; None: from the lane's start), with
    ``at <= up_to_ms`` (epoch ms; in :data:`INDEX`, ``due_at <= up_to_ms``), at most ``limit``, from where the
    page token ``after`` (as the store returned it; None: the start) stopped."""

    partition: int
    bucket: int
    shard: int
    up_to_ms: int
    limit: int = 500
    after: DuePageToken | None = None
    lane: str = EARLY
    start: DueCursor | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        """``(partition, bucket, shard)``: where the entries read are filed."""
        return (self.partition, self.bucket, self.shard)


DuePage: TypeAlias = tuple[list[DueEntry], DuePageToken | None]
"""The answer of a due-index query: its entries, oldest first, and where the next page starts (None: no more)."""


STATE_BATCH = 100
"""Scheduling states one read request takes at most (DynamoDB's BatchGetItem: 100 keys); the tick reads its
batches concurrently (``DueIndex.scheduling_states``)."""


class DueIndex(Protocol):
    """What the tick needs from the job store."""

    def due_lanes(self) -> tuple[str, ...]:
        """The lanes that may hold entries: :data:`TIMER_LANES`, plus :data:`INDEX` while entries of the due
        index's GSI layout may remain (until ``DueRepair.migrate_due_index`` has moved every one)."""
        ...

    def query_due(self, query: DueQuery) -> DuePage:
        """The page of entries ``query`` asks for, in the lane's order, and where the next page starts (None: no
        more). Entries may be stale (their job moved on): the tick re-reads each job's state before acting. A
        write that returned is visible to the next query (timer lanes are read strongly consistent; the
        :data:`INDEX` lane may lag)."""
        ...

    def put_timers(self, entries: Sequence[DueEntry]) -> None:
        """File ``entries`` in the due index before the moves that point the jobs' states at them (a timer
        written without its move is a stale hint, a move without its timer would never be found). Raises the
        store's error when any was not written."""
        ...

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        """The current states of ``job_ids`` by job id, read strongly consistent; absent jobs are left out."""
        ...

    def move(self, move: Move) -> None:
        """Move a job on after a fire, fenced as :class:`Move` tells (its new entry already filed by
        :meth:`put_timers`). Raises ``Conflict`` (``current``: the stored ``SchedulingState``, or None when the job
        is gone)."""
        ...

    def oldest_due_bucket(self, partition: int) -> int | None:
        """The oldest bucket holding an entry of ``partition`` (None: none). Slow: for bootstrapping only."""
        ...


class JobRepository(Protocol):
    """What the API's ``JobService`` needs from the job store. Reads are strongly consistent."""

    def create(
        self,
        job: Job,
        state: SchedulingState,
        event: AuditEvent | None = None,
        usage: UsageChange | None = None,
    ) -> None:
        """Store a new job and its state, taking its name, and ``event`` with them, adding ``usage`` to its owner's
        quota usage (all or nothing; a refused create adds nothing); the job's ``quota_rate`` is the count the
        usage holds for it (``domain.quotas.count_change``; None with no usage). Raises
        ``NameTaken(job_id of the holder)``, or ``Conflict`` when the name was taken and released meanwhile."""
        ...

    def get(self, job_id: str) -> StoredJob:
        """The live job ``job_id``. Raises ``NotFound`` (absent or deleted)."""
        ...

    def job_id_by_name(self, owner: str, name: str) -> str | None:
        """The id of the owner's live job called ``name``, or None."""
        ...

    def list_by_owner(
        self,
        owner: str,
        limit: int,
        after: tuple[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[list[StoredJob], tuple[str, str] | None]:
        """A page of at most ``limit`` of the owner's live jobs ordered by name, after ``after = (name,
        job_id)``, and ``(name, job_id)`` of its last job when more may follow (else None).

        With ``labels`` (a selector, ``jobsched.labels.matches``), only the jobs carrying every one of them: a
        store may then read ``limit`` jobs and return the matching ones, so a page may be short, even empty,
        while more follow; its cursor is then the last job read."""
        ...

    def dependents(self, job_id: str) -> list[StoredJob]:
        """The live jobs whose ``after`` names ``job_id`` (its downstream jobs, design §2.1), by name."""
        ...

    def replace(self, rewrite: Rewrite) -> None:
        """Rewrite a job and its state, and record the rewrite's ``event`` with them (all or nothing). Refused
        with ``Conflict`` when the stored job is not the one the :class:`Rewrite` expects (its ``updated_at``, its
        state, its ``quota_rate``: ``Rewrite.quota_rate_read``), or it was deleted."""
        ...

    def delete(
        self,
        job: Job,
        *,
        deleted_at_ms: int,
        retention_days: int | None,
        event: AuditEvent | None = None,
        usage: UsageChange | None = None,
    ) -> None:
        """Delete a job: its state and due entry go, its name is free again (unless a newer job holds it), and,
        with ``retention_days``, a tombstone keeps its run history's owner known for that long; ``event`` is
        recorded and ``usage`` added to its owner's quota usage with it (all or nothing), only while the stored
        job's ``quota_rate`` is still ``job``'s (the count ``usage`` takes away). Raises ``NotFound`` when it is
        already deleted, ``Conflict`` when its ``quota_rate`` changed since ``job`` was read."""
        ...

    def record_event(self, event: AuditEvent) -> None:
        """Record an event that changes no job (a trigger, a retried run, a backfill). Writing the same
        ``(job_id, at, key)`` again replaces it."""
        ...

    def list_events(
        self, job_id: str, limit: int, before: str | None = None
    ) -> tuple[list[AuditEvent], str | None]:
        """A page of at most ``limit`` of the job's events, newest first, older than ``before`` (a
        ``AuditEvent.position``), and the last one's position when more may follow (else None). Events outlive
        the job's deletion (until they expire)."""
        ...

    def history_owner(self, job_id: str) -> str | None:
        """The owner of the job's run history: of the live job, or of the deleted one while its tombstone
        lasts; None when there is neither."""
        ...
