"""The queued fires of a job's listing (design §3.5, ``jobsched.domain.queued``): the fires the scheduler dispatched
that no worker has claimed yet, shown ``queued`` in ``GET /jobs/{id}/runs`` and ``GET /runs`` among the stored
rows, without a write of their own."""

from __future__ import annotations

from jobsched.clock import Clock, to_ms
from jobsched.domain.queued import MAX_QUEUED, candidate_fires, covered_from, queued_rows
from jobsched.models import RunKind, RunStatus
from jobsched.ports.jobs import SchedulingState, StoredJob
from jobsched.ports.run_stores import RunHistory
from jobsched.ports.runs import RunFilter, RunRow

SPAN_PAGE = 100
"""The page size in which the rows over the queued candidates' span are read."""
SPAN_PAGES = 3
"""Most pages of rows read over that span (a span with more rows than that: the fires past it are not shown)."""
ROUNDS = 3
"""Most rounds of ``MAX_QUEUED`` candidate fires a listing looks through for queued ones (the older rounds when the
newer fires have rows or lie in a skipped summary, whose range is passed over at once)."""
SUMMARIES_READ = 5
"""How many of the job's newest skipped rows before a fire with no row are read, for a summary covering it."""


class QueuedRuns:
    """A job's queued fires for a page of its listing, on the run store ``runs`` at the time ``clock`` gives."""

    def __init__(self, runs: RunHistory, clock: Clock) -> None:
        self.runs = runs
        self.clock = clock

    def of(
        self,
        stored: StoredJob,
        where: RunFilter,
        *,
        before_ms: int | None,
        floor_ms: int | None,
        page: list[RunRow] | None = None,
    ) -> list[RunRow]:
        """The queued fires of ``stored`` that ``where`` keeps, in ``(floor_ms, before_ms)`` (epoch ms; None:
        unbounded), newest first, as ``queued`` rows. ``page``: the job's stored rows of that range when the
        listing read all of them (no status or kind filter), else None: they are read here (1 query per
        ``SPAN_PAGE`` rows over the candidates' span). A fire with no row costs 1 more query, for a skipped
        summary that may cover it (``SUMMARIES_READ``)."""
        state = stored.state
        if where.status not in (None, RunStatus.QUEUED) or where.kind not in (None, RunKind.SCHEDULED):
            return []
        if not isinstance(state, SchedulingState):
            return []
        since = where.since_ms
        if floor_ms is not None:
            since = max(since, floor_ms + 1) if since is not None else floor_ms + 1
        found: list[RunRow] = []
        before = where.before(before_ms)
        rewritten_at, now = to_ms(stored.job.updated_at), self.clock()
        for _ in range(ROUNDS):
            fires = candidate_fires(state, rewritten_at, now, since_ms=since, before_ms=before)
            if not fires:
                break
            rows = page if page is not None else self._span(stored.job.id, fires[-1], fires[0] + 1)
            have = {row.scheduled_for for row in rows}
            missing = [fire for fire in fires if fire not in have]
            if missing:
                skipped, _ = self.runs.list_for_job(
                    stored.job.id, SUMMARIES_READ, RunFilter(status=RunStatus.SKIPPED), missing[0] + 1
                )
                rows = [*rows, *skipped]
            found.extend(queued_rows(stored.job.id, state, fires, rows))
            if len(found) >= MAX_QUEUED or len(fires) < MAX_QUEUED:
                break
            before = covered_from(fires[-1], rows)
        return found[:MAX_QUEUED]

    def _span(self, job_id: str, since_ms: int, until_ms: int) -> list[RunRow]:
        """The job's stored rows with ``scheduled_for`` in ``[since_ms, until_ms)``, at most ``SPAN_PAGES``
        pages."""
        found: list[RunRow] = []
        before: int | None = None
        for _ in range(SPAN_PAGES):
            rows, before = self.runs.list_for_job(
                job_id, SPAN_PAGE, RunFilter(since_ms=since_ms, until_ms=until_ms), before
            )
            found.extend(rows)
            if before is None:
                break
        return found


def merged_page(
    rows: list[RunRow], last: int | None, queued: list[RunRow], limit: int
) -> tuple[list[RunRow], int | None]:
    """A page of one job's listing: its stored ``rows`` (newest first; ``last``: the store's cursor, the last
    row's ``scheduled_for`` when more follow, else None) with its ``queued`` fires of the same range, newest first,
    at most ``limit``; and where the next page starts (the last item's ``scheduled_for``, exclusive), else None."""
    combined = sorted(
        [*rows, *(q for q in queued if last is None or q.scheduled_for > last)],
        key=lambda row: row.scheduled_for,
        reverse=True,
    )
    page = combined[:limit]
    more = last is not None or len(combined) > limit
    return page, (page[-1].scheduled_for if more and page else None)
