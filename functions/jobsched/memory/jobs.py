"""The job store in memory: ``ports.jobs.JobRepository``, ``ports.jobs.DueIndex`` and the worker's view of jobs
``ports.run_stores.JobSpecs`` (a job's spec and its overlap lock) with the DynamoDB adapter's conditions
(``store.jobs.JobStore``), held to the same contracts (``tests/contract/test_job_store_contract.py``,
``tests/contract/test_job_specs_contract.py``). Thread-safe; reads are always consistent."""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

from jobsched.clock import from_ms, to_ms
from jobsched.domain.due_repair import RefilePass, is_stuck, refiled_entry
from jobsched.domain.quotas import check_usage, count_change
from jobsched.labels import matches
from jobsched.models import Job
from jobsched.ports.errors import Conflict, NameTaken, NotFound
from jobsched.ports.jobs import TIMER_LANES, AuditEvent, DueEntry, SchedulingState, StoredJob, Unreadable
from jobsched.ports.quotas import OwnerUsage, RecountProgress, UsageChange
from jobsched.ports.runs import (
    RESERVED_WORKER,
    BufferAnswer,
    BufferRequest,
    OverlapHolder,
    OverlapRequest,
)

if TYPE_CHECKING:
    from jobsched.ports.jobs import DueCursor, DuePage, DueQuery, Move, Rewrite


@dataclass(frozen=True)
class _Tombstone:
    owner: str
    deleted_at_ms: int


class _States(dict[str, "SchedulingState | Unreadable"]):
    """Job id -> scheduling state, with the due index kept beside it as the DynamoDB adapter keeps it: timer
    entries filed under ``(partition, bucket, shard, lane)`` in the lane's order (``DueEntry.order``), never
    removed when the job moves on (DynamoDB's expire by TTL, which moto never runs). A due query costs what its
    lane holds after the read position, as on DynamoDB, not a scan of every job (the rush simulation's
    millions). Every write of a state files its entry: through ``__setitem__`` (creation, edits, tests writing
    states) and ``DueIndex.put_timers`` (the tick files the next entry before its move)."""

    def __init__(self) -> None:
        super().__init__()
        self.timers: dict[tuple[int, int, int, str], list[DueEntry]] = defaultdict(list)

    def file(self, entry: DueEntry) -> None:
        """File ``entry`` in its lane (again: a no-op)."""
        lane = self.timers[(entry.partition, entry.bucket, entry.shard, entry.lane)]
        at = bisect.bisect_left(lane, entry.order, key=lambda e: e.order)
        if at < len(lane) and lane[at].order == entry.order:
            lane[at] = entry
        else:
            lane.insert(at, entry)

    def __setitem__(self, job_id: str, state: SchedulingState | Unreadable) -> None:
        super().__setitem__(job_id, state)
        if isinstance(state, SchedulingState) and state.due is not None:
            self.file(state.due)


def _same_try(held: OverlapHolder, run_id: str, attempt: int | None, worker: str | None) -> bool:
    return (held.run_id, held.attempt, held.worker) == (run_id, attempt, worker)


# --- the conditions of the job store's writes, shared by the stores that check them in Python (this fake and
# the SQLite adapter, ``jobsched.sqlite.jobs``); the DynamoDB adapter states them as condition expressions.


def stored_job(job: Job, state: SchedulingState | Unreadable | None) -> StoredJob:
    """The ``StoredJob`` of a job's spec and its stored state (``paused``/``next_run_at`` from the state)."""
    typed = state if isinstance(state, SchedulingState) else None
    next_run_at = typed.next_run_at if typed else None
    job = job.model_copy(
        update={
            "paused": typed.paused if typed else False,
            "next_run_at": from_ms(next_run_at) if next_run_at is not None else None,
        }
    )
    return StoredJob(job, typed)


