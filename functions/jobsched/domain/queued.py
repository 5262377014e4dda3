"""Queued fires (design §3.5): the fires the scheduler dispatched that no worker has claimed yet, derived from what
it already writes, without a write of their own. Pure.

A scheduled run has no row until its claim (design §4.2); the scheduler moves the job's ``next_run_at`` past a
fire only after its message is sent (design §4.1: the due index). So a fire of the job's schedule before its stored
``next_run_at`` (the schedule ended: at or before now), at or after the job's last rewrite (``updated_at``: an
edit re-times the schedule, a resume starts from its instant, so earlier fires may never have been dispatched
under this schedule), with no row and no skipped summary covering it, was dispatched and waits on the run
queue: it is listed ``queued``. A one-off accepted late (``on_time_from``) counts from its own instant.

Fires dispatched before the job's last rewrite show only once claimed; at most :data:`MAX_QUEUED` fires, the
newest, within :data:`QUEUED_LOOKBACK_MS` of that bound, are listed.
"""

from __future__ import annotations

from collections.abc import Iterable

from jobsched.clock import from_ms, to_ms
from jobsched.domain.fires import state_schedule
from jobsched.models import RunKind, RunStatus
from jobsched.ports.jobs import SchedulingState
from jobsched.ports.runs import RunRow
from jobsched.schedule.engine import ONE_OFF_GRACE_S, Schedule, ScheduleError

MAX_QUEUED = 20
"""Most queued fires a job's listing shows (the newest)."""
QUEUED_LOOKBACK_MS = 7 * 86_400_000
"""How far back (ms) from the newest possible one a fire is looked for: a week."""


def dispatch_window(state: SchedulingState, rewritten_at_ms: int, now_ms: int) -> tuple[int, int] | None:
    """``[lower, upper)`` (epoch ms): where the fires of ``state`` that were dispatched under its current schedule
    lie (see the module docstring), ``rewritten_at_ms`` being the job's last rewrite; None when empty."""
    upper = state.next_run_at if state.next_run_at is not None else now_ms + 1
    lower = rewritten_at_ms
    if state.on_time_from is not None:  # a one-off accepted up to the grace after its instant
        lower = min(lower, state.on_time_from - int(ONE_OFF_GRACE_S * 1000))
    lower = max(lower, upper - QUEUED_LOOKBACK_MS)
    return (lower, upper) if lower < upper else None


def newest_fires(schedule: Schedule, lower: int, upper: int, limit: int) -> list[int]:
    """The newest ``limit`` fires of ``schedule`` in ``[lower, upper)`` (epoch ms), newest first. Found by
    counting (``Schedule.count_fires``, arithmetic) to where the ``limit``-th newest lies, then listing from
    there, so the cost does not grow with the fires in the range."""
    after, until = from_ms(lower - 1), from_ms(upper - 1)
    if schedule.count_fires(after, until, limit + 1) > limit:
        low, high = lower - 1, upper - 1  # count(low) > limit, count(high) = 0: narrow to count = limit
        while high - low > 1:
            middle = (low + high) // 2
            if schedule.count_fires(from_ms(middle), until, limit + 1) > limit:
                low = middle
            else:
                high = middle
        after = from_ms(high)
    return sorted((to_ms(fire) for fire in schedule.fires(after, until, limit)), reverse=True)


def candidate_fires(
    state: SchedulingState,
    rewritten_at_ms: int,
    now_ms: int,
    *,
    since_ms: int | None = None,
    before_ms: int | None = None,
    limit: int = MAX_QUEUED,
) -> list[int]:
    """The fires (epoch ms, newest first, at most ``limit``) of job state ``state`` that were dispatched under its
    current schedule (:func:`dispatch_window`, ``rewritten_at_ms`` being the job's last rewrite) in ``[since_ms,
    before_ms)`` (None: unbounded): each is queued unless it has a row (:func:`queued_rows`). None for a stored
    schedule that no longer parses."""
    window = dispatch_window(state, rewritten_at_ms, now_ms)
    if window is None or limit <= 0:
        return []
    lower = max(window[0], since_ms) if since_ms is not None else window[0]
    upper = min(window[1], before_ms) if before_ms is not None else window[1]
    if lower >= upper:
        return []
    try:
        schedule = state_schedule(state)
    except ScheduleError:
        return []
    return newest_fires(schedule, lower, upper, limit)


def queued_rows(
    job_id: str, state: SchedulingState, fires: Iterable[int], rows: Iterable[RunRow]
) -> list[RunRow]:
    """Of ``fires`` (epoch ms, from :func:`candidate_fires`) of job ``job_id`` in ``state``, those with no row among
    ``rows`` (its stored rows over the fires' span, with any skipped summary that may cover them) and within no
    summary's range, as ``queued`` run rows in the order given."""
    stored = list(rows)
    have = {row.scheduled_for for row in stored}
    summaries = [
        (row.scheduled_for, row.skipped_through) for row in stored if row.skipped_through is not None
    ]
    return [
        RunRow(
            job_id,
            fire,
            RunStatus.QUEUED,
            RunKind.SCHEDULED,
            dispatch_at=fire + state.jitter_offset_ms,
            owner=state.owner,
            term=state.term,
        )
        for fire in fires
        if fire not in have and not any(start <= fire <= end for start, end in summaries)
    ]


def covered_from(fire: int, rows: Iterable[RunRow]) -> int:
    """Where the search for older queued fires goes on from (exclusive, epoch ms) after ``fire``: the start of a
    skipped summary among ``rows`` whose range holds ``fire`` (its fires all skipped), else ``fire``."""
    starts = [
        row.scheduled_for
        for row in rows
        if row.skipped_through is not None and row.scheduled_for <= fire <= row.skipped_through
    ]
    return min(starts, default=fire)
