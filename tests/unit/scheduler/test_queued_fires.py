"""Queued fires derived from a job's scheduling state (``jobsched.domain.queued``, design §3.5): the newest fires
before ``next_run_at`` and after the job's last rewrite, found by counting rather than listing every fire, and
left out when a row or a skipped summary covers them."""

from __future__ import annotations

import pytest

from jobsched.clock import from_ms, to_ms
from jobsched.domain.queued import (
    QUEUED_LOOKBACK_MS,
    candidate_fires,
    covered_from,
    dispatch_window,
    newest_fires,
    queued_rows,
)
from jobsched.models import RunStatus
from jobsched.ports.jobs import SchedulingState
from jobsched.ports.runs import RunRow
from jobsched.schedule.engine import parse_schedule

T0 = 1_772_445_600_000  # 2026-03-02T10:00:00Z
MINUTE = 60_000


@pytest.mark.parametrize(
    ("expression", "span_ms"),
    [
        ("every 1 second", 6 * 3_600_000),
        ("*/7 * * * * *", 86_400_000),
        ("0 9 * * 1-5", 30 * 86_400_000),
        ("*/5 * * * *", 3_600_000),
    ],
)
def test_the_newest_fires_are_those_a_full_listing_ends_with(expression: str, span_ms: int) -> None:
    schedule = parse_schedule(expression, "Europe/Berlin", start_at=from_ms(T0 - span_ms - 1))
    lower, upper = T0 - span_ms, T0 + 1_234
    listed = [to_ms(f) for f in schedule.fires(from_ms(lower - 1), from_ms(upper - 1), 10**6)]
    for limit in (1, 5, 20):
        assert newest_fires(schedule, lower, upper, limit) == list(reversed(listed[-limit:]))


def test_the_window_runs_from_the_last_rewrite_to_next_run_at_or_now_once_ended() -> None:
    state = SchedulingState("j_1", 0, "* * * * *", next_run_at=T0 + 3 * MINUTE)
    assert dispatch_window(state, T0, T0 + 5 * MINUTE) == (T0, T0 + 3 * MINUTE)
    assert (
        dispatch_window(state, T0 + 3 * MINUTE, T0 + 5 * MINUTE) is None
    )  # rewritten since: none dispatched
    assert dispatch_window(state, 0, T0)[0] == T0 + 3 * MINUTE - QUEUED_LOOKBACK_MS  # type: ignore[index]
    ended = SchedulingState("j_1", 0, "at 2026-03-02T10:00:00Z", next_run_at=None)
    assert dispatch_window(ended, T0 - 1_000, T0 + 5 * MINUTE) == (T0 - 1_000, T0 + 5 * MINUTE + 1)
    assert candidate_fires(ended, T0 - 1_000, T0 + 5 * MINUTE) == [T0]


def test_fires_with_a_row_or_within_a_skipped_summary_are_not_queued() -> None:
    state = SchedulingState(
        "j_1", 0, "* * * * *", next_run_at=T0 + 10 * MINUTE, jitter_offset_ms=7, owner="ana"
    )
    fires = candidate_fires(state, T0, T0 + 10 * MINUTE)
    assert fires == [T0 + n * MINUTE for n in range(9, -1, -1)]
    rows = [
        RunRow("j_1", T0 + 9 * MINUTE, RunStatus.RUNNING),
        RunRow("j_1", T0 + 2 * MINUTE, RunStatus.SKIPPED, skipped_count=5, skipped_through=T0 + 6 * MINUTE),
    ]
    queued = queued_rows("j_1", state, fires, rows)
    assert [row.scheduled_for for row in queued] == [T0 + n * MINUTE for n in (8, 7, 1, 0)]
    assert {(row.status, (row.dispatch_at or 0) - row.scheduled_for, row.owner) for row in queued} == {
        (RunStatus.QUEUED, 7, "ana")
    }
    assert covered_from(T0 + 4 * MINUTE, rows) == T0 + 2 * MINUTE
    assert covered_from(T0 + 8 * MINUTE, rows) == T0 + 8 * MINUTE


def test_a_schedule_that_no_longer_parses_has_no_queued_fires() -> None:
    state = SchedulingState("j_1", 0, "not a schedule", next_run_at=T0 + MINUTE)
    assert candidate_fires(state, T0 - MINUTE, T0) == []
