"""The job store in memory: ``ports.jobs.JobRepository``, ``ports.jobs.DueIndex`` and the worker's view of jobs
``ports.runs.JobSpecs`` (a job's spec and its overlap lock) with the DynamoDB adapter's conditions
(``store.jobs.JobStore``), held to the same contracts (``tests/contract/test_job_store_contract.py``,
``tests/contract/test_job_specs_contract.py``). Thread-safe; reads are always consistent."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from jobsched.models import Job, from_ms, to_ms
from jobsched.ports.errors import Conflict, NameTaken, NotFound
from jobsched.ports.jobs import AuditEvent, DueEntry, SchedulingState, StoredJob, Unreadable
from jobsched.ports.runs import OverlapHolder, OverlapRequest

if TYPE_CHECKING:
    from jobsched.ports.jobs import DuePage, DueQuery, Move, Rewrite


@dataclass(frozen=True)
class _Tombstone:
    owner: str
    deleted_at_ms: int


class _States(dict[str, "SchedulingState | Unreadable"]):
    """Job id -> scheduling state, with the due index kept beside it: the entries of each ``(partition,
    bucket, shard)`` by job id, and per key a list sorted by ``(due_at, job_id)`` that may hold stale
    entries (skipped when read, rebuilt when new ones arrive or stale ones outnumber the live), so a due
    query costs what its key holds, as on DynamoDB, not a scan of every job (the rush simulation's
    millions). Every write of a state goes through ``__setitem__``/``__delitem__``/``pop``."""

    def __init__(self) -> None:
        super().__init__()
        self.due: dict[tuple[int, int, int], dict[str, DueEntry]] = defaultdict(dict)
        self.sorted: dict[tuple[int, int, int], list[DueEntry]] = {}

    @staticmethod
    def _due_of(state: object) -> DueEntry | None:
        return state.due if isinstance(state, SchedulingState) else None

    def _unindex(self, job_id: str) -> None:
        old = self._due_of(self.get(job_id))
        if old is not None:
            key = (old.partition, old.bucket, old.shard)
            self.due[key].pop(job_id, None)
            if not self.due[key]:
                del self.due[key]
                self.sorted.pop(key, None)

    def __setitem__(self, job_id: str, state: SchedulingState | Unreadable) -> None:
        self._unindex(job_id)
        super().__setitem__(job_id, state)
        new = self._due_of(state)
        if new is not None:
            key = (new.partition, new.bucket, new.shard)
            self.due[key][job_id] = new
            self.sorted.pop(key, None)

    def __delitem__(self, job_id: str) -> None:
        self._unindex(job_id)
        super().__delitem__(job_id)

    def pop(self, job_id: str, *default: Any) -> Any:  # type: ignore[override]
        self._unindex(job_id)
        return super().pop(job_id, *default)

    def entries(self, key: tuple[int, int, int]) -> list[DueEntry]:
        """The entries filed under ``key``, ordered by ``(due_at, job_id)`` (possibly with stale ones: check
        ``due[key]``)."""
        live = self.due.get(key, {})
        ordered = self.sorted.get(key)
        if ordered is None or len(ordered) > 2 * len(live) + 100:
            ordered = self.sorted[key] = sorted(live.values(), key=lambda e: (e.due_at, e.job_id))
        return ordered


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


def overlap_free(held: OverlapHolder | None, request: OverlapRequest) -> bool:
    """Whether ``JobSpecs.acquire_overlap`` may take a lock ``held`` (None: free) for ``request``: free, stale
    (``heartbeat_at < request.stale_before_ms``, epoch ms) or this run's; with ``request.replacing``, exactly when
    that try holds it."""
    replacing = request.replacing
    if replacing is None:
        return (
            held is None
            or (held.heartbeat_at is not None and held.heartbeat_at < request.stale_before_ms)
            or held.run_id == request.run_id
        )
    return held is not None and _same_try(held, replacing.run_id, replacing.attempt, replacing.worker)


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
        self._lock = threading.RLock()

    # --- JobRepository ------------------------------------------------------------------------

    def create(self, job: Job, state: SchedulingState, event: AuditEvent | None = None) -> None:
        """Store a new job, its state, its name and ``event``. Raises ``NameTaken(job_id of the holder)``."""
        with self._lock:
            holder = self.names.get((job.owner, job.name))
            if holder is not None:
                raise NameTaken(holder)
            self.names[(job.owner, job.name)] = job.id
            self.jobs[job.id] = job
            self.states[job.id] = state
            self.tombstones.pop(job.id, None)
            self._record(event)

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
        return stored_job(job, self.states.get(job.id))

    def job_id_by_name(self, owner: str, name: str) -> str | None:
        """The id of the owner's job called ``name``, or None."""
        with self._lock:
            return self.names.get((owner, name))

    def list_by_owner(
        self, owner: str, limit: int, after: tuple[str, str] | None = None
    ) -> tuple[list[StoredJob], tuple[str, str] | None]:
        """A page of the owner's live jobs ordered by ``(name, job_id)``, after ``after``; the last one's
        ``(name, job_id)`` when more follow."""
        with self._lock:
            mine = sorted((job.name, job.id) for job in self.jobs.values() if job.owner == owner)
            if after is not None:
                mine = [key for key in mine if key > after]
            page = mine[:limit]
            more = len(mine) > limit
            return [self._stored(self.jobs[job_id]) for _, job_id in page], (page[-1] if more else None)

    def replace(self, rewrite: Rewrite) -> None:
        """Rewrite a job and its state, recording the rewrite's ``event``; ``Conflict`` when it changed
        (``updated_at``), was deleted, or (with ``expected_state``) its ``(next_run_at, term)`` changed."""
        job = rewrite.job
        with self._lock:
            current = self.jobs.get(job.id)
            updated_at = to_ms(current.updated_at) if current is not None else None
            check_replace(updated_at, self.states.get(job.id), rewrite)
            self.jobs[job.id] = job
            self.states[job.id] = rewrite.state
            self._record(rewrite.event)

    def delete(
        self, job: Job, *, deleted_at_ms: int, retention_days: int | None, event: AuditEvent | None = None
    ) -> None:
        """Delete a live job (state, due entry and name go; a tombstone stays with ``retention_days``), recording
        ``event``. Raises ``NotFound`` when it is already deleted. Tombstones do not expire here."""
        with self._lock:
            if self.jobs.pop(job.id, None) is None:
                raise NotFound(job.id)
            self.states.pop(job.id, None)
            if self.names.get((job.owner, job.name)) == job.id:
                del self.names[(job.owner, job.name)]
            if retention_days is not None:
                self.tombstones[job.id] = _Tombstone(job.owner, deleted_at_ms)
            self._record(event)

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
        None when deleted."""
        with self._lock:
            job = self.jobs.get(job_id)
            return job.model_copy(update={"paused": False, "next_run_at": None}) if job is not None else None

    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder | None:
        """Take the lock for ``request``'s try when :func:`overlap_free`: None when taken, else the holder.
        ``expires_at_s`` is not kept (locks do not expire here)."""
        with self._lock:
            held = self.locks.get(request.job_id)
            if not overlap_free(held, request):
                return held or OverlapHolder(run_id="?")
            self.locks[request.job_id] = request.holder
            return None

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool:
        """Set the lock's ``heartbeat_at`` to ``now_ms`` if this try holds it; False when it does not."""
        with self._lock:
            held = self.locks.get(job_id)
            if held is None or not _same_try(held, run_id, attempt, worker):
                return False
            self.locks[job_id] = OverlapHolder(run_id, attempt, worker, now_ms)
            return True

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> None:
        """Give the lock back if this try holds it (else nothing)."""
        with self._lock:
            held = self.locks.get(job_id)
            if held is not None and _same_try(held, run_id, attempt, worker):
                del self.locks[job_id]

    # --- DueIndex -----------------------------------------------------------------------------

    def _due_index(self) -> _States:
        assert isinstance(self.states, _States)  # set at construction; tests write states item by item
        return self.states

    def query_due(self, query: DueQuery) -> DuePage:
        """A page of the entries of ``query.key`` due by ``query.up_to_ms``, ordered by ``(due_at, job_id)``; the
        token is the last entry's ``(due_at, job_id)`` when more follow. Reads only that key's entries
        (``_States``)."""
        key, after = query.key, query.after
        page: list[DueEntry] = []
        more = False
        with self._lock:
            index = self._due_index()
            live = index.due.get(key, {})
            for entry in index.entries(key):
                if entry.due_at > query.up_to_ms:
                    break
                if live.get(entry.job_id) != entry:
                    continue  # stale: the job moved since the list was sorted
                if after is not None and (entry.due_at, entry.job_id) <= after:  # type: ignore[operator]
                    continue
                if len(page) == query.limit:
                    more = True
                    break
                page.append(entry)
        return page, ((page[-1].due_at, page[-1].job_id) if more else None)

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        """The current states of ``job_ids`` (absent ones left out)."""
        with self._lock:
            return {job_id: self.states[job_id] for job_id in job_ids if job_id in self.states}

    def move(self, move: Move) -> None:
        """The fenced ``DueIndex.move``: ``Conflict`` (with the stored state) unless the state is the one the move
        was planned from (see :class:`Move`)."""
        with self._lock:
            self.states[move.job_id] = moved_state(self.states.get(move.job_id), move)

    def oldest_due_bucket(self, partition: int) -> int | None:
        """The oldest bucket holding an entry of ``partition``, or None."""
        with self._lock:
            return min((key[1] for key in self._due_index().due if key[0] == partition), default=None)

    def highest_due_partition(self) -> int | None:
        """The highest partition any entry is in, or None when there is none."""
        with self._lock:
            return max((key[0] for key in self._due_index().due), default=None)
