"""``GET /runs`` (design §3.4): the caller's runs across all their jobs, newest ``scheduled_for`` first; and
``GET /jobs/{id}/runs``, one job's.

Three ways to serve it, each bounded by the page:
- ``job_id`` given: that job's history (its partition of the runs table);
- a failure ``status`` (``retrying``, ``dead``, ``skipped``): the sparse ``failures`` index, keyed by owner, which
  only failing rows enter, so it costs nothing on the happy path;
- otherwise: each of the owner's live jobs is read for one page and the pages are merged (at most
  :data:`MAX_FANOUT_JOBS` jobs; beyond that the caller narrows by ``job_id`` or a failure status).

A live job's page also lists its queued fires (``api.queued_runs``: dispatched, not yet claimed, no row yet) as
``queued`` runs among its rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from jobsched.api.cursor import decode_cursor, encode_cursor, history_before
from jobsched.api.exceptions import CursorNotFound, InvalidInput, JobNotFound
from jobsched.api.queued_runs import QueuedRuns, merged_page
from jobsched.api.run_views import run_view
from jobsched.api.schemas import Page
from jobsched.clock import Clock, to_ms
from jobsched.models import Run, RunKind, RunStatus
from jobsched.ports.archive_queries import RunsWindow
from jobsched.ports.errors import NotFound
from jobsched.ports.jobs import JobRepository, StoredJob
from jobsched.ports.run_stores import RunHistory
from jobsched.ports.runs import FAILURE_STATUSES, RunFilter, RunRow

MAX_FANOUT_JOBS = 500
"""Most live jobs ``GET /runs`` merges without a ``job_id`` or a failure ``status``."""


def require_offsets(**instants: datetime | None) -> None:
    """Raise ``InvalidInput`` naming the first of ``instants`` (request field name -> value, None: not given) that
    has no offset: an instant is never read in the server's zone."""
    for name, value in instants.items():
        if value is not None and value.tzinfo is None:
            raise InvalidInput(name, f"{name} needs an offset or Z (e.g. 2026-12-04T18:00:00Z)")


