"""Dispatch on the instant: each tick looks ahead to just before the next whole second, and its loop ticks again
at each instant it saw due, so a fire between two seconds is saved and sent at its instant, never before it,
and an edit that lands before the instant still stops it. On the fakes with an injected clock (the loop sleeps
on it: no real sleeps)."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.aws.metrics import PowertoolsRunMetrics
from jobsched.domain.loop import INSTANT_TICK_BURST, INSTANT_TICK_GAP_MS, INSTANT_TICKS_MAX, tick_on_instants
from jobsched.domain.planning import horizon_ms
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Worker
from jobsched.memory.queue import MemoryDeadRuns
from jobsched.models import RunStatus
from jobsched.ports.run_messages import Delivery
from jobsched.schedule.engine import jitter_offset_ms
from jobsched.targets import Targets
from tests.support.worker import SimWaiter

INSTANT = "at 2026-03-02T10:00:05.400Z"  # T0 + 5.4 s: between two ticks


class Crash(BaseException):
    """A simulated process death: not an Exception, so nothing in the scheduler can swallow it."""


def crash(*_: Any, **__: Any) -> None:
    raise Crash


def run_until(harness: Any, contender: Any, end_ms: int) -> None:
    """The loop's own ``run`` on the fake clock (its sleeps move it) until ``end_ms``."""
    contender.loop.run(lambda: harness.clock() < end_ms)


def worker_of(harness: Any) -> Worker:
    """A worker on the harness's fakes and clock (``echo`` targets)."""
    return Worker(
        **harness.parts(),
        dead_runs=MemoryDeadRuns(),
        targets=Targets(),
        visibility=harness.queue,
        waiter=SimWaiter(harness.clock),
        metrics=PowertoolsRunMetrics(),
    )


def test_the_horizon_ends_before_the_next_tick() -> None:
    assert horizon_ms(10_005, 1000) == 10_999  # up to just before the next whole second
    assert horizon_ms(10_000, 1000) == 10_999
    assert horizon_ms(10_005, 300) == 10_305  # at most the look-ahead
    assert horizon_ms(10_999, 1000) == 10_999  # a fire on the next whole second waits for its own tick
    assert horizon_ms(10_005, 0) == 10_005  # off
    with pytest.raises(ValueError, match="lookahead_ms"):
        horizon_ms(10_005, -1)


def test_a_tick_notes_the_next_instant_due_before_the_next_second(harness: Any) -> None:
    job = harness.add(INSTANT, id="j_instant_one_off")
    a = harness.contender()
    results = harness.run_seconds(a, 5)  # steps at T0 + 1.005 ... T0 + 5.005
    assert [r.next_due_at for r in results] == [None, None, None, None, harness.T0 + 5_400]
    assert results[-1].enqueued == 0 and results[-1].lag_ms == 0  # seen, not dispatched, not late
    assert harness.runs_of(job.id) == [] and harness.drain() == []


def test_a_fire_at_400_ms_is_dispatched_at_its_instant(harness: Any) -> None:
    # Given a one-off at T0 + 5.4 s and a leader running its loop on the fake clock
    job = harness.add(INSTANT, id="j_instant_one_off")
    a = harness.contender()
    run_until(harness, a, harness.T0 + 7_000)

    # Then its run was saved and sent at 5.400 exactly (not at the 6 s tick), once, and the job moved on
    (row,) = harness.runs_of(job.id)
    assert row["enqueued_at"] == row["dispatch_at"] == harness.T0 + 5_400
    (message,) = harness.drain()
    assert (message.job_id, message.scheduled_for) == (job.id, harness.T0 + 5_400)
    assert harness.sched(job.id).get("next_run_at") is None
    assert a.loop.report.enqueued == 1


def test_without_the_look_ahead_the_fire_waits_for_the_next_second(harness: Any) -> None:
    harness.settings = harness.settings.model_copy(update={"dispatch_lookahead_ms": 0})
    job = harness.add(INSTANT, id="j_instant_one_off")
    a = harness.contender()
    run_until(harness, a, harness.T0 + 7_000)
    (row,) = harness.runs_of(job.id)
    assert row["enqueued_at"] == harness.T0 + 6_000  # the whole-second tick after it: 600 ms late


def test_the_worker_never_starts_it_before_its_instant(harness: Any) -> None:
    job = harness.add(INSTANT, id="j_instant_one_off")
    a = harness.contender()
    run_until(harness, a, harness.T0 + 5_401)
    (message,) = harness.drain()
    assert worker_of(harness).process(Delivery(message, worker="w1")) is Outcome.SUCCEEDED
    (row,) = harness.runs_of(job.id)
    assert row["started_at"] >= row["dispatch_at"] == harness.T0 + 5_400


