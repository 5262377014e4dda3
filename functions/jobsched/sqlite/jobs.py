"""The job store on SQLite: ``ports.jobs.JobRepository``, ``ports.jobs.DueIndex`` and the worker's view
``ports.run_stores.JobSpecs``, with the conditions of the DynamoDB adapter (``jobsched.dynamodb.jobs.JobStore``), held
to the same contracts (``tests/contract/test_job_store_contract.py``, ``test_job_specs_contract.py``).

One row per live job in ``jobs``: its spec (the job model as JSON), its scheduling state (JSON) and the state's
due entry in columns indexed by ``(partition, bucket, shard, lane)`` then ``DueEntry.order``, so a due query reads
only the entries it returns. A row holds only its job's current entry: unlike DynamoDB's timer items, none is
left behind when the job moves (the tick's reads are the same). Names, tombstones and overlap locks have tables of their own. Reads are consistent. The conditions of
``replace``, ``move`` and ``acquire_overlap`` are the in-memory fake's (``jobsched.memory.jobs``: ``check_replace``,
``moved_state``, ``overlap_free``), checked on the stored row inside the write's transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from jobsched.clock import to_ms
from jobsched.domain.due_repair import RefilePass, is_stuck, refiled_entry, stuck_due_before
from jobsched.memory.jobs import (
    buffered_overlap,
    check_replace,
    moved_state,
    overlap_free,
    released_overlap,
    stored_job,
    taken_overlap,
)
from jobsched.models import Job, MissedPolicy
from jobsched.ports.errors import Conflict, NameTaken, NotFound
from jobsched.ports.jobs import TIMER_LANES, DueEntry, SchedulingState, StoredJob, Unreadable, hinted_priority
from jobsched.ports.quotas import OwnerUsage, UsageChange
from jobsched.ports.runs import BufferAnswer, BufferRequest, OverlapHolder, OverlapRequest
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.recount import QUOTA_RATE_SQL, SqliteQuotaRecount, add_usage, spec_job

if TYPE_CHECKING:
    import sqlite3

    from jobsched.ports.jobs import DuePage, DueQuery, Move, Rewrite

_DAY_S = 86_400


def state_json(state: SchedulingState) -> str:
    """A scheduling state as stored: its fields as a JSON object (``missed`` by value, ``due`` nested)."""
    data = asdict(state)
    data["missed"] = state.missed.value
    return json.dumps(data, separators=(",", ":"))


def state_of(job_id: str, text: str | None) -> SchedulingState | Unreadable | None:
    """The stored state ``text`` of ``job_id`` (None: never written); ``Unreadable`` naming the problem when it
    is not a state this module wrote."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        due = data.pop("due", None)
        data["missed"] = MissedPolicy(data.get("missed", MissedPolicy.CATCH_UP.value))
        return SchedulingState(**data, due=DueEntry(**due) if due is not None else None)
    except (TypeError, ValueError) as error:
        return Unreadable(job_id, f"unreadable scheduling state: {error}")


_DUE_COLUMNS = "due_partition, due_bucket, due_shard, due_at, due_lane, due_position, due_version"
_SET_DUE = ", ".join(f"{column} = ?" for column in _DUE_COLUMNS.split(", "))


def _due_columns(state: SchedulingState) -> tuple[Any, ...]:
    """The values of ``_DUE_COLUMNS`` for ``state`` (its entry's ``order`` fields; all None when it has none)."""
    return _entry_columns(state.due)


def _entry_columns(due: DueEntry | None) -> tuple[Any, ...]:
    """The values of ``_DUE_COLUMNS`` for the entry ``due`` (its ``order`` fields; all None for None)."""
    if due is None:
        return (None,) * 7
    at, _, due_at, version = due.order
    return due.partition, due.bucket, due.shard, due_at, due.lane, at, version


_DOWNSTREAM_COUNT = (
    "(SELECT COUNT(*) FROM jobs AS down WHERE json_extract(down.spec, '$.after.job') = up.job_id)"
)
"""SQL of the ``downstream_count`` of the row ``up`` (the chain mark, design §2.1), on ``jobs_by_upstream``."""


