"""One SQLite database file holding local mode's jobs, runs and control records, and its durability.

Durability: WAL journal. Each store call is one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) that has
committed before the call returns, so whatever a caller was told is written is in the WAL file. Which
``synchronous`` level keeps "an acknowledged write is never lost" true depends on what crashes:

- the process (``kill -9``, an exception, Ctrl-C twice): either level. ``COMMIT`` has handed the WAL's pages
  to the operating system (a ``write``), and the kernel's page cache outlives the process; the next open
  replays the WAL. Nothing acknowledged is lost with ``NORMAL`` or ``FULL``.
- the machine (power loss, kernel panic): only ``FULL``, which ``fsync``s the WAL at every commit. With
  ``NORMAL`` the WAL reaches the disk at checkpoints: :meth:`SqliteDatabase.checkpoint`, which local mode
  runs every second, bounds the loss to about that second (the moto backend's bound was 2.5 s, and for a
  ``kill -9`` too).

Local mode's promise is the first (its data is a developer's; the target is "no write lost on ``kill -9``"),
so ``NORMAL`` is the default: a commit costs ~0.3 ms here, against ~4.6 ms for ``FULL``'s fsync, and at 50
runs a second (about 200 writes) ``FULL`` alone would keep the one connection busy most of each second.
``FULL`` stays a choice (``synchronous=``; ``LocalConfig.sqlite_synchronous``) for a disk with a cheap fsync.

Concurrency: one connection, shared by the process's threads under a lock (SQLite serializes writers
anyway; a shared connection keeps every read seeing every committed write at once). ``BEGIN IMMEDIATE``
takes the database's write lock up front, so a read-check-write of a conditional write is atomic even
against another process on the same file. A busy or failing database (lock timeout, I/O error, full disk)
is raised as ``jobsched.ports.errors.StoreUnavailable``, as a DynamoDB throttle is.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from jobsched.domain.quotas import job_fire_rate
from jobsched.local.paths import open_private
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.runs import RunRow

Synchronous = Literal["FULL", "NORMAL"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    spec TEXT NOT NULL,
    state TEXT,
    due_partition INTEGER,
    due_bucket INTEGER,
    due_shard INTEGER,
    due_at INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_by_owner ON jobs (owner, name, job_id);
CREATE INDEX IF NOT EXISTS jobs_by_upstream ON jobs (json_extract(spec, '$.after.job'));
CREATE TABLE IF NOT EXISTS names (
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    job_id TEXT NOT NULL,
    PRIMARY KEY (owner, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tombstones (
    job_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    deleted_at INTEGER NOT NULL,
    expires_at_s INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    job_id TEXT NOT NULL,
    position TEXT NOT NULL,
    at INTEGER NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    detail TEXT NOT NULL,
    expires_at_s INTEGER,
    PRIMARY KEY (job_id, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS overlap_locks (
    job_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    attempt INTEGER,
    worker TEXT,
    heartbeat_at INTEGER,
    expires_at_s INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    job_id TEXT NOT NULL,
    scheduled_for INTEGER NOT NULL,
    status TEXT NOT NULL,
    sweep_shard INTEGER NOT NULL,
    sweep_at INTEGER,
    expires_at_s INTEGER,
    row TEXT NOT NULL,
    PRIMARY KEY (job_id, scheduled_for)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_sweep ON runs (sweep_shard, sweep_at, job_id, scheduled_for)
    WHERE sweep_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_unfinished ON runs (status) WHERE status IN ('queued', 'retrying', 'running');
CREATE INDEX IF NOT EXISTS runs_expiry ON runs (expires_at_s) WHERE expires_at_s IS NOT NULL;
CREATE TABLE IF NOT EXISTS run_keys (
    job_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    scheduled_for INTEGER NOT NULL,
    expires_at_s INTEGER,
    PRIMARY KEY (job_id, owner, idempotency_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    partition INTEGER PRIMARY KEY,
    holder TEXT NOT NULL,
    term INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS watermarks (
    partition INTEGER PRIMARY KEY,
    bucket INTEGER NOT NULL,
    term INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS positions (
    partition INTEGER PRIMARY KEY,
    positions TEXT NOT NULL,
    term INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS lateness (
    partition INTEGER PRIMARY KEY,
    summary TEXT NOT NULL,
    term INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS marks (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owner_usage (
    owner TEXT PRIMARY KEY,
    jobs INTEGER NOT NULL,
    fire_rate INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS progress (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS request_windows (
    owner TEXT NOT NULL,
    window_ms INTEGER NOT NULL,
    count INTEGER NOT NULL,
    expires_at_s INTEGER NOT NULL,
    PRIMARY KEY (owner, window_ms)
) WITHOUT ROWID;
"""