def test_an_edit_before_the_instant_stops_the_fire(harness: Any) -> None:
    # Given the tick at T0 + 5.005 that saw the fire at 5.400 coming
    job = harness.add(INSTANT, id="j_instant_one_off")
    a = harness.contender()
    (result,) = harness.run_seconds(a, 5)[-1:]
    assert result.next_due_at == harness.T0 + 5_400

    # When the job is deleted at 5.200, before the fire's instant
    harness.clock.now_ms = harness.T0 + 5_200
    harness.jobs.delete(harness.jobs.get(job.id).job, deleted_at_ms=harness.clock(), retention_days=90)

    # Then the tick at the instant finds nothing to run: no run of a schedule the job no longer has
    assert tick_on_instants([(a.loop, result)], lambda: True) == 1
    assert harness.runs_of(job.id) == [] and harness.drain() == []


def test_a_crash_in_the_instant_tick_before_the_move_does_not_run_twice(harness: Any) -> None:
    # Given the instant tick at 5.400 that saves and sends the run, then dies before moving the job
    job = harness.add(INSTANT, id="j_instant_one_off")
    instant = harness.T0 + 5_400
    a = harness.contender("a")
    (result,) = harness.run_seconds(a, 5)[-1:]
    a.recorder.before["move"] = crash
    with pytest.raises(Crash):
        tick_on_instants([(a.loop, result)], lambda: True)
    (first,) = harness.drain()
    assert harness.sched(job.id)["next_run_at"] == instant  # not moved

    # When the loop comes back (the next second's step): the job is still due, so the same run is sent again
    a.recorder.before.clear()
    harness.run_seconds(a, 1)
    (again,) = harness.drain()
    assert (again.job_id, again.scheduled_for) == (first.job_id, first.scheduled_for) == (job.id, instant)

    # Then the claim lets one delivery run it
    worker = worker_of(harness)
    assert worker.process(Delivery(first, worker="w1")) is Outcome.SUCCEEDED
    assert worker.process(Delivery(again, worker="w2")) is Outcome.DROPPED
    (row,) = harness.runs_of(job.id)
    assert row["status"] == RunStatus.SUCCEEDED.value and row["attempt"] == 1
    assert row["started_at"] >= instant


def test_no_early_start_under_jitter_and_each_run_sent_at_its_instant(harness: Any) -> None:
    # Given jobs with jitter (sub-second dispatch offsets) firing every 10 s
    harness.settings = harness.settings.model_copy(update={"due_shards": 1})
    jobs = [harness.add("*/10 * * * * *", jitter_s=9, id=f"j_instant_jitter{i}") for i in range(6)]
    offsets = {job.id: jitter_offset_ms(job.id, 9) for job in jobs}
    assert any(o % 1000 for o in offsets.values())
    a = harness.contender()

    # When the loop runs for a minute, every message delivered as soon as it is sent
    worker = worker_of(harness)
    end = harness.T0 + 60_000

    def keep_going() -> bool:
        for n, message in enumerate(harness.drain()):
            assert worker.process(Delivery(message, worker=f"w{n}")) is Outcome.SUCCEEDED
        return harness.clock() < end

    a.loop.run(keep_going)

    # Then every run was sent at its dispatch instant exactly and started at or after it
    rows = [row for job in jobs for row in harness.runs_of(job.id)]
    assert len(rows) >= 30
    for row in rows:
        assert row["dispatch_at"] == row["scheduled_for"] + offsets[row["job_id"]]
        assert row["enqueued_at"] == row["dispatch_at"], row
        assert row["started_at"] >= row["dispatch_at"], row


def test_instant_ticks_are_rate_limited_and_a_crowded_second_is_not_sent_a_second_late(harness: Any) -> None:
    # Given more distinct sub-second instants in one second than a loop ticks for (30 ms apart)
    harness.settings = harness.settings.model_copy(update={"due_shards": 1})
    jobs = [
        harness.add(f"at 2026-03-02T10:00:05.{100 + 30 * i:03d}Z", id=f"j_instant_many{i}")
        for i in range(INSTANT_TICKS_MAX + 5)
    ]
    a = harness.contender()
    (result,) = harness.run_seconds(a, 5)[-1:]
    starts: list[int] = []
    tick = a.loop.scheduler.tick

    def timed(now: int, lease: Any) -> Any:
        starts.append(now)
        return tick(now, lease)

    a.loop.scheduler.tick = timed  # type: ignore[method-assign]

    # When the loop ticks on the instants of that second
    made = tick_on_instants([(a.loop, result)], lambda: True)

    # Then its ticks keep to the bucket: a burst, then one per INSTANT_TICK_GAP_MS
    assert made == len(starts) < len(jobs)
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            assert j - i + 1 <= INSTANT_TICK_BURST + (starts[j] - first) / INSTANT_TICK_GAP_MS, starts
    # and every fire of the second was sent within the gap of its instant: never before it, not a second late
    rows = [r for job in jobs for r in harness.runs_of(job.id)]
    assert len(rows) == len(jobs)
    assert all(0 <= r["enqueued_at"] - r["dispatch_at"] < INSTANT_TICK_GAP_MS for r in rows), rows
    assert any(r["enqueued_at"] > r["dispatch_at"] for r in rows)  # the bucket did make some wait
