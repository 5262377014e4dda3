"""plan_fires: which fires of a due job run, which are recorded skipped, and where the job moves (pure)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.clock import to_ms
from jobsched.domain.planning import ON_TIME_TOLERANCE_MS, DueJob, TickLimits, plan_fires, skip_through_ms
from jobsched.models import MissedPolicy
from jobsched.ports.jobs import DueEntry

T0 = to_ms(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
MIN = 60_000
LIMITS = TickLimits()


def due(schedule: str, next_run_at: int = T0, **fields: Any) -> DueJob:
    values: dict[str, Any] = {
        "job_id": "j_plan",
        "due": DueEntry("j_plan", 0, 0, 0, next_run_at + fields.get("jitter_offset_ms", 0)),
        "due_at": next_run_at + fields.get("jitter_offset_ms", 0),
        "next_run_at": next_run_at,
        "schedule": schedule,
        "timezone": "UTC",
        "anchor_at": T0,
        "end_at": None,
        "missed": MissedPolicy.CATCH_UP,
        "catch_up_window_s": 86400,
        "misfire_grace_s": 60,
        "jitter_offset_ms": 0,
        "term": 0,
    }
    values.update(fields)
    return DueJob(**values)


def test_on_time_fire_runs_and_next_fire_counts_from_scheduled_for() -> None:
    plan = plan_fires(due("* * * * *"), T0 + 700, LIMITS)
    assert plan.runs == (T0,)
    assert plan.skipped == ()
    assert plan.next_run_at == T0 + MIN


def test_catch_up_runs_every_missed_fire_once_oldest_first() -> None:
    # Given an every-minute job whose scheduler was down for ten minutes
    plan = plan_fires(due("* * * * *"), T0 + 10 * MIN + 500, LIMITS)
    # Then each of the 11 fires (T0 .. T0+10 min) runs once, oldest first, and none is skipped
    assert plan.runs == tuple(T0 + k * MIN for k in range(11))
    assert plan.skipped == ()
    assert plan.next_run_at == T0 + 11 * MIN


def test_skip_records_each_missed_fire_and_runs_the_one_within_grace() -> None:
    job = due("* * * * *", missed=MissedPolicy.SKIP)
    plan = plan_fires(job, T0 + 10 * MIN + 500, LIMITS)
    # Fires late by 60 s or more are skipped (one row each: 10 <= skip_rows_max) ...
    assert [row.scheduled_for for row in plan.skipped] == [T0 + k * MIN for k in range(10)]
    assert all(row.count == 1 and "skip" in row.reason for row in plan.skipped)
    # ... the fire 0.5 s late runs, and the job moves to the next future fire
    assert plan.runs == (T0 + 10 * MIN,)
    assert plan.next_run_at == T0 + 11 * MIN


def test_a_fire_two_seconds_late_under_skip_still_runs() -> None:
    plan = plan_fires(due("* * * * *", missed=MissedPolicy.SKIP), T0 + 2_000, LIMITS)
    assert plan.runs == (T0,)
    assert plan.skipped == ()


def test_zero_grace_still_treats_a_fire_found_by_the_next_poll_as_on_time() -> None:
    job = due("* * * * *", missed=MissedPolicy.SKIP, misfire_grace_s=0)
    assert plan_fires(job, T0 + ON_TIME_TOLERANCE_MS - 1, LIMITS).runs == (T0,)
    late = plan_fires(job, T0 + ON_TIME_TOLERANCE_MS, LIMITS)
    assert late.runs == ()
    assert [row.scheduled_for for row in late.skipped] == [T0]


def test_catch_up_window_skips_older_fires_and_runs_the_rest() -> None:
    job = due("* * * * *", catch_up_window_s=300)
    now = T0 + 10 * MIN
    plan = plan_fires(job, now, LIMITS)
    # Late by more than 300 s: T0 .. T0+4 min (late 600..360 s); T0+5 min is exactly 300 s late: runs
    assert [row.scheduled_for for row in plan.skipped] == [T0 + k * MIN for k in range(5)]
    assert all("catch-up window" in row.reason for row in plan.skipped)
    assert plan.runs == tuple(T0 + k * MIN for k in range(5, 11))


def test_grace_wider_than_the_catch_up_window_wins() -> None:
    job = due("* * * * *", catch_up_window_s=30, misfire_grace_s=120)
    assert skip_through_ms(job, T0 + 10 * MIN) == T0 + 10 * MIN - 120_000
    plan = plan_fires(job, T0 + 10 * MIN, LIMITS)
    assert plan.runs == (T0 + 9 * MIN, T0 + 10 * MIN)


def test_many_skipped_fires_become_one_summary_row_with_a_count() -> None:
    # An every-second rate missed for ten minutes under skip: 540+ fires, one summary row
    job = due("every 1 second", missed=MissedPolicy.SKIP)
    now = T0 + 10 * MIN
    plan = plan_fires(job, now, LIMITS)
    (summary,) = plan.skipped
    through = now - 60_000  # late by >= 60 s
    assert summary.scheduled_for == T0
    assert summary.count == (through - T0) // 1000 + 1
    assert plan.runs[0] == through + 1000
    assert plan.runs == tuple(range(through + 1000, now + 1, 1000))  # the last 60 s: within grace


def test_a_month_of_missed_one_second_fires_is_counted_without_enumerating() -> None:
    job = due("every 1 second", missed=MissedPolicy.SKIP)
    now = T0 + 30 * 86400 * 1000
    started = time.perf_counter()
    plan = plan_fires(job, now, LIMITS)
    assert time.perf_counter() - started < 1.0  # arithmetic, not 2.6 million steps
    assert plan.skipped[0].count == (now - 60_000 - T0) // 1000 + 1
    assert plan.next_run_at is not None and plan.next_run_at > now - 60_000


class CountingSchedule:
    """A Schedule proxy counting the calls the planner makes into it (the planner's work)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return target(*args, **kwargs)

        return call


def test_every_second_cron_skipped_after_two_days_jumps_to_now_in_one_plan() -> None:
    # An every-second cron under skip after two days down: walking its backlog 1,000 fires a tick would take 173
    # ticks and 173 summary rows, on-time fires recorded as missed meanwhile. One plan, one summary row, and the
    # fires within grace run at once; the planner's calls into the schedule do not grow with the backlog.
    job = due("* * * * * *", missed=MissedPolicy.SKIP)
    now = T0 + 2 * 86400_000
    schedule = CountingSchedule(job.parsed_schedule())
    plan = plan_fires(job, now, LIMITS, schedule)  # type: ignore[arg-type]
    assert len(plan.skipped) == 1
    summary = plan.skipped[0]
    assert (summary.scheduled_for, summary.through) == (T0, now - 60_000)
    assert summary.count == (now - 60_000 - T0) // 1000 + 1
    assert plan.runs[0] == now - 59_000  # the first fire within the misfire grace runs in this tick
    assert schedule.calls.get("next_fire", 0) <= len(plan.runs) + 1
    assert schedule.calls.get("count_fires", 0) == 1


def test_a_schedule_that_yields_no_later_fire_leaves_the_due_index() -> None:
    # A schedule whose next fire is not after the previous one must end, not be re-planned forever
    class Stuck:
        kind = "once"

        def next_fire(self, after: datetime) -> datetime:
            return after  # no progress

    plan = plan_fires(due("at 2026-03-02T10:00:00Z"), T0 + 500, LIMITS, Stuck())  # type: ignore[arg-type]
    assert plan.runs == (T0,)
    assert plan.next_run_at is None


def test_a_one_off_accepted_late_is_not_skipped_by_its_policy() -> None:
    # Registered 50 s after its instant with missed: skip and a 5 s grace, it must still run
    accepted = T0 + 50_000
    for policy, fields in (
        (MissedPolicy.SKIP, {"misfire_grace_s": 5}),
        (MissedPolicy.CATCH_UP, {"catch_up_window_s": 0}),
    ):
        job = due("at 2026-03-02T10:00:00Z", missed=policy, on_time_from=accepted, **fields)
        plan = plan_fires(job, accepted + 1_500, LIMITS)
        assert plan.runs == (T0,), policy
        assert plan.skipped == ()
        # the grace still applies from the acceptance on: a scheduler down for a while afterwards skips it
        late = plan_fires(job, accepted + 600_000, LIMITS)
        assert late.runs == () and late.skipped[0].scheduled_for == T0


def test_catch_up_of_a_one_second_job_is_bounded_per_tick() -> None:
    plan = plan_fires(due("every 1 second"), T0 + 3600_000, TickLimits(max_runs_per_job=50))
    assert plan.runs == tuple(T0 + k * 1000 for k in range(50))
    assert plan.next_run_at == T0 + 50_000  # still due: the next tick continues oldest first


def test_one_off_runs_once_and_leaves_the_index() -> None:
    plan = plan_fires(due("at 2026-03-02T10:00:00"), T0 + 300, LIMITS)
    assert plan.runs == (T0,)
    assert plan.next_run_at is None


def test_end_at_stops_the_schedule() -> None:
    job = due("* * * * *", end_at=T0 + 2 * MIN)
    plan = plan_fires(job, T0 + 5 * MIN, LIMITS)
    assert plan.runs == (T0, T0 + MIN, T0 + 2 * MIN)
    assert plan.next_run_at is None
    # A job whose next_run_at is already past end_at ends without running
    ended = plan_fires(replace(job, next_run_at=T0 + 3 * MIN), T0 + 5 * MIN, LIMITS)
    assert ended.runs == () and ended.next_run_at is None


def test_jitter_delays_dispatch_but_not_the_run_key() -> None:
    job = due("* * * * *", jitter_offset_ms=7_250)
    assert plan_fires(job, T0 + 7_249, LIMITS).runs == ()
    plan = plan_fires(job, T0 + 7_250, LIMITS)
    assert plan.runs == (T0,)  # scheduled_for unchanged
    assert plan.next_run_at == T0 + MIN


@pytest.mark.parametrize(
    ("first_day", "last_day"),
    [("2026-03-27", "2026-04-01"), ("2026-10-23", "2026-10-28")],
    ids=["spring-forward", "fall-back"],
)
@pytest.mark.parametrize("expression", ["0 2 * * *", "30 2 * * *"])
def test_daily_berlin_job_runs_once_per_local_day_across_dst(
    first_day: str, last_day: str, expression: str
) -> None:
    from zoneinfo import ZoneInfo

    from jobsched.clock import from_ms
    from jobsched.schedule.engine import parse_schedule

    berlin = ZoneInfo("Europe/Berlin")
    start = datetime.fromisoformat(first_day).replace(tzinfo=berlin)
    end = to_ms(datetime.fromisoformat(last_day).replace(tzinfo=berlin))
    first = parse_schedule(expression, "Europe/Berlin").next_fire(start)
    assert first is not None
    job = due(expression, next_run_at=to_ms(first), timezone="Europe/Berlin")
    fires: list[int] = []
    while job.next_run_at < end:  # a poll just after each dispatch instant
        plan = plan_fires(job, job.next_run_at + 500, LIMITS)
        fires.extend(plan.runs)
        assert plan.next_run_at is not None
        job = replace(job, next_run_at=plan.next_run_at, due_at=plan.next_run_at)
    days = [from_ms(f).astimezone(berlin).date() for f in fires]
    assert len(days) == len(set(days)) == 5
