"""Local mode's wiring on its embedded SQLite database: :class:`SqliteComponents`, the composition root
(``jobsched.runtime.wiring.Components``) with the job, run and CONTROL stores and the run queue on SQLite."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobsched.runtime.wiring import Components

if TYPE_CHECKING:
    from jobsched.local.archive_queries import LocalArchiveQueries
    from jobsched.sqlite.control import SqliteControlStore
    from jobsched.sqlite.database import SqliteDatabase
    from jobsched.sqlite.jobs import SqliteJobStore
    from jobsched.sqlite.queue import SqliteSqsQueue
    from jobsched.sqlite.runs import SqliteRunStore

RUN_QUEUE_FILE = "run-queue.sqlite3"
"""Local mode's run queue file, in the SQLite database's directory (``jobsched.sqlite.queue``)."""


@dataclass(frozen=True)
class SqliteComponents(Components):
    """Local mode's components on its embedded SQLite ``database`` (``jobsched.sqlite``): the job store, the
    run store and the CONTROL store live there, and the run queue is ``jobsched.sqlite.queue.SqliteSqsQueue``
    (SQS's semantics: visibility, delays, receive counts, the dead-letter queue after the run queue's
    ``max_receive_count``; kept in ``run-queue.sqlite3`` next to the database, since a scheduled run's message is
    its only record until a worker claims it). Everything else is as in
    :class:`Components` on ``aws`` (the embedded moto): the dead-run queue and alerts topic, and the API's
    ``Idempotency-Key`` records (Powertools' DynamoDB layer). Components built from one ``SqliteComponents``
    (and its :meth:`with_own_clients` copies) share the one database and queue. Raises ValueError when
    built without ``database``."""

    database: SqliteDatabase | None = None
    queue: SqliteSqsQueue | None = None

    def __post_init__(self) -> None:
        if self.database is None:
            raise ValueError("SqliteComponents needs a database")
        if self.queue is None:
            from jobsched.resources import RUN_QUEUE, RUN_QUEUE_DLQ
            from jobsched.sqlite.queue import SqliteSqsQueue, queue_arn

            url = self.settings.run_queue_url
            queue = SqliteSqsQueue(
                url,
                queue_arn(url),
                visibility_timeout_s=RUN_QUEUE.visibility_timeout_s,
                max_receive_count=RUN_QUEUE.max_receive_count,
                clock=self.clock,
                path=self.database.path.with_name(RUN_QUEUE_FILE),
                dead_letter_url=self.settings.run_dlq_url,
                dead_letter_visibility_s=RUN_QUEUE_DLQ.visibility_timeout_s,
                synchronous=self.database.synchronous,
            )
            object.__setattr__(self, "queue", queue)

    def archive_queries(self) -> LocalArchiveQueries:
        """Local mode's archive, read with DuckDB at once: the files under the data directory's ``archive/``
        (``local.archive.archive_dir``; the database lives in the data directory)."""
        from jobsched.local.archive import LocalArchive, archive_dir
        from jobsched.local.archive_queries import LocalArchiveQueries

        assert self.database is not None  # set at construction
        return LocalArchiveQueries(LocalArchive(archive_dir(self.database.path.parent)))

    def run_queue_client(self) -> SqliteSqsQueue:
        """The run queue's own SQS stand-in (shared by every copy of these components)."""
        assert self.queue is not None  # set at construction
        return self.queue

    def run_dlq_client(self) -> SqliteSqsQueue:
        """The same stand-in: it keeps the messages it dead-letters and answers for ``settings.run_dlq_url``."""
        return self.run_queue_client()

    def _db(self) -> SqliteDatabase:
        assert self.database is not None  # checked at construction
        return self.database

    def jobs(self) -> SqliteJobStore:
        """The job store (specs, scheduling state, the due index, overlap locks) in the database."""
        from jobsched.sqlite.jobs import SqliteJobStore

        return SqliteJobStore(self._db())

    def runs(self) -> SqliteRunStore:
        """The run store (history, claims, the sweep index) in the database."""
        from jobsched.sqlite.runs import SqliteRunStore

        return SqliteRunStore(self._db())

    def control(self) -> SqliteControlStore:
        """The CONTROL store (leases, watermarks, the partition high-water mark) in the database."""
        from jobsched.sqlite.control import SqliteControlStore

        return SqliteControlStore(self._db())
