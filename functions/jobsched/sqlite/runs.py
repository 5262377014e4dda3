"""The run store on SQLite: the run port (``jobsched.ports.run_stores``: ``RunRows``, ``SweepRows``, ``RunWriter``,
``RunHistory``), held to the run store's contract (``tests/contract/``).

Every conditional write (claims, fencing on the claim, give-back, the sweep index's moves, re-runs, inserts) is
a step of the run state machine (``jobsched.domain.run_states``), evaluated on the stored row inside one write
transaction (``BEGIN IMMEDIATE``), so each is one committed, atomic read-check-write. Rows are JSON in the
``runs`` table, beside the columns its indexes need; the manual triggers' keys are in ``run_keys``. The
queries are SQL on indexes: the primary key ``(job_id, scheduled_for)`` and ``(sweep_shard, sweep_at)``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import asdict
from typing import Any

from jobsched.domain.archive import archive_objects, audit_objects
from jobsched.domain.run_steps import MappedRunStore, insert_step
from jobsched.domain.runs import failed_page, sweep_shard
from jobsched.models import JobEventKind, RunKind, RunStatus
from jobsched.ports.archive import ArchiveObjects
from jobsched.ports.jobs import AuditEvent
from jobsched.ports.runs import EVERY_RUN, FAILURE_STATUSES, RunFilter, RunKey, RunRow, SweepPage
from jobsched.ports.tries import TryRecord
from jobsched.sqlite.database import SqliteDatabase


def row_json(row: RunRow) -> str:
    """A run row as stored: its fields as a JSON object (``status`` and ``kind`` by value)."""
    data = asdict(row)
    data["status"], data["kind"] = row.status.value, row.kind.value
    return json.dumps(data, separators=(",", ":"))


def row_of(text: str) -> RunRow:
    """The run row stored as ``text`` (``row_json``)."""
    data = json.loads(text)
    data["status"], data["kind"] = RunStatus(data["status"]), RunKind(data["kind"])
    if data.get("cancelled_from") is not None:
        data["cancelled_from"] = RunStatus(data["cancelled_from"])
    data["tries"] = tuple(TryRecord(**one) for one in data.get("tries", ()))
    return RunRow(**data)


class _Transaction:
    """A write transaction: the outermost ``with`` opens one, nested ones join it; run writes are told to the
    database's listeners after the commit."""

    def __init__(self, database: SqliteDatabase) -> None:
        self.db = database
        self.depth = 0
        self.conn: sqlite3.Connection | None = None
        self.written: list[tuple[RunRow | None, RunRow]] = []
        self._context: Any = None

    def __enter__(self) -> _Transaction:
        self.db.lock.acquire()
        if self.depth == 0:
            self._context = self.db.write()
            try:
                self.conn = self._context.__enter__()
            except BaseException:
                self.db.lock.release()
                raise
            self.written = []
        self.depth += 1
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        self.depth -= 1
        written: list[tuple[RunRow | None, RunRow]] = []
        try:
            if self.depth == 0:
                context, self._context, self.conn = self._context, None, None
                written, self.written = self.written, []
                context.__exit__(kind, error, traceback)
        finally:
            self.db.lock.release()
        if written and kind is None:
            for before, after in written:
                self.db.notify_run(before, after)

    def connection(self) -> sqlite3.Connection:
        if self.conn is None:
            raise RuntimeError("no transaction open")
        return self.conn


class _Rows(MutableMapping[RunKey, RunRow]):
    """The ``runs`` table as a ``RunKey -> RunRow`` mapping (each access within its transaction)."""

    def __init__(self, transaction: _Transaction) -> None:
        self.tx = transaction

    def __getitem__(self, key: RunKey) -> RunRow:
        with self.tx as tx:
            found = (
                tx.connection()
                .execute("SELECT row FROM runs WHERE job_id = ? AND scheduled_for = ?", (key[0], key[1]))
                .fetchone()
            )
        if found is None:
            raise KeyError(key)
        return row_of(found[0])

    def __setitem__(self, key: RunKey, row: RunRow) -> None:
        with self.tx as tx:
            conn = tx.connection()
            old = conn.execute(
                "SELECT row FROM runs WHERE job_id = ? AND scheduled_for = ?", (key[0], key[1])
            ).fetchone()
            conn.execute(
                "INSERT OR REPLACE INTO runs (job_id, scheduled_for, status, sweep_shard, sweep_at,"
                " expires_at_s, row) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    row.job_id,
                    row.scheduled_for,
                    row.status.value,
                    sweep_shard(row.job_id),
                    row.sweep_at,
                    row.expires_at_s,
                    row_json(row),
                ),
            )
            tx.written.append((row_of(old[0]) if old else None, row))

    def __delitem__(self, key: RunKey) -> None:
        with self.tx as tx:
            deleted = (
                tx.connection()
                .execute("DELETE FROM runs WHERE job_id = ? AND scheduled_for = ?", (key[0], key[1]))
                .rowcount
            )
        if not deleted:
            raise KeyError(key)

    def __iter__(self) -> Iterator[RunKey]:
        with self.tx as tx:
            keys = tx.connection().execute("SELECT job_id, scheduled_for FROM runs").fetchall()
        return iter([RunKey(*k) for k in keys])

    def values(self) -> Any:
        """Every row in one query (a scan)."""
        with self.tx as tx:
            return [row_of(text) for (text,) in tx.connection().execute("SELECT row FROM runs")]

    def __len__(self) -> int:
        with self.tx as tx:
            return int(tx.connection().execute("SELECT count(*) FROM runs").fetchone()[0])