FIRE_RATE_SQL = "jobsched_fire_rate"
"""The SQL function ``jobsched_fire_rate(schedule, timezone)`` every connection has: a job's fire rate in
micro-fires per minute (``jobsched.domain.quotas.job_fire_rate``)."""

UPGRADES = (
    # the due entry's lane, position and version (``ports.jobs.DueEntry``), its index in lane order;
    # an entry stored before them is an early one at its due instant, for its state's version
    "ALTER TABLE jobs ADD COLUMN due_lane TEXT",
    "ALTER TABLE jobs ADD COLUMN due_position INTEGER",
    "ALTER TABLE jobs ADD COLUMN due_version INTEGER",
    "UPDATE jobs SET due_lane = 'early', due_position = due_at,"
    " due_version = coalesce(json_extract(state, '$.version'), -1) WHERE due_at IS NOT NULL",
    "DROP INDEX IF EXISTS jobs_due",
    "CREATE INDEX jobs_lanes ON jobs (due_partition, due_bucket, due_shard, due_lane, due_position, job_id,"
    " due_at, due_version) WHERE due_at IS NOT NULL",
    # the run id of the fire waiting for the lock (``overlap: buffer_one``, ``ports.runs.OverlapHolder``)
    "ALTER TABLE overlap_locks ADD COLUMN buffered TEXT",
    # the owners' quota usage (``ports.quotas``): the job counts of a database made before it (fire rates start
    # at 0 and grow as jobs are created or re-timed)
    "INSERT OR IGNORE INTO owner_usage (owner, jobs, fire_rate) SELECT owner, count(*), 0 FROM jobs GROUP BY owner",
    # the owners' usage counted again from their jobs, fire rates included (``FIRE_RATE_SQL``): a delete then
    # takes away what was counted, so no usage goes below zero
    "DELETE FROM owner_usage",
    "INSERT INTO owner_usage (owner, jobs, fire_rate) SELECT owner, count(*),"
    f" sum({FIRE_RATE_SQL}(json_extract(spec, '$.schedule'), coalesce(json_extract(spec, '$.timezone'), 'UTC')))"
    " FROM jobs GROUP BY owner",
    # each job's count in its owner's usage (``Job.quota_rate``, the fire rate the usage above holds for it), so
    # that an edit or a delete moves exactly what was counted
    "UPDATE jobs SET spec = json_set(spec, '$.quota_rate',"
    f" {FIRE_RATE_SQL}(json_extract(spec, '$.schedule'), coalesce(json_extract(spec, '$.timezone'), 'UTC')))"
    " WHERE json_extract(spec, '$.quota_rate') IS NULL",
)
"""Schema changes applied once, in order, to a database made before them (``PRAGMA user_version`` counts the
ones applied)."""

CACHE_KIB = 64 * 1024
"""SQLite's page cache (KiB): the indexes' inner pages of a large history stay in memory."""

_TRANSIENT_CODES = frozenset(
    {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL}
)

RunListener = Callable[[RunRow | None, RunRow], None]
"""Told of every run row written: ``(the row before or None, the row after)``, after the commit."""


