"""Missed fires after downtime: catch_up runs each once, oldest first; skip records them; grace; no stall."""

from __future__ import annotations

from typing import Any

from jobsched.domain.planning import TickLimits
from jobsched.models import MissedPolicy, RunStatus

MIN = 60_000


def restart_at(harness: Any, instant: int, holder: str = "b", **kwargs: Any) -> Any:
    """A fresh scheduler that comes back at ``instant`` (everything before it was down); its steps follow
    with ``harness.run_seconds`` (each at ``instant``'s offset within the second)."""
    harness.clock.now_ms = instant - 1000
    return harness.contender(holder, **kwargs)


def test_ten_minutes_of_downtime(harness: Any) -> None:
    catch_up = harness.add("* * * * *")
    skip = harness.add("* * * * *", missed=MissedPolicy.SKIP)
    a = harness.contender("a")
    harness.run_seconds(a, 1)  # T0's fires run
    harness.drain()

    # Given the scheduler, standby and all, is down from T0+1 s to T0+10 min
    b = restart_at(harness, harness.T0 + 10 * MIN + 5)
    (result,) = harness.run_seconds(b, 1, offset_ms=harness.clock.now_ms % 1000)

    # Then catch_up runs every missed fire once, oldest first
    expected = [harness.T0 + k * MIN for k in range(1, 11)]
    catch_rows = harness.runs_of(catch_up.id)[1:]
    assert [r["scheduled_for"] for r in catch_rows] == expected
    assert all(r["status"] == RunStatus.QUEUED.value for r in catch_rows)
    messages = harness.drain()
    assert [m.scheduled_for for m in messages if m.job_id == catch_up.id] == expected
    # And skip records the fires late by more than the grace as skipped run rows (visible in history) ...
    skip_rows = harness.runs_of(skip.id)[1:]
    assert [r["scheduled_for"] for r in skip_rows] == expected
    assert [r["status"] for r in skip_rows] == [RunStatus.SKIPPED.value] * 9 + [RunStatus.QUEUED.value]
    assert all("skip" in r["error"] and "sweep_pk" not in r for r in skip_rows[:9])
    # ... while the fire 5 ms late runs; both jobs move to the next future fire
    assert [m.scheduled_for for m in messages if m.job_id == skip.id] == [expected[-1]]
    assert (
        harness.sched(skip.id)["next_run_at"]
        == harness.sched(catch_up.id)["next_run_at"]
        == harness.T0 + 11 * MIN
    )
    assert result.skipped == 9 and result.enqueued == 11
    assert max(result.dispatch_lateness_ms) == 9 * MIN + 5  # the oldest catch-up run


def test_a_fire_two_seconds_late_under_skip_still_runs(harness: Any) -> None:
    job = harness.add("* * * * *", missed=MissedPolicy.SKIP)
    a = harness.contender("a")
    harness.run_seconds(a, 1)
    b = restart_at(harness, harness.T0 + MIN + 2_000)
    (result,) = harness.run_seconds(b, 1, offset_ms=harness.clock.now_ms % 1000)
    rows = harness.runs_of(job.id)
    assert [(r["scheduled_for"], r["status"]) for r in rows] == [
        (harness.T0, RunStatus.QUEUED.value),
        (harness.T0 + MIN, RunStatus.QUEUED.value),
    ]
    assert result.skipped == 0 and result.dispatch_lateness_ms == [2_000]


def test_a_long_outage_under_skip_leaves_one_summary_row(harness: Any) -> None:
    job = harness.add("every 1 second", missed=MissedPolicy.SKIP)
    b = restart_at(harness, harness.T0 + 3600_000)
    (result,) = harness.run_seconds(b, 1, offset_ms=harness.clock.now_ms % 1000)
    rows = harness.runs_of(job.id)
    summary = rows[0]
    assert summary["status"] == RunStatus.SKIPPED.value and summary["scheduled_for"] == harness.T0
    assert summary["skipped_count"] == 3540 + 1  # T0 .. T0+59 min: late by 60 s or more
    assert result.skipped == 3541
    assert [r["scheduled_for"] for r in rows[1:]] == [harness.T0 + 3541_000 + k * 1000 for k in range(60)]


def test_catch_up_window_skips_what_is_older(harness: Any) -> None:
    job = harness.add("* * * * *", catch_up_window_s=300)
    b = restart_at(harness, harness.T0 + 10 * MIN)
    harness.run_seconds(b, 1, offset_ms=harness.clock.now_ms % 1000)
    rows = harness.runs_of(job.id)
    statuses = [
        (r["scheduled_for"] - harness.T0) // MIN for r in rows if r["status"] == RunStatus.SKIPPED.value
    ]
    assert statuses == [0, 1, 2, 3, 4]
    assert all("catch-up window" in r["error"] for r in rows if r["status"] == RunStatus.SKIPPED.value)
    assert len(rows) == 11


def test_thousands_of_missed_fires_do_not_stall_the_other_jobs(harness: Any) -> None:
    # Given an every-second job and ten every-10-minute jobs, after an hour of downtime
    heavy = harness.add("every 1 second")
    others = [harness.add("*/10 * * * *") for _ in range(10)]
    b = restart_at(harness, harness.T0 + 3600_000 + 5, limits=TickLimits(max_runs_per_job=20, threads=4))

    # When the scheduler comes back
    first, second = harness.run_seconds(b, 2, offset_ms=harness.clock.now_ms % 1000)

    # Then the first tick runs every other job's missed fires, and only the oldest 20 of the heavy job's
    for job in others:
        assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [
            harness.T0 + k * 10 * MIN for k in range(7)
        ]
    heavy_runs = [r["scheduled_for"] for r in harness.runs_of(heavy.id)]
    assert heavy_runs == [harness.T0 + k * 1000 for k in range(40)]  # 20 per tick, oldest first
    assert first.enqueued == 70 + 20 and second.enqueued == 20
    # The lag metric shows the backlog: the oldest due fire not yet enqueued is ~an hour old
    assert 3500_000 < second.lag_ms <= 3600_000