def _spec_json(job: Job) -> str:
    """The row's ``spec``: the job without its state's fields, with its ``quota_rate`` (when counted)."""
    text = job.model_copy(update={"paused": False, "next_run_at": None}).model_dump_json()
    return text if job.quota_rate is None else f'{text[:-1]},"quota_rate":{job.quota_rate}}}'


class SqliteJobStore(SqliteQuotaRecount):
    """Jobs, their scheduling states, names, tombstones and overlap locks in ``database`` (see the module
    docstring). Raises ``StoreUnavailable`` when the database is busy or failing."""

    def __init__(self, database: SqliteDatabase) -> None:
        self.db = database

    # --- JobRepository ------------------------------------------------------------------------

    def create(
        self, job: Job, state: SchedulingState, event: Any = None, usage: UsageChange | None = None
    ) -> None:
        """Store a new job, its state, its name and the audit ``event`` (``jobsched.ports.jobs.AuditEvent``, or
        None), adding ``usage`` to its owner's, in one transaction. Raises ``NameTaken(job_id of the holder)``."""
        with self.db.write() as conn:
            holder = conn.execute(
                "SELECT job_id FROM names WHERE owner = ? AND name = ?", (job.owner, job.name)
            ).fetchone()
            if holder is not None:
                raise NameTaken(holder[0])
            conn.execute(
                "INSERT INTO names (owner, name, job_id) VALUES (?, ?, ?)", (job.owner, job.name, job.id)
            )
            conn.execute(
                f"INSERT INTO jobs (job_id, owner, name, updated_at, spec, state, {_DUE_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job.id,
                    job.owner,
                    job.name,
                    to_ms(job.updated_at),
                    _spec_json(job),
                    state_json(state),
                    *_due_columns(state),
                ),
            )
            conn.execute("DELETE FROM tombstones WHERE job_id = ?", (job.id,))
            add_usage(conn, usage)
            _record(conn, event)

    def record_event(self, event: Any) -> None:
        """Record an audit event that changes no job; the same ``(job_id, at, key)`` again replaces it."""
        with self.db.write() as conn:
            _record(conn, event)

    def list_events(self, job_id: str, limit: int, before: str | None = None) -> tuple[list[Any], str | None]:
        """A page of at most ``limit`` of the job's audit events, newest first, older than ``before`` (an event's
        ``position``), and the last one's position when more follow (else None). Events outlive the job
        (until retention reaps them)."""
        from jobsched.models import JobEventKind  # type: ignore[attr-defined]  # the audit trail's types
        from jobsched.ports.jobs import AuditEvent  # type: ignore[attr-defined]

        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT at, key, kind, actor, detail, expires_at_s, position FROM events WHERE job_id = ?"
                " AND position < ? ORDER BY position DESC LIMIT ?",
                (job_id, before if before is not None else "~", limit + 1),
            ).fetchall()
        page = [
            AuditEvent(job_id, at, key, JobEventKind(kind), actor, json.loads(detail), expires)
            for at, key, kind, actor, detail, expires, _ in rows[:limit]
        ]
        return page, (rows[limit - 1][6] if len(rows) > limit and limit > 0 else None)

    def get(self, job_id: str) -> StoredJob:
        """The live job ``job_id`` with its state (and its ``downstream_count``, as ``get_spec``). Raises
        ``NotFound``."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT spec, state, {_DOWNSTREAM_COUNT} FROM jobs AS up WHERE job_id = ?", (job_id,)
            ).fetchone()
        if row is None:
            raise NotFound(job_id)
        stored = _stored(job_id, row[0], row[1])
        return replace(stored, job=stored.job.model_copy(update={"downstream_count": int(row[2])}))

    def job_id_by_name(self, owner: str, name: str) -> str | None:
        """The id of the owner's live job called ``name``, or None."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT job_id FROM names WHERE owner = ? AND name = ?", (owner, name)
            ).fetchone()
        return str(row[0]) if row else None

    def list_by_owner(
        self,
        owner: str,
        limit: int,
        after: tuple[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[list[StoredJob], tuple[str, str] | None]:
        """A page of at most ``limit`` of the owner's live jobs carrying ``labels`` (each ``json_extract`` of
        the spec's ``labels`` member equal to the value) ordered by ``(name, job_id)`` after ``after``; the
        last one's ``(name, job_id)`` when more follow (else None)."""
        name, job_id = after if after is not None else ("", "")
        selector = sorted((labels or {}).items())
        # label keys are [A-Za-z0-9._/-] (jobsched.labels): safe inside a quoted JSON path member
        where = "".join(" AND json_extract(spec, ?) = ?" for _ in selector)
        terms = [part for key, value in selector for part in (f'$.labels."{key}"', value)]
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT job_id, name, spec, state FROM jobs WHERE owner = ? AND (name, job_id) > (?, ?)"
                f"{where} ORDER BY name, job_id LIMIT ?",
                (owner, name, job_id, *terms, limit + 1),
            ).fetchall()
        page = rows[:limit]
        more = len(rows) > limit
        return [_stored(r[0], r[2], r[3]) for r in page], (
            (page[-1][1], page[-1][0]) if more and page else None
        )

    def dependents(self, job_id: str) -> list[StoredJob]:
        """The live jobs whose ``after`` names ``job_id`` (design §2.1), by name: one read on the
        ``jobs_by_upstream`` index."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT job_id, spec, state FROM jobs WHERE json_extract(spec, '$.after.job') = ?"
                " ORDER BY name, job_id",
                (job_id,),
            ).fetchall()
        return [_stored(str(found), spec, state) for found, spec, state in rows]

    def replace(self, rewrite: Rewrite) -> None:
        """Rewrite a job and its state, recording the rewrite's audit ``event`` with them (one transaction);
        ``Conflict`` when the stored job is not the one ``rewrite`` expects (``check_replace``): nothing is
        written then."""
        job, state = rewrite.job, rewrite.state
        with self.db.write() as conn:
            row = conn.execute(
                f"SELECT updated_at, state, {QUOTA_RATE_SQL} FROM jobs WHERE job_id = ?", (job.id,)
            ).fetchone()
            check_replace(row[0] if row else None, state_of(job.id, row[1]) if row else None, rewrite)
            if row[2] != rewrite.quota_rate_read:
                raise Conflict("the job's quota count changed meanwhile; read it again")
            conn.execute(
                f"UPDATE jobs SET updated_at = ?, spec = ?, state = ?, {_SET_DUE} WHERE job_id = ?",
                (to_ms(job.updated_at), _spec_json(job), state_json(state), *_due_columns(state), job.id),
            )
            _record(conn, rewrite.event)
            add_usage(conn, rewrite.usage)

    def delete(
        self,
        job: Job,
        *,
        deleted_at_ms: int,
        retention_days: int | None,
        event: Any = None,
        usage: UsageChange | None = None,
    ) -> None:
        """Delete a live job: its state and due entry go, its name is freed unless a newer job holds it, with
        ``retention_days`` a tombstone keeps its history's owner that long, the audit ``event`` is recorded and
        ``usage`` added to its owner's (one transaction). Raises ``NotFound`` when it is already deleted, ``Conflict``
        when its ``quota_rate`` is no longer ``job``'s."""
        with self.db.write() as conn:
            row = conn.execute(f"SELECT {QUOTA_RATE_SQL} FROM jobs WHERE job_id = ?", (job.id,)).fetchone()
            if row is None:
                raise NotFound(job.id)
            if row[0] != job.quota_rate:
                raise Conflict("the job's quota count changed meanwhile; read it again")
            conn.execute("DELETE FROM jobs WHERE job_id = ?", (job.id,))
            conn.execute(
                "DELETE FROM names WHERE owner = ? AND name = ? AND job_id = ?", (job.owner, job.name, job.id)
            )
            if retention_days is not None:
                conn.execute(
                    "INSERT OR REPLACE INTO tombstones (job_id, owner, deleted_at, expires_at_s)"
                    " VALUES (?, ?, ?, ?)",
                    (job.id, job.owner, deleted_at_ms, deleted_at_ms // 1000 + retention_days * _DAY_S),
                )
            _record(conn, event)
            add_usage(conn, usage)

    # --- QuotaCounters ------------------------------------------------------------------------

    def usage(self, owner: str) -> OwnerUsage:
        """The owner's usage (zeros when none)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT jobs, fire_rate FROM owner_usage WHERE owner = ?", (owner,)).fetchone()
        return OwnerUsage(int(row[0]), int(row[1])) if row else OwnerUsage()

    def count_request(self, owner: str, window_ms: int, limit: int, expires_at_s: int) -> int | None:
        """Count one request in the owner's window unless it holds ``limit`` (one transaction, which also drops
        the owner's expired windows): the new count, or None."""
        with self.db.write() as conn:
            conn.execute(
                "DELETE FROM request_windows WHERE owner = ? AND expires_at_s < ?", (owner, window_ms // 1000)
            )
            row = conn.execute(
                "SELECT count FROM request_windows WHERE owner = ? AND window_ms = ?", (owner, window_ms)
            ).fetchone()
            held = int(row[0]) if row else 0
            if held >= limit:
                return None
            conn.execute(
                "INSERT INTO request_windows (owner, window_ms, count, expires_at_s) VALUES (?, ?, 1, ?)"
                " ON CONFLICT (owner, window_ms) DO UPDATE SET count = count + 1",
                (owner, window_ms, expires_at_s),
            )
            return held + 1

    def requests_in(self, owner: str, window_ms: int) -> int:
        """The requests the owner's window holds."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT count FROM request_windows WHERE owner = ? AND window_ms = ?", (owner, window_ms)
            ).fetchone()
        return int(row[0]) if row else 0

    def name_of(self, job_id: str) -> str | None:
        """The name of the live job ``job_id``, or None (one indexed read, no model: local mode's run lines)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT name FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return str(row[0]) if row else None

    def history_owner(self, job_id: str) -> str | None:
        """The owner of the live job, or of the deleted one's tombstone; None when there is neither."""
        with self.db.read() as conn:
            row = conn.execute("SELECT owner FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
            if row is None:
                row = conn.execute("SELECT owner FROM tombstones WHERE job_id = ?", (job_id,)).fetchone()
        return str(row[0]) if row else None

    # --- JobSpecs: the worker's view and the overlap lock ----------------------------------------

    def get_spec(self, job_id: str) -> Job | None:
        """The live job as its spec alone gives it (not paused, no ``next_run_at``), or None when deleted; its
        ``downstream_count`` counted in the same read (``jobs_by_upstream``: exact)."""
        return self.get_specs([job_id]).get(job_id)

    def get_specs(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """``get_spec`` of each of ``job_ids`` by job id, the deleted ones left out; one read."""
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT job_id, spec, {_DOWNSTREAM_COUNT} FROM jobs AS up"
                f" WHERE job_id IN ({', '.join('?' * len(ids))})",
                ids,
            ).fetchall()
        return {
            str(job_id): spec_job(spec).model_copy(update={"downstream_count": int(count)})
            for job_id, spec, count in rows
        }

    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder | None:
        """Take the lock for ``request``'s try when ``overlap_free`` (the fire that waits is kept): None when
        taken, else the holder. Its ``expires_at_s`` (epoch s): when a lock left behind is reaped."""
        with self.db.write() as conn:
            held = _lock_of(conn, request.job_id)
            if not overlap_free(held, request):
                return held or OverlapHolder(run_id="?")
            _put_lock(conn, request.job_id, taken_overlap(held, request), request.expires_at_s)
            return None

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool:
        """Set the lock's ``heartbeat_at`` to ``now_ms`` if this try holds it; False when it does not."""
        with self.db.write() as conn:
            return (
                conn.execute(
                    "UPDATE overlap_locks SET heartbeat_at = ? WHERE job_id = ? AND run_id = ? AND attempt = ?"
                    " AND worker = ?",
                    (now_ms, job_id, run_id, attempt, worker),
                ).rowcount
                == 1
            )

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> str | None:
        """Give the lock back if this try holds it (else nothing), or hand it to the fire that waits for it
        (``released_overlap``): that fire's run id, else None."""
        with self.db.write() as conn:
            held = _lock_of(conn, job_id)
            after = released_overlap(held, run_id, attempt, worker)
            if after is held:
                return None
            if after is None:
                conn.execute("DELETE FROM overlap_locks WHERE job_id = ?", (job_id,))
                return None
            conn.execute(
                "UPDATE overlap_locks SET run_id = ?, attempt = ?, worker = ? WHERE job_id = ?",
                (after.run_id, after.attempt, after.worker, job_id),
            )
            return after.run_id

    def buffer_overlap(self, request: BufferRequest) -> BufferAnswer:
        """Make ``request``'s run the fire that waits for the lock when ``buffered_overlap`` allows it."""
        with self.db.write() as conn:
            held = _lock_of(conn, request.job_id)
            after = buffered_overlap(held, request)
            if after is None:
                return BufferAnswer(False, held)
            conn.execute(
                "UPDATE overlap_locks SET buffered = ? WHERE job_id = ?", (after.buffered, request.job_id)
            )
            return BufferAnswer(True, after)

    # --- DueIndex -----------------------------------------------------------------------------

    def due_lanes(self) -> tuple[str, ...]:
        """The timer lanes (a row's entry is in one of them)."""
        return TIMER_LANES

    def query_due(self, query: DueQuery) -> DuePage:
        """A page of ``query.lane``'s entries under ``query.key`` sorted after ``query.start`` (or after the token,
        the last entry's ``order``, when more follow) with ``at <= query.up_to_ms``, through the lanes' index; each
        with its job's owner and priority (design §4.10)."""
        start = query.after if isinstance(query.after, tuple) else query.start
        at, job_id, due_at, version = start if start is not None else (-(2**62), "", 0, 0)
        limit = query.limit
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT job_id, due_at, due_position, due_version, owner, json_extract(state, '$.priority')"
                " FROM jobs WHERE due_partition = ?"
                " AND due_bucket = ? AND due_shard = ? AND due_lane = ? AND due_at IS NOT NULL"
                " AND due_position <= ? AND (due_position, job_id, due_at, due_version) > (?, ?, ?, ?)"
                " ORDER BY due_position, job_id, due_at, due_version LIMIT ?",
                (*query.key, query.lane, query.up_to_ms, at, job_id, due_at, version, limit + 1),
            ).fetchall()
        page = [
            DueEntry(
                r[0],
                *query.key,
                r[1],
                lane=query.lane,
                position=r[2],
                version=None if r[3] < 0 else r[3],
                owner=r[4],
                priority=hinted_priority(r[5]),
            )
            for r in rows[:limit]
        ]
        return page, (page[-1].order if len(rows) > limit else None)

    def put_timers(self, entries: Sequence[DueEntry]) -> None:
        """Nothing: a row's entry is written with its state (``move``)."""

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        """The current states of ``job_ids`` by job id (absent ones left out)."""
        if not job_ids:
            return {}
        found: dict[str, SchedulingState | Unreadable] = {}
        ids = list(dict.fromkeys(job_ids))
        with self.db.read() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for job_id, text in conn.execute(
                    f"SELECT job_id, state FROM jobs WHERE job_id IN ({marks})",
                    chunk,
                ):
                    state = state_of(job_id, text)
                    if state is not None:
                        found[job_id] = state
        return found

    def move(self, move: Move) -> None:
        """Move a job on after a fire, fenced on the state it was planned from (see ``ports.jobs.Move``). Raises
        ``Conflict`` with the stored state (None: the job is gone)."""
        with self.db.write() as conn:
            row = conn.execute("SELECT state FROM jobs WHERE job_id = ?", (move.job_id,)).fetchone()
            moved = moved_state(state_of(move.job_id, row[0]) if row else None, move)
            conn.execute(
                f"UPDATE jobs SET state = ?, {_SET_DUE} WHERE job_id = ?",
                (state_json(moved), *_due_columns(moved), move.job_id),
            )

    def oldest_due_bucket(self, partition: int) -> int | None:
        """The oldest bucket holding an entry of ``partition`` (None: none), through the due index."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT min(due_bucket) FROM jobs WHERE due_partition = ? AND due_at IS NOT NULL",
                (partition,),
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def highest_due_partition(self) -> int | None:
        """The highest partition any due entry is in, or None when there is none."""
        with self.db.read() as conn:
            row = conn.execute("SELECT max(due_partition) FROM jobs WHERE due_at IS NOT NULL").fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def highest_due_shard(self) -> int | None:
        """The highest due shard any due entry is in, or None when there is none."""
        with self.db.read() as conn:
            row = conn.execute("SELECT max(due_shard) FROM jobs WHERE due_at IS NOT NULL").fetchone()
        return int(row[0]) if row and row[0] is not None else None

    # --- the due index's repair -----------------------------------------------------------------

    def refile_stuck(
        self, clock: Callable[[], int], *, bucket_ms: int, shards: int, watermarks: Mapping[int, int]
    ) -> RefilePass:
        """One pass of the due index's anti-entropy over every row, in one transaction: a job whose entry
        ``domain.due_repair.is_stuck`` takes for lost at ``clock()`` (epoch ms) and ``watermarks`` (partition ->
        watermark bucket) has its row's due columns set to ``domain.due_repair.refiled_entry`` (in one of
        ``shards`` shards, buckets ``bucket_ms`` wide), so the due queries read it; its stored state keeps its
        entry, as the DynamoDB adapter's scheduling item keeps pointing at the lost timer item. Candidates are
        the rows due before ``stuck_due_before``; one whose state this code cannot read is counted
        (``unreadable``) and skipped. Returns the pass (``wrapped``: always, every row is read)."""
        now_ms = clock()
        refiled: list[str] = []
        unreadable = 0
        with self.db.write() as conn:
            rows = conn.execute(
                "SELECT job_id, state FROM jobs WHERE due_at IS NOT NULL AND due_at < ? ORDER BY job_id",
                (stuck_due_before(now_ms),),
            ).fetchall()
            for job_id, text in rows:
                state = state_of(job_id, text)
                if isinstance(state, Unreadable):
                    unreadable += 1
                elif state is not None and is_stuck(state.due, now_ms=now_ms, watermarks=watermarks):
                    entry = refiled_entry(state.due, now_ms=now_ms, shards=shards, bucket_ms=bucket_ms)
                    conn.execute(
                        f"UPDATE jobs SET {_SET_DUE} WHERE job_id = ?", (*_entry_columns(entry), job_id)
                    )
                    refiled.append(job_id)
        return RefilePass(scanned=len(rows), refiled=refiled, wrapped=True, unreadable=unreadable)


def _record(conn: Any, event: Any) -> None:
    """Write an audit event (``job_id``, ``at`` epoch ms, ``key``, ``kind``, ``actor``, ``detail``, ``expires_at``
    epoch s; its ``position`` is the key among the job's events) in the open transaction; None: nothing."""
    if event is None:
        return
    conn.execute(
        "INSERT OR REPLACE INTO events (job_id, position, at, key, kind, actor, detail, expires_at_s)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.job_id,
            event.position,
            event.at,
            event.key,
            str(getattr(event.kind, "value", event.kind)),
            event.actor,
            json.dumps(event.detail, separators=(",", ":")),
            event.expires_at,
        ),
    )


def _stored(job_id: str, spec: str, state_text: str | None) -> StoredJob:
    return stored_job(spec_job(spec), state_of(job_id, state_text))


def _lock_of(conn: sqlite3.Connection, job_id: str) -> OverlapHolder | None:
    """The overlap lock of job ``job_id`` as stored, None when free."""
    row = conn.execute(
        "SELECT run_id, attempt, worker, heartbeat_at, buffered FROM overlap_locks WHERE job_id = ?",
        (job_id,),
    ).fetchone()
    return OverlapHolder(*row) if row else None


def _put_lock(conn: sqlite3.Connection, job_id: str, held: OverlapHolder, expires_at_s: int) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO overlap_locks (job_id, run_id, attempt, worker, heartbeat_at, expires_at_s,"
        " buffered) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (job_id, held.run_id, held.attempt, held.worker, held.heartbeat_at, expires_at_s, held.buffered),
    )