def is_transient(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _TRANSIENT_CODES


def checked_synchronous(level: str) -> Synchronous:
    """``level`` when it is a ``synchronous`` setting that keeps acknowledged writes (``NORMAL`` or ``FULL``, see
    the module docstring), for the database and the run queue's file alike. Raises ValueError otherwise."""
    if level not in ("FULL", "NORMAL"):
        raise ValueError(f"synchronous must be FULL or NORMAL, not {level!r}")
    return level  # type: ignore[return-value]


def create_private(path: Path) -> None:
    """Create the database file ``path`` empty with mode 0600 when it is missing (an empty file is a new
    database to SQLite), and make an existing one 0600: it holds job specs with their secret header values.
    SQLite creates the ``-wal`` and ``-shm`` files with the main file's permissions, so they are 0600 too
    (a pre-existing one is made 0600 here as well). Raises OSError when ``path`` is a symlink: the mode
    change would go to the file it names."""
    os.close(open_private(path, os.O_RDWR))
    for file in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(file, 0o600)


class SqliteDatabase:
    """The database file at ``path`` (created with its tables when missing), opened in WAL mode with
    ``synchronous`` (``NORMAL`` default, see the module docstring). ``busy_timeout_s``: how long a write waits
    for another connection's lock before ``StoreUnavailable``. ``run_listeners`` are told of each run row
    written (local mode prints run outcomes from them). ``lock`` (reentrant) guards the one connection: held
    for each read and each transaction. Thread-safe; ``close()`` when done. Raises ValueError for another
    ``synchronous``, or naming the file when it cannot be opened as a database (not one, unreadable, locked)."""

    def __init__(
        self, path: Path | str, *, synchronous: Synchronous = "NORMAL", busy_timeout_s: float = 5.0
    ) -> None:
        checked_synchronous(synchronous)
        self.path = Path(path)
        self.synchronous = synchronous
        self.run_listeners: list[RunListener] = []
        self.lock = threading.RLock()
        self._in_transaction = False
        try:
            create_private(self.path)
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self._conn.create_function(FIRE_RATE_SQL, 2, job_fire_rate, deterministic=True)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            with self.write() as conn:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                applied = int(conn.execute("PRAGMA user_version").fetchone()[0])
                for statement in UPGRADES[applied:]:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {len(UPGRADES)}")
        except (sqlite3.Error, OSError) as error:
            raise ValueError(f"{self.path} is not a usable jobsched SQLite database: {error}") from error

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads, under the lock. Transient errors are raised as ``StoreUnavailable``."""
        with self.lock:
            try:
                yield self._conn
            except sqlite3.Error as error:
                if is_transient(error):
                    raise StoreUnavailable(f"sqlite: {error}") from error
                raise

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): committed when the block ends, rolled back when it
        raises. Transient errors (busy, locked, I/O, full) are raised as ``StoreUnavailable``. Not nested."""
        with self.lock:
            if self._in_transaction:
                raise RuntimeError("SqliteDatabase.write() does not nest")
            self._in_transaction = True
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as error:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if is_transient(error):
                    raise StoreUnavailable(f"sqlite: {error}") from error
                raise
            finally:
                self._in_transaction = False

    def checkpoint(self) -> None:
        """Sync the WAL to the disk and copy it into the database file (a passive checkpoint: it never waits
        for another connection). Local mode calls it every second, bounding what a power loss can take with
        ``synchronous=NORMAL``. Raises ``StoreUnavailable`` on an I/O error."""
        with self.read() as conn:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def notify_run(self, before: RunRow | None, after: RunRow) -> None:
        """Tell ``run_listeners`` of a committed run-row write (a failing listener never fails the write)."""
        for listener in list(self.run_listeners):
            try:
                listener(before, after)
            except Exception:
                from jobsched.observability import logger

                logger.exception("run listener failed")

    def reap_expired(self, now_ms: int) -> int:
        """Delete what retention has expired by ``now_ms`` (epoch ms): run rows and manual-trigger keys past
        their ``expires_at_s``, tombstones, left-behind overlap locks and audit events past theirs (DynamoDB's
        TTL does this in AWS). Returns how many records went."""
        now_s = now_ms // 1000
        with self.write() as conn:
            gone = 0
            for table in ("runs", "run_keys", "tombstones", "overlap_locks", "events"):
                gone += conn.execute(
                    f"DELETE FROM {table} WHERE expires_at_s IS NOT NULL AND expires_at_s < ?",
                    (now_s,),
                ).rowcount
            return gone

    def counts(self) -> dict[str, int]:
        """How many live jobs and run rows the database holds: ``{"jobs": n, "runs": m}``."""
        with self.read() as conn:
            jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        return {"jobs": int(jobs), "runs": int(runs)}

    def known_job_ids(self) -> set[str]:
        """The ids of every job the database knows: live, or deleted and still kept as a tombstone."""
        with self.read() as conn:
            rows = conn.execute("SELECT job_id FROM jobs UNION SELECT job_id FROM tombstones").fetchall()
        return {str(row[0]) for row in rows}

    def close(self) -> None:
        """Close the connection (a checkpoint folds the WAL into the file)."""
        with self.lock:
            self._conn.close()