class _Keys(MutableMapping[tuple[str, str, str], int]):
    """The ``run_keys`` table as a ``(job_id, owner, idempotency key) -> scheduled_for`` mapping."""

    def __init__(self, transaction: _Transaction) -> None:
        self.tx = transaction

    def __getitem__(self, key: tuple[str, str, str]) -> int:
        with self.tx as tx:
            found = (
                tx.connection()
                .execute(
                    "SELECT scheduled_for FROM run_keys WHERE job_id = ? AND owner = ? AND idempotency_key = ?",
                    key,
                )
                .fetchone()
            )
        if found is None:
            raise KeyError(key)
        return int(found[0])

    def __setitem__(self, key: tuple[str, str, str], scheduled_for: int) -> None:
        with self.tx as tx:
            conn = tx.connection()
            run = conn.execute(
                "SELECT expires_at_s FROM runs WHERE job_id = ? AND scheduled_for = ?",
                (key[0], scheduled_for),
            ).fetchone()
            conn.execute(
                "INSERT OR REPLACE INTO run_keys (job_id, owner, idempotency_key, scheduled_for, expires_at_s)"
                " VALUES (?, ?, ?, ?, ?)",
                (*key, scheduled_for, run[0] if run else None),  # the key expires with its run
            )

    def __delitem__(self, key: tuple[str, str, str]) -> None:
        with self.tx as tx:
            conn = tx.connection()
            deleted = conn.execute(
                "DELETE FROM run_keys WHERE job_id = ? AND owner = ? AND idempotency_key = ?", key
            ).rowcount
        if not deleted:
            raise KeyError(key)

    def __iter__(self) -> Iterator[tuple[str, str, str]]:
        with self.tx as tx:
            keys = tx.connection().execute("SELECT job_id, owner, idempotency_key FROM run_keys").fetchall()
        return iter([tuple(k) for k in keys])

    def __len__(self) -> int:
        with self.tx as tx:
            return int(tx.connection().execute("SELECT count(*) FROM run_keys").fetchone()[0])