class RunListing:
    """Runs across an owner's jobs on the job store ``jobs`` and the run store ``runs``; with ``clock``, a live
    job's queued fires too (``api.queued_runs``)."""

    def __init__(self, jobs: JobRepository, runs: RunHistory, clock: Clock | None = None) -> None:
        self.jobs = jobs
        self.runs = runs
        self.queued = QueuedRuns(runs, clock) if clock is not None else None

    def for_job(
        self, owner: str, job_id: str, *, status: RunStatus | None, limit: int, cursor: str | None
    ) -> Page[Run]:
        """A page of the job's runs (``GET /jobs/{id}/runs``), newest ``scheduled_for`` first, optionally only
        those in ``status``. A deleted job's runs stay listed for its owner until retention (design §2). Raises
        ``JobNotFound`` (absent, or not the owner's); ``InvalidInput`` (a malformed cursor) or
        ``CursorNotFound`` (not of this job's run listing)."""
        if self.jobs.history_owner(job_id) != owner:
            raise JobNotFound(job_id)
        before_ms = history_before(cursor, "runs", owner, job_id, int)
        if before_ms is not None and before_ms < 0:
            raise CursorNotFound()
        where = RunFilter(status=status)
        rows, last = self.runs.list_for_job(job_id, limit, where, before_ms)
        rows, last = self._with_queued(self._stored(job_id), where, rows, last, before_ms, limit)
        next_cursor = (
            encode_cursor("runs", owner, {"job": job_id, "before": last}) if last is not None else None
        )
        return Page[Run](items=[run_view(row) for row in rows], next_cursor=next_cursor)

    def across_jobs(
        self,
        owner: str,
        *,
        job_id: str | None = None,
        status: RunStatus | None = None,
        kind: RunKind | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Run]:
        """A page of ``owner``'s runs, newest first, with ``scheduled_for`` in ``[since, until)`` (aware
        datetimes), only ``status``/``kind`` when given; pass ``next_cursor`` back as ``cursor`` with the same
        filters. Raises ``JobNotFound`` (``job_id`` not the owner's), ``InvalidInput`` naming ``until`` (not after
        ``since``) or ``status`` (more than :data:`MAX_FANOUT_JOBS` jobs to merge), ``CursorNotFound`` (a cursor
        of another listing or other filters); ``InvalidInput`` naming ``since``/``until`` without an offset."""
        require_offsets(since=since, until=until)
        since_ms = to_ms(since) if since is not None else None
        until_ms = to_ms(until) if until is not None else None
        if since_ms is not None and until_ms is not None and until_ms <= since_ms:
            raise InvalidInput("until", "until must be after since")
        filters: dict[str, object] = {
            "job": job_id,
            "status": status,
            "kind": kind,
            "since": since_ms,
            "until": until_ms,
        }
        start = _position(cursor, owner, filters)
        where = RunFilter(status=status, kind=kind, since_ms=since_ms, until_ms=until_ms)
        rows, last = self._rows(owner, job_id, where, start, limit)
        next_cursor = None
        if last is not None:
            next_cursor = encode_cursor("all-runs", owner, {**filters, "at": last[0], "after_job": last[1]})
        return Page[Run](items=[run_view(row) for row in rows], next_cursor=next_cursor)

    def window_rows(self, window: RunsWindow) -> list[RunRow]:
        """The runs table's rows of ``window``: its owner's, ``scheduled_for`` in ``[since_ms, until_ms)``, only its
        ``job_id``/``status``/``kind`` when set, newest first, at most its ``limit``; what :meth:`across_jobs`
        lists for those filters, for an archive answer to merge (``api.archive_reads``). A ``job_id`` that is not
        the owner's (or whose history is gone) has none. Raises ``InvalidInput`` as :meth:`across_jobs`."""
        where = RunFilter(
            status=None if window.status is None else RunStatus(window.status),
            kind=None if window.kind is None else RunKind(window.kind),
            since_ms=window.since_ms,
            until_ms=window.until_ms,
        )
        try:
            return self._rows(window.owner, window.job_id, where, None, window.limit)[0]
        except JobNotFound:
            return []

    def _rows(
        self, owner: str, job_id: str | None, where: RunFilter, start: tuple[int, str] | None, limit: int
    ) -> tuple[list[RunRow], tuple[int, str] | None]:
        """One page of ``owner``'s rows kept by ``where`` after ``start``: from the job's history (``job_id``),
        the failures index (a failure status) or the merged pages of the owner's live jobs."""
        if job_id is not None:
            return self._one_job(owner, job_id, where, start, limit)
        if where.status in FAILURE_STATUSES:
            return self.runs.list_failed(owner, limit, where, start)
        return self._merged(owner, where, start, limit)

    def _one_job(
        self, owner: str, job_id: str, where: RunFilter, start: tuple[int, str] | None, limit: int
    ) -> tuple[list[RunRow], tuple[int, str] | None]:
        if self.jobs.history_owner(job_id) != owner:
            raise JobNotFound(job_id)
        before_ms = start[0] if start is not None else None
        rows, last = self.runs.list_for_job(job_id, limit, where, before_ms)
        rows, last = self._with_queued(self._stored(job_id), where, rows, last, before_ms, limit)
        return rows, ((last, job_id) if last is not None else None)

    def _stored(self, job_id: str) -> StoredJob | None:
        """The live job ``job_id`` when queued fires are listed, else None (also when deleted)."""
        if self.queued is None:
            return None
        try:
            return self.jobs.get(job_id)
        except NotFound:
            return None

    def _with_queued(
        self,
        stored: StoredJob | None,
        where: RunFilter,
        rows: list[RunRow],
        last: int | None,
        before_ms: int | None,
        limit: int,
    ) -> tuple[list[RunRow], int | None]:
        """One job's page ``rows`` (the store's cursor ``last``) with its queued fires merged in
        (``queued_runs.merged_page``)."""
        if self.queued is None or stored is None:
            return rows, last
        unfiltered = where.status is None and where.kind is None
        queued = self.queued.of(
            stored, where, before_ms=before_ms, floor_ms=last, page=rows if unfiltered else None
        )
        return merged_page(rows, last, queued, limit) if queued else (rows, last)

    def _merged(
        self, owner: str, where: RunFilter, start: tuple[int, str] | None, limit: int
    ) -> tuple[list[RunRow], tuple[int, str] | None]:
        """One page of each live job after ``start`` (``(scheduled_for, job_id)``, exclusive), merged."""
        found: list[RunRow] = []
        unfiltered = where.status is None and where.kind is None
        for stored in self._jobs_of(owner):
            job_id = stored.job.id
            before = None
            if start is not None:
                # after (at, job) in the order (scheduled_for desc, job_id desc): a job id below the cursor's may
                # still show its row at the cursor's instant
                before = start[0] + 1 if job_id < start[1] else start[0]
            rows = self.runs.list_for_job(job_id, limit + 1, where, before)[0]
            found.extend(rows)
            if self.queued is not None:
                floor = rows[-1].scheduled_for if len(rows) > limit else None
                found.extend(
                    self.queued.of(
                        stored, where, before_ms=before, floor_ms=floor, page=rows if unfiltered else None
                    )
                )
        found.sort(key=lambda row: (row.scheduled_for, row.job_id), reverse=True)
        page = found[:limit]
        more = len(found) > limit
        return page, ((page[-1].scheduled_for, page[-1].job_id) if more else None)

    def _jobs_of(self, owner: str) -> Iterator[StoredJob]:
        after: tuple[str, str] | None = None
        count = 0
        while True:
            stored, after = self.jobs.list_by_owner(owner, 100, after)
            for found in stored:
                count += 1
                if count > MAX_FANOUT_JOBS:
                    raise InvalidInput(
                        "status",
                        f"more than {MAX_FANOUT_JOBS} jobs to merge: list one job's runs (job_id) or the failed "
                        "runs (status retrying, dead or skipped), which an index serves",
                    )
                yield found
            if after is None:
                return


def _position(cursor: str | None, owner: str, filters: dict[str, object]) -> tuple[int, str] | None:
    """Where a cursor of this listing, made with the same filters, resumes: ``(scheduled_for, job_id)``."""
    if cursor is None:
        return None
    position = decode_cursor(cursor, "all-runs", owner)
    at, after_job = position.get("at"), position.get("after_job")
    same = all(position.get(name) == value for name, value in filters.items())
    if not same or not isinstance(at, int) or not isinstance(after_job, str):
        raise CursorNotFound()
    return at, after_job