def check_replace(
    stored_updated_at_ms: int | None, stored: SchedulingState | Unreadable | None, rewrite: Rewrite
) -> None:
    """``JobRepository.replace``'s condition on what is stored (``stored_updated_at_ms`` None: no live job).
    Raises ``Conflict``."""
    expected_state = rewrite.expected_state
    if stored_updated_at_ms is None or stored_updated_at_ms != rewrite.expected_updated_at:
        raise Conflict("the job changed meanwhile; read it again")
    if expected_state is not None and (
        not isinstance(stored, SchedulingState) or (stored.next_run_at, stored.term) != expected_state
    ):
        raise Conflict("the job changed meanwhile; read it again")


def moved_state(stored: SchedulingState | Unreadable | None, move: Move) -> SchedulingState:
    """The state after ``DueIndex.move`` from ``stored``. Raises ``Conflict`` (``current``: the stored state,
    or None) unless it still has ``move.expected_next_run_at`` and ``move.expected_version``, is in the due
    index, is homed in ``move.partition`` and its term is at most ``move.term``."""
    current = stored if isinstance(stored, SchedulingState) else None
    if (
        current is None
        or current.next_run_at != move.expected_next_run_at
        or current.due is None
        or current.partition != move.partition
        or current.term > move.term
        or current.version != move.expected_version
    ):
        raise Conflict("scheduling item moved, edited or fenced", current)
    return replace(
        current,
        term=move.new_term,
        partition=move.to_partition if move.rehome and move.to_partition is not None else current.partition,
        next_run_at=move.next_run_at,
        due=move.due if move.next_run_at is not None else None,
    )


def _held_on(held: OverlapHolder, held_after_ms: int | None) -> bool:
    """Whether ``held`` is held on past its try's record (``OverlapRequest.held_after_ms``)."""
    return held_after_ms is not None and held.heartbeat_at is not None and held.heartbeat_at > held_after_ms


def overlap_free(held: OverlapHolder | None, request: OverlapRequest) -> bool:
    """Whether ``JobSpecs.acquire_overlap`` may take a lock ``held`` (None: free) for ``request``: free, this
    run's (unless held on past its try's record), or stale (``heartbeat_at < request.stale_before_ms``, epoch
    ms) when not reserved and no other fire waits; with ``request.replacing``, exactly when that try holds it
    and no other fire waits (``ports.runs.OverlapRequest``)."""
    if held is None:
        return request.replacing is None
    queue_free = held.waiting in (None, request.run_id)
    replacing = request.replacing
    if replacing is not None:
        return queue_free and _same_try(held, replacing.run_id, replacing.attempt, replacing.worker)
    if held.run_id == request.run_id:
        return held.reserved or not _held_on(held, request.held_after_ms)
    stale = held.heartbeat_at is not None and held.heartbeat_at < request.stale_before_ms
    return stale and not held.reserved and queue_free


def taken_overlap(held: OverlapHolder | None, request: OverlapRequest) -> OverlapHolder:
    """The lock as ``request`` takes it from ``held``: the fire that waits is kept."""
    return replace(request.holder, buffered=held.buffered if held is not None else None)


def buffered_overlap(held: OverlapHolder | None, request: BufferRequest) -> OverlapHolder | None:
    """The lock after ``JobSpecs.buffer_overlap`` of ``request`` on ``held``, or None when refused: held, and no
    other fire waits (with ``request.replacing``: exactly that fire waits)."""
    if held is None:
        return None
    if request.replacing is not None:
        allowed = held.waiting == request.replacing
    else:
        allowed = held.waiting in (None, request.run_id)
    return replace(held, buffered=request.run_id) if allowed else None


def released_overlap(
    held: OverlapHolder | None, run_id: str, attempt: int, worker: str
) -> OverlapHolder | None:
    """The lock after ``JobSpecs.release_overlap`` by the try ``(run_id, attempt, worker)`` (None: free): freed
    when that try holds it and no fire waits; handed to the fire that waits (``RESERVED_WORKER``, attempt 0, its
    ``heartbeat_at`` kept) when one does; as it was when another try holds it."""
    if held is None or not _same_try(held, run_id, attempt, worker):
        return held
    waiting = held.waiting
    if waiting is None:
        return None
    return OverlapHolder(waiting, 0, RESERVED_WORKER, held.heartbeat_at, waiting)


