"""The recount of uncounted jobs on the SQLite job store (``jobsched.ports.quotas.QuotaRecount``, design §4.11).

A job's ``Job.quota_rate`` is the ``quota_rate`` member of its row's ``spec`` JSON; the recount's progress is the
``progress`` row ``quota_recount`` (JSON of ``RecountProgress``). A database is counted whole when it is opened
(``sqlite.database.UPGRADES``), so the pass finds only jobs written without usage since."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from jobsched.clock import to_ms
from jobsched.domain.quotas import check_usage, count_change, stored_count
from jobsched.models import Job
from jobsched.ports.quotas import OwnerUsage, RecountProgress, UsageChange

if TYPE_CHECKING:
    from jobsched.sqlite.database import SqliteDatabase

QUOTA_RATE_SQL = (
    "(CASE WHEN json_type(spec, '$.quota_rate') = 'integer' AND json_extract(spec, '$.quota_rate') >= 0"
    " THEN json_extract(spec, '$.quota_rate') END)"
)
"""SQL of a job row's ``Job.quota_rate`` (NULL: not counted, also for a stored value that is not a whole number of
at least 0, as ``domain.quotas.stored_count`` reads it)."""


def spec_job(spec: str) -> Job:
    """The ``Job`` of a row's ``spec`` JSON, a ``quota_rate`` that is not a count read as none
    (``domain.quotas.stored_count``). Raises pydantic's ``ValidationError`` for a spec that is no job."""
    try:
        return Job.model_validate_json(spec)
    except ValidationError as error:
        if not any(problem["loc"][:1] == ("quota_rate",) for problem in error.errors()):
            raise
    document = json.loads(spec)
    return Job.model_validate({**document, "quota_rate": stored_count(document.get("quota_rate"))})


_PROGRESS = "quota_recount"


def add_usage(conn: Any, usage: UsageChange | None) -> None:
    """Add ``usage`` to its owner's row in the open transaction (None: nothing), after checking the limits it
    carries (``check_usage``: raises ``QuotaExceeded``, and the transaction is rolled back)."""
    if usage is not None and (usage.limit_jobs, usage.limit_fires_per_minute) != (None, None):
        row = conn.execute(
            "SELECT jobs, fire_rate FROM owner_usage WHERE owner = ?", (usage.owner,)
        ).fetchone()
        check_usage(usage, OwnerUsage(int(row[0]), int(row[1])) if row else OwnerUsage())
    if usage is not None and not usage.empty:
        conn.execute(
            "INSERT INTO owner_usage (owner, jobs, fire_rate) VALUES (?, ?, ?) ON CONFLICT (owner) DO UPDATE"
            " SET jobs = jobs + excluded.jobs, fire_rate = fire_rate + excluded.fire_rate",
            (usage.owner, usage.jobs, usage.fire_rate),
        )


class SqliteQuotaRecount:
    """``QuotaRecount`` on ``db`` (a ``SqliteDatabase``); mixed into ``sqlite.jobs.SqliteJobStore``."""

    db: SqliteDatabase

    def recount_progress(self) -> RecountProgress:
        """The stored progress (the start when none)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM progress WHERE name = ?", (_PROGRESS,)).fetchone()
        return RecountProgress(**json.loads(row[0])) if row else RecountProgress()

    def save_recount_progress(self, progress: RecountProgress) -> None:
        """Store ``progress``."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO progress (name, value) VALUES (?, ?)",
                (_PROGRESS, json.dumps(asdict(progress))),
            )

    def uncounted_jobs(self, cursor: str | None, limit: int) -> tuple[list[Job], str | None]:
        """The uncounted among the next ``limit`` jobs by id after ``cursor`` (a job id)."""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT job_id, spec, {QUOTA_RATE_SQL} FROM jobs WHERE job_id > ? ORDER BY job_id LIMIT ?",
                (cursor or "", limit + 1),
            ).fetchall()
        page = rows[:limit]
        uncounted = [spec_job(spec) for _, spec, rate in page if rate is None]
        return uncounted, (str(page[-1][0]) if len(rows) > limit and page else None)

    def count_job(self, job: Job, rate: int) -> bool:
        """Count the job and set its ``quota_rate`` in one transaction, unless it changed."""
        with self.db.write() as conn:
            landed = conn.execute(
                "UPDATE jobs SET spec = json_set(spec, '$.quota_rate', ?) WHERE job_id = ? AND updated_at = ?"
                f" AND {QUOTA_RATE_SQL} IS NULL",
                (rate, job.id, to_ms(job.updated_at)),
            ).rowcount
            if landed:
                add_usage(conn, count_change(job.owner, None, rate))
        return bool(landed)