class SqliteRunStore(MappedRunStore):
    """Run rows and manual triggers' keys in ``database`` (see the module docstring). Raises
    ``StoreUnavailable`` when the database is busy or failing."""

    def __init__(self, database: SqliteDatabase) -> None:
        self.db = database
        self._lock = _Transaction(database)
        self._rows = _Rows(self._lock)
        self._keys = _Keys(self._lock)

    def put_many(self, rows: Sequence[RunRow]) -> int:
        """Insert each of ``rows`` whose key is free, in one transaction (a bulk import: a moto data dir's
        history, the bench's). Returns how many were inserted."""
        inserted = 0
        with self._lock:
            for row in rows:
                inserted += self.apply_step(insert_step(row)).applied
        return inserted

    # --- the queries, on indexes ------------------------------------------------------------------

    def _select(self, sql: str, parameters: Sequence[Any]) -> list[RunRow]:
        with self.db.read() as conn:
            return [row_of(text) for (text,) in conn.execute(sql, parameters)]

    def list_for_job(
        self, job_id: str, limit: int, where: RunFilter = EVERY_RUN, before_ms: int | None = None
    ) -> tuple[list[RunRow], int | None]:
        """A page of a job's runs kept by ``where``, newest first, older than ``before_ms``: ``(rows,
        scheduled_for of the last row when more follow, else None)``. Reads the job's key range only."""
        before = where.before(before_ms)
        sql = "SELECT row FROM runs WHERE job_id = ? AND scheduled_for < ? AND scheduled_for >= ?"
        parameters: list[Any] = [
            job_id,
            before if before is not None else 2**62,
            where.since_ms if where.since_ms is not None else -(2**62),
        ]
        if where.status is not None:
            sql += " AND status = ?"
            parameters.append(RunStatus(where.status).value)
        if where.kind is not None:
            sql += " AND json_extract(row, '$.kind') = ?"
            parameters.append(RunKind(where.kind).value)
        rows = self._select(sql + " ORDER BY scheduled_for DESC LIMIT ?", [*parameters, limit + 1])
        page = rows[:limit]
        return page, (page[-1].scheduled_for if len(rows) > limit else None)

    def list_failed(
        self, owner: str, limit: int, where: RunFilter = EVERY_RUN, before: tuple[int, str] | None = None
    ) -> tuple[list[RunRow], tuple[int, str] | None]:
        """``RunHistory.list_failed``: the owner's rows in a failure status kept by ``where``, newest
        ``(scheduled_for, job_id)`` first (reads the rows in a failure status)."""
        statuses = sorted(s.value for s in FAILURE_STATUSES)
        rows = self._select(
            f"SELECT row FROM runs WHERE status IN ({', '.join('?' for _ in statuses)})"
            " AND json_extract(row, '$.owner') = ?",
            (*statuses, owner),
        )
        return failed_page(rows, owner, limit, where, before)

    def rows_between(self, job_id: str, first_ms: int, last_ms: int, limit: int) -> list[RunRow]:
        """The job's rows with ``first_ms <= scheduled_for <= last_ms``, oldest first, at most ``limit``."""
        return self._select(
            "SELECT row FROM runs WHERE job_id = ? AND scheduled_for BETWEEN ? AND ? ORDER BY scheduled_for"
            " LIMIT ?",
            (job_id, first_ms, last_ms, limit),
        )

    def sweep_due(self, shard: int, now_ms: int, limit: int, cursor: Any = None) -> SweepPage:
        """Keys of shard ``shard`` with ``sweep_at <= now_ms``, oldest ``sweep_at`` first, ``limit`` a page;
        the cursor is the last ``(sweep_at, key)`` returned."""
        after = (cursor[0], cursor[1][0], cursor[1][1]) if cursor is not None else (-(2**62), "", -(2**62))
        with self.db.read() as conn:
            found = conn.execute(
                "SELECT sweep_at, job_id, scheduled_for FROM runs WHERE sweep_shard = ? AND sweep_at IS NOT NULL"
                " AND sweep_at <= ? AND (sweep_at, job_id, scheduled_for) > (?, ?, ?)"
                " ORDER BY sweep_at, job_id, scheduled_for LIMIT ?",
                (shard, now_ms, *after, limit + 1),
            ).fetchall()
        page = [(at, RunKey(job_id, scheduled_for)) for at, job_id, scheduled_for in found[:limit]]
        return SweepPage([key for _, key in page], page[-1] if len(found) > limit else None)

    def get_many(self, keys: Sequence[RunKey]) -> list[RunRow]:
        """The rows of ``keys`` that exist, each once."""
        rows: list[RunRow] = []
        for key in dict.fromkeys(RunKey(*k) for k in keys):
            row = self.get(*key)
            if row is not None:
                rows.append(row)
        return rows

    def get(self, job_id: str, scheduled_for_ms: int) -> RunRow | None:
        """The run ``(job_id, scheduled_for)``, or None (a read: no write transaction)."""
        found = self._select(
            "SELECT row FROM runs WHERE job_id = ? AND scheduled_for = ?", (job_id, scheduled_for_ms)
        )
        return found[0] if found else None

    def rows(self) -> list[RunRow]:
        """Every row, by key (for tests)."""
        return self._select("SELECT row FROM runs ORDER BY job_id, scheduled_for", ())

    def unfinished(self) -> list[RunRow]:
        """The runs left ``queued``, ``retrying`` or ``running`` (local mode queues them again at start)."""
        return self._select(
            "SELECT row FROM runs WHERE status IN ('queued', 'retrying', 'running') ORDER BY job_id,"
            " scheduled_for",
            (),
        )

    def scheduled_between(self, first_ms: int, end_ms: int) -> list[RunRow]:
        """Every job's rows with ``first_ms <= scheduled_for < end_ms`` (the bench reads its window so)."""
        return self._select(
            "SELECT row FROM runs WHERE scheduled_for >= ? AND scheduled_for < ?", (first_ms, end_ms)
        )


def archive_expired(database: SqliteDatabase, archive: ArchiveObjects, now_ms: int) -> int:
    """Move the run rows and audit events past their ``expires_at_s`` at ``now_ms`` (epoch ms) into ``archive``
    (local mode's archive, design §11), in the layout and format of the archive bucket: in one write transaction,
    the expired rows and events are read, written as archive objects (``domain.archive.archive_objects``,
    ``audit_objects``), then deleted. A write that fails (``ArchiveUnavailable``) deletes nothing, so the next sweep
    tries again (the objects' names are deterministic: a retry rewrites them). Returns how many rows and events
    moved."""
    now_s = now_ms // 1000
    expired = "WHERE expires_at_s IS NOT NULL AND expires_at_s < ?"
    with database.write() as conn:
        found = conn.execute(f"SELECT row FROM runs {expired}", (now_s,)).fetchall()
        events = [
            AuditEvent(job_id, at, key, JobEventKind(kind), actor, json.loads(detail), expires)
            for job_id, at, key, kind, actor, detail, expires in conn.execute(
                f"SELECT job_id, at, key, kind, actor, detail, expires_at_s FROM events {expired}", (now_s,)
            )
        ]
        if not found and not events:
            return 0
        for item in archive_objects(row_of(text) for (text,) in found) + audit_objects(events):
            archive.put(item)
        conn.execute(f"DELETE FROM runs {expired}", (now_s,))
        conn.execute(f"DELETE FROM events {expired}", (now_s,))
        return len(found) + len(events)