class MemoryJobStore:
    """Jobs, their scheduling states, name locks, tombstones and overlap locks in dicts (see the module
    docstring). ``locks`` maps a job id to the try holding its overlap lock; like the DynamoDB lock item, it
    outlives the job's deletion.

    ``states`` may be written directly by tests (e.g. an ``Unreadable`` to stand for a malformed item)."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.states: dict[str, SchedulingState | Unreadable] = _States()
        self.names: dict[tuple[str, str], str] = {}
        self.tombstones: dict[str, _Tombstone] = {}
        self.locks: dict[str, OverlapHolder] = {}
        self.events: dict[str, dict[str, AuditEvent]] = {}
        self.usages: dict[str, OwnerUsage] = {}
        self.windows: dict[tuple[str, int], int] = {}
        self.recount = RecountProgress()
        self._lock = threading.RLock()

    # --- JobRepository ------------------------------------------------------------------------

    def create(
        self,
        job: Job,
        state: SchedulingState,
        event: AuditEvent | None = None,
        usage: UsageChange | None = None,
    ) -> None:
        """Store a new job, its state, its name and ``event``, adding ``usage`` to its owner's. Raises
        ``NameTaken(job_id of the holder)``."""
        with self._lock:
            holder = self.names.get((job.owner, job.name))
            if holder is not None:
                raise NameTaken(holder)
            self._check_usage(usage)
            self.names[(job.owner, job.name)] = job.id
            self.jobs[job.id] = job
            self.states[job.id] = state
            self.tombstones.pop(job.id, None)
            self._record(event)
            self._add_usage(usage)

    def _check_usage(self, usage: UsageChange | None) -> None:
        if usage is not None:
            check_usage(usage, self.usages.get(usage.owner, OwnerUsage()))

    def _add_usage(self, usage: UsageChange | None) -> None:
        if usage is not None:
            held = self.usages.get(usage.owner, OwnerUsage())
            self.usages[usage.owner] = OwnerUsage(held.jobs + usage.jobs, held.fire_rate + usage.fire_rate)

    # --- QuotaRecount -------------------------------------------------------------------------

    def recount_progress(self) -> RecountProgress:
        """The stored progress of the recount."""
        with self._lock:
            return self.recount

    def save_recount_progress(self, progress: RecountProgress) -> None:
        """Store the recount's progress."""
        with self._lock:
            self.recount = progress

    def uncounted_jobs(self, cursor: str | None, limit: int) -> tuple[list[Job], str | None]:
        """The uncounted among the next ``limit`` live jobs by id after ``cursor`` (a job id)."""
        with self._lock:
            ids = sorted(job_id for job_id in self.jobs if cursor is None or job_id > cursor)
            page = [self.jobs[job_id] for job_id in ids[:limit]]
        more = len(ids) > limit and limit > 0
        return [job for job in page if job.quota_rate is None], (page[-1].id if more and page else None)

    def count_job(self, job: Job, rate: int) -> bool:
        """Count the job and set its ``quota_rate`` unless it changed (``QuotaRecount.count_job``)."""
        with self._lock:
            held = self.jobs.get(job.id)
            if held is None or held.quota_rate is not None or held.updated_at != job.updated_at:
                return False
            self.jobs[job.id] = held.model_copy(update={"quota_rate": rate})
            self._add_usage(count_change(job.owner, None, rate))
            return True

    # --- QuotaCounters ------------------------------------------------------------------------

    def usage(self, owner: str) -> OwnerUsage:
        """The owner's usage (zeros when none)."""
        with self._lock:
            return self.usages.get(owner, OwnerUsage())

    def count_request(self, owner: str, window_ms: int, limit: int, expires_at_s: int) -> int | None:
        """Count one request in the owner's window unless it holds ``limit``: the new count, or None. Windows do
        not expire here."""
        with self._lock:
            held = self.windows.get((owner, window_ms), 0)
            if held >= limit:
                return None
            self.windows[(owner, window_ms)] = held + 1
            return held + 1

    def requests_in(self, owner: str, window_ms: int) -> int:
        """The requests the owner's window holds."""
        with self._lock:
            return self.windows.get((owner, window_ms), 0)

    def _record(self, event: AuditEvent | None) -> None:
        if event is not None:
            self.events.setdefault(event.job_id, {})[event.position] = event

    def record_event(self, event: AuditEvent) -> None:
        """Record ``event`` (the same ``(job_id, at, key)`` again replaces it)."""
        with self._lock:
            self._record(event)

    def list_events(
        self, job_id: str, limit: int, before: str | None = None
    ) -> tuple[list[AuditEvent], str | None]:
        """A page of the job's events, newest first, older than ``before``; the last one's position when more
        follow. Events do not expire here."""
        with self._lock:
            ordered = sorted(self.events.get(job_id, {}).items(), reverse=True)
        found = [event for position, event in ordered if before is None or position < before]
        page = found[:limit]
        return page, (page[-1].position if len(found) > limit else None)

    def get(self, job_id: str) -> StoredJob:
        """The live job ``job_id``. Raises ``NotFound``."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                raise NotFound(job_id)
            return self._stored(job)

    def _stored(self, job: Job) -> StoredJob:
        counted = job.model_copy(update={"downstream_count": self._downstream_count(job.id)})
        return stored_job(counted, self.states.get(job.id))

    def _downstream_count(self, job_id: str) -> int:
        """The chain mark of ``job_id`` (design §2.1): the jobs held whose ``after`` names it (exact)."""
        return sum(1 for other in self.jobs.values() if other.after and other.after.job == job_id)

    def job_id_by_name(self, owner: str, name: str) -> str | None:
        """The id of the owner's job called ``name``, or None."""
        with self._lock:
            return self.names.get((owner, name))

    def list_by_owner(
        self,
        owner: str,
        limit: int,
        after: tuple[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[list[StoredJob], tuple[str, str] | None]:
        """A page of the owner's live jobs carrying ``labels`` ordered by ``(name, job_id)``, after ``after``;
        the last one's ``(name, job_id)`` when more follow."""
        with self._lock:
            mine = sorted(
                (job.name, job.id)
                for job in self.jobs.values()
                if job.owner == owner and matches(job.labels, labels or {})
            )
            if after is not None:
                mine = [key for key in mine if key > after]
            page = mine[:limit]
            more = len(mine) > limit
            return [self._stored(self.jobs[job_id]) for _, job_id in page], (page[-1] if more else None)

    def dependents(self, job_id: str) -> list[StoredJob]:
        """The live jobs whose ``after`` names ``job_id`` (design §2.1), by name."""
        with self._lock:
            found = sorted(
                (job.name, job.id) for job in self.jobs.values() if job.after and job.after.job == job_id
            )
            return [self._stored(self.jobs[found_id]) for _, found_id in found]

    def replace(self, rewrite: Rewrite) -> None:
        """Rewrite a job and its state, recording the rewrite's ``event``; ``Conflict`` when it changed
        (``updated_at``), was deleted, or (with ``expected_state``) its ``(next_run_at, term)`` changed."""
        job = rewrite.job
        with self._lock:
            current = self.jobs.get(job.id)
            updated_at = to_ms(current.updated_at) if current is not None else None
            check_replace(updated_at, self.states.get(job.id), rewrite)
            if current is not None and current.quota_rate != rewrite.quota_rate_read:
                raise Conflict("the job's quota count changed meanwhile; read it again")
            self._check_usage(rewrite.usage)
            self.jobs[job.id] = job
            self.states[job.id] = rewrite.state
            self._record(rewrite.event)
            self._add_usage(rewrite.usage)

    def delete(
        self,
        job: Job,
        *,
        deleted_at_ms: int,
        retention_days: int | None,
        event: AuditEvent | None = None,
        usage: UsageChange | None = None,
    ) -> None:
        """Delete a live job (state, due entry and name go; a tombstone stays with ``retention_days``), recording
        ``event`` and adding ``usage`` to its owner's. Raises ``NotFound`` when it is already deleted, ``Conflict``
        when its ``quota_rate`` is no longer ``job``'s. Tombstones do not expire here."""
        with self._lock:
            held = self.jobs.get(job.id)
            if held is None:
                raise NotFound(job.id)
            if held.quota_rate != job.quota_rate:
                raise Conflict("the job's quota count changed meanwhile; read it again")
            del self.jobs[job.id]
            self.states.pop(job.id, None)
            if self.names.get((job.owner, job.name)) == job.id:
                del self.names[(job.owner, job.name)]
            if retention_days is not None:
                self.tombstones[job.id] = _Tombstone(job.owner, deleted_at_ms)
            self._record(event)
            self._add_usage(usage)

    def history_owner(self, job_id: str) -> str | None:
        """The owner of the live job, or of the deleted one's tombstone; None when there is neither."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is not None:
                return job.owner
            tombstone = self.tombstones.get(job_id)
            return tombstone.owner if tombstone else None

    # --- JobSpecs: the worker's view and the overlap lock ----------------------------------------

    def get_spec(self, job_id: str) -> Job | None:
        """The live job as its spec alone gives it (not paused, no ``next_run_at``: no scheduling state), or
        None when deleted; its ``downstream_count`` counted from the jobs held (exact, read under the lock)."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                return None
            return job.model_copy(
                update={
                    "paused": False,
                    "next_run_at": None,
                    "downstream_count": self._downstream_count(job_id),
                }
            )

    def get_specs(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """``get_spec`` of each of ``job_ids`` by job id, the deleted ones left out."""
        return {
            job_id: job for job_id in dict.fromkeys(job_ids) if (job := self.get_spec(job_id)) is not None
        }

    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder | None:
        """Take the lock for ``request``'s try when :func:`overlap_free`: None when taken, else the holder.
        ``expires_at_s`` is not kept (locks do not expire here)."""
        with self._lock:
            held = self.locks.get(request.job_id)
            if not overlap_free(held, request):
                return held or OverlapHolder(run_id="?")
            self.locks[request.job_id] = taken_overlap(held, request)
            return None

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool:
        """Set the lock's ``heartbeat_at`` to ``now_ms`` if this try holds it; False when it does not."""
        with self._lock:
            held = self.locks.get(job_id)
            if held is None or not _same_try(held, run_id, attempt, worker):
                return False
            self.locks[job_id] = replace(held, heartbeat_at=now_ms)
            return True

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> str | None:
        """Give the lock back if this try holds it (else nothing), or hand it to the fire that waits for it
        (:func:`released_overlap`): that fire's run id, else None."""
        with self._lock:
            held = self.locks.get(job_id)
            after = released_overlap(held, run_id, attempt, worker)
            if after is None:
                self.locks.pop(job_id, None)
            else:
                self.locks[job_id] = after
            return after.run_id if after is not None and after is not held else None

    def buffer_overlap(self, request: BufferRequest) -> BufferAnswer:
        """Make ``request``'s run the fire that waits for the lock when :func:`buffered_overlap` allows it."""
        with self._lock:
            held = self.locks.get(request.job_id)
            after = buffered_overlap(held, request)
            if after is None:
                return BufferAnswer(False, held)
            self.locks[request.job_id] = after
            return BufferAnswer(True, after)

    # --- DueIndex -----------------------------------------------------------------------------

    def _due_index(self) -> _States:
        assert isinstance(self.states, _States)  # set at construction; tests write states item by item
        return self.states

    def due_lanes(self) -> tuple[str, ...]:
        """The timer lanes (this store never had the old index)."""
        return TIMER_LANES

    def query_due(self, query: DueQuery) -> DuePage:
        """A page of ``query.lane``'s entries under ``query.key`` sorted after ``query.start`` (or after the token,
        the last entry's ``order``, when more follow) with ``at <= query.up_to_ms``. Stale entries included, as
        on DynamoDB. Reads only that lane (``_States``)."""
        start = cast("DueCursor | None", query.after) if query.after is not None else query.start
        with self._lock:
            lane = self._due_index().timers.get((*query.key, query.lane), [])
            at = 0 if start is None else bisect.bisect_right(lane, start, key=lambda e: e.order)
            page: list[DueEntry] = []
            more = False
            for entry in lane[at:]:
                if entry.at > query.up_to_ms:
                    break
                if len(page) == query.limit:
                    more = True
                    break
                page.append(entry)
        return page, (page[-1].order if more else None)

    def put_timers(self, entries: Sequence[DueEntry]) -> None:
        """File ``entries`` (``DueIndex.put_timers``)."""
        with self._lock:
            for entry in entries:
                self._due_index().file(entry)

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        """The current states of ``job_ids`` (absent ones left out)."""
        with self._lock:
            return {job_id: self.states[job_id] for job_id in job_ids if job_id in self.states}

    def move(self, move: Move) -> None:
        """The fenced ``DueIndex.move``: ``Conflict`` (with the stored state) unless the state is the one the move
        was planned from (see :class:`Move`)."""
        with self._lock:
            self.states[move.job_id] = moved_state(self.states.get(move.job_id), move)

    def _current_entries(self) -> list[DueEntry]:
        with self._lock:
            return [
                s.due for s in self.states.values() if isinstance(s, SchedulingState) and s.due is not None
            ]

    def oldest_due_bucket(self, partition: int) -> int | None:
        """The oldest bucket holding the current entry of a job of ``partition``, or None."""
        return min((e.bucket for e in self._current_entries() if e.partition == partition), default=None)

    def highest_due_partition(self) -> int | None:
        """The highest partition any job's current entry is in, or None when there is none."""
        return max((e.partition for e in self._current_entries()), default=None)

    def highest_due_shard(self) -> int | None:
        """The highest due shard any job's current entry is in, or None when there is none."""
        return max((e.shard for e in self._current_entries()), default=None)

    # --- the due index's repair -----------------------------------------------------------------

    def refile_stuck(
        self, clock: Callable[[], int], *, bucket_ms: int, shards: int, watermarks: Mapping[int, int]
    ) -> RefilePass:
        """One pass of the due index's anti-entropy over every state (read consistently: no second read): a job
        whose entry ``domain.due_repair.is_stuck`` takes for lost at ``clock()`` (epoch ms) and ``watermarks``
        (partition -> watermark bucket) gets ``domain.due_repair.refiled_entry`` filed (in one of ``shards``
        shards, buckets ``bucket_ms`` wide), its state unchanged, as on DynamoDB. A state this code cannot
        read is counted (``unreadable``) and skipped. Returns the pass (``wrapped``: always, every state is
        read)."""
        now_ms = clock()
        with self._lock:
            states = list(self.states.values())
            stuck = [
                refiled_entry(state.due, now_ms=now_ms, shards=shards, bucket_ms=bucket_ms)
                for state in states
                if isinstance(state, SchedulingState)
                and is_stuck(state.due, now_ms=now_ms, watermarks=watermarks)
            ]
            for entry in stuck:
                self._due_index().file(entry)
        return RefilePass(
            scanned=len(states),
            refiled=[entry.job_id for entry in stuck],
            wrapped=True,
            unreadable=sum(isinstance(state, Unreadable) for state in states),
        )
