"""Dispatch on the instant: a tick sends the fires due before the next tick ahead of their instant, with the
instant in the message, and the worker holds each until then; never early, never twice. On the fakes with an
injected clock (the worker's hold sleeps on it: no real sleeps)."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain.planning import horizon_ms
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Worker
from jobsched.memory.queue import MemoryDeadRuns
from jobsched.models import RunStatus
from jobsched.ports.runs import Delivery, RunMessage, new_run
from jobsched.schedules import jitter_offset_ms
from jobsched.targets import Targets
from tests.support.worker import SimWaiter

INSTANT = "at 2026-03-02T10:00:05.400Z"  # T0 + 5.4 s: between two ticks


class Crash(BaseException):
    """A simulated process death: not an Exception, so nothing in the scheduler can swallow it."""


def crash(*_: Any, **__: Any) -> None:
    raise Crash


class Sleeper:
    """The worker's injected sleep: records each sleep (seconds) and moves the fake clock by it, plus
    ``overshoot_ms`` (a thread woken late)."""

    def __init__(self, harness: Any, overshoot_ms: int = 0) -> None:
        self.harness, self.overshoot_ms = harness, overshoot_ms
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.harness.clock.advance(round(seconds * 1000) + self.overshoot_ms)


def worker_of(harness: Any, sleep: Any) -> Worker:
    """A worker on the harness's fakes and clock (``echo`` targets), holding with ``sleep``."""
    return Worker(
        settings=harness.settings,
        runs=harness.runs,
        jobs=harness.jobs,
        queue=harness.queue,
        dead_runs=MemoryDeadRuns(),
        targets=Targets(),
        clock=harness.clock,
        visibility=harness.queue,
        waiter=SimWaiter(harness.clock),
        sleep=sleep,
    )


def deliver(worker: Worker, message: RunMessage, n: int = 1) -> Outcome:
    return worker.process(Delivery(message, worker=f"w{n}", receipt_handle=f"rh-{n}"))


def test_the_horizon_ends_before_the_next_tick() -> None:
    assert horizon_ms(10_005, 1000) == 10_999  # up to just before the next whole second
    assert horizon_ms(10_000, 1000) == 10_999
    assert horizon_ms(10_005, 300) == 10_305  # at most the look-ahead
    assert horizon_ms(10_999, 1000) == 10_999  # a fire on the next whole second waits for its own tick
    assert horizon_ms(10_005, 0) == 10_005  # off
    with pytest.raises(ValueError, match="lookahead_ms"):
        horizon_ms(10_005, -1)


def test_a_fire_at_400_ms_is_dispatched_ahead_with_its_instant(harness: Any) -> None:
    # Given a one-off at T0 + 5.4 s
    job = harness.add(INSTANT)
    instant = harness.T0 + 5_400
    assert harness.sched(job.id)["next_run_at"] == instant
    a = harness.contender()

    # When ticks run at .005 past each second: the tick before the fire's second sends nothing ...
    results = harness.run_seconds(a, 4)  # ticks at T0 + 1.005 ... T0 + 4.005
    assert harness.drain() == [] and harness.runs_of(job.id) == []
    # ... and the tick at T0 + 5.005 sends it, ahead of its instant, carrying it
    (result,) = harness.run_seconds(a, 1)
    (message,) = harness.drain()
    assert (message.job_id, message.scheduled_for, message.dispatch_at) == (job.id, instant, instant)
    assert message.delay_s == 0  # the look-ahead ends before the next whole second: no whole second to delay
    (row,) = harness.runs_of(job.id)
    assert row["dispatch_at"] == instant and row["enqueued_at"] == harness.T0 + 5_005

    # Then it is neither late nor lagging, and the job has moved on (a one-off: out of the due index)
    assert result.dispatch_lateness_ms == [0] and result.lag_ms == 0 and result.enqueued == 1
    assert all(r.lag_ms == 0 for r in results)
    assert harness.sched(job.id).get("next_run_at") is None
    assert harness.run_seconds(a, 2)[-1].enqueued == 0  # nothing sent twice


def test_without_the_look_ahead_the_fire_waits_for_the_next_tick(harness: Any) -> None:
    harness.settings = harness.settings.model_copy(update={"dispatch_lookahead_ms": 0})
    job = harness.add(INSTANT)
    a = harness.contender()
    harness.run_seconds(a, 5)  # up to T0 + 5.005
    assert harness.drain() == []
    (result,) = harness.run_seconds(a, 1)  # T0 + 6.005: 605 ms late, as before the look-ahead
    (message,) = harness.drain()
    assert message.dispatch_at is None and result.dispatch_lateness_ms == [605]
    assert harness.runs_of(job.id)[0]["enqueued_at"] == harness.T0 + 6_005


def test_the_worker_holds_a_message_sent_ahead_until_its_instant(harness: Any) -> None:
    # Given the fire at T0 + 5.4 s sent ahead by the tick at T0 + 5.005
    job = harness.add(INSTANT)
    a = harness.contender()
    harness.run_seconds(a, 5)
    (message,) = harness.drain()
    harness.clock.advance(20)  # received 20 ms after the send

    # When a worker receives it
    sleeper = Sleeper(harness)
    outcome = deliver(worker_of(harness, sleeper), message)

    # Then it slept until the instant and started exactly then, never before
    assert outcome is Outcome.SUCCEEDED
    assert sleeper.slept == [pytest.approx(0.375)]
    row = harness.runs_of(job.id)[0]
    assert row["started_at"] == row["dispatch_at"] == harness.T0 + 5_400
    assert row["lateness_ms"] == 0
    assert harness.queue.visibility == []  # a held message keeps its visibility: nothing handed back


def test_a_message_whose_instant_passes_while_held_starts_at_once(harness: Any) -> None:
    job = harness.add(INSTANT)
    a = harness.contender()
    harness.run_seconds(a, 5)
    (message,) = harness.drain()

    # When the hold's sleep ends late (the thread woke 250 ms after the instant)
    sleeper = Sleeper(harness, overshoot_ms=250)
    outcome = deliver(worker_of(harness, sleeper), message)

    # Then the run starts at once, without a second sleep
    assert outcome is Outcome.SUCCEEDED and len(sleeper.slept) == 1
    assert harness.runs_of(job.id)[0]["started_at"] == harness.T0 + 5_650

    # And a message received after its instant is not held at all
    late = harness.add("at 2026-03-02T10:00:07.200Z")
    harness.run_seconds(a, 2)  # T0 + 7.005 sends it ahead
    (ahead,) = harness.drain()
    harness.clock.now_ms = harness.T0 + 7_900
    sleeper = Sleeper(harness)
    assert deliver(worker_of(harness, sleeper), ahead) is Outcome.SUCCEEDED
    assert sleeper.slept == [] and harness.runs_of(late.id)[0]["started_at"] == harness.T0 + 7_900


def test_a_worker_that_cannot_hold_hands_the_message_back_unclaimed(harness: Any) -> None:
    # Given a message sent ahead, delivered 395 ms before its instant to a worker without a sleep
    job = harness.add(INSTANT)
    a = harness.contender()
    harness.run_seconds(a, 5)
    (message,) = harness.drain()

    # Then it is handed back (visible again in 1 s: whole seconds, rounded up), not claimed, not run
    assert deliver(worker_of(harness, None), message) is Outcome.DEFERRED
    assert harness.queue.visibility == [("rh-1", 1)]
    assert harness.runs_of(job.id)[0]["status"] == RunStatus.QUEUED.value
    assert harness.runs_of(job.id)[0].get("started_at") is None

    # And once its instant has come, the redelivery runs it
    harness.clock.now_ms = harness.T0 + 6_400
    assert deliver(worker_of(harness, None), message, 2) is Outcome.SUCCEEDED


def test_a_message_further_ahead_than_a_hold_may_last_is_handed_back(harness: Any) -> None:
    # A message whose instant is 5 s away (a skewed clock, a hand-made message): no 5 s hold in a Lambda
    job = harness.add("every 1 minute")
    harness.runs.put_new(new_run(job.id, harness.T0 + 5_000, now_ms=harness.clock(), retention_days=90))
    sleeper = Sleeper(harness)
    message = RunMessage(job.id, harness.T0 + 5_000, dispatch_at=harness.T0 + 5_000)
    assert deliver(worker_of(harness, sleeper), message) is Outcome.DEFERRED
    assert sleeper.slept == [] and harness.queue.visibility == [("rh-1", 5)]


def test_a_stalled_clock_never_lets_a_held_run_start_early(harness: Any) -> None:
    job = harness.add(INSTANT)
    a = harness.contender()
    harness.run_seconds(a, 5)
    (message,) = harness.drain()
    slept: list[float] = []
    # a sleep that returns at once: the clock never reaches the instant
    assert deliver(worker_of(harness, slept.append), message) is Outcome.DEFERRED
    assert len(slept) == 3  # HOLD_ROUNDS, then handed back
    assert harness.runs_of(job.id)[0]["status"] == RunStatus.QUEUED.value


def test_a_crash_between_send_ahead_and_move_does_not_run_twice(harness: Any) -> None:
    # Given a leader that sends the fire ahead and dies before moving the job
    job = harness.add(INSTANT)
    instant = harness.T0 + 5_400
    a = harness.contender("a")
    harness.run_seconds(a, 4)
    a.recorder.before["move"] = crash
    with pytest.raises(Crash):
        harness.run_seconds(a, 1)
    (first,) = harness.drain()
    assert first.dispatch_at == instant and harness.sched(job.id)["next_run_at"] == instant

    # When the same leader's next tick (restarted at once, still inside the look-ahead: T0 + 5.3) finds the job
    # still due: its run row exists (queued), so the same run is sent again, still carrying its instant
    a.recorder.before.clear()
    harness.clock.now_ms = harness.T0 + 5_300
    result = a.step()
    assert result is not None and result.created == 0 and result.reenqueued == 1
    (again,) = harness.drain()
    assert (again.job_id, again.scheduled_for, again.dispatch_at) == (job.id, instant, instant)
    assert harness.sched(job.id).get("next_run_at") is None  # moved this time

    # Then both deliveries are held to the instant, and the claim lets only one of them run
    sleeper = Sleeper(harness)
    worker = worker_of(harness, sleeper)
    assert deliver(worker, first, 1) is Outcome.SUCCEEDED
    assert deliver(worker, again, 2) is Outcome.DROPPED
    (row,) = harness.runs_of(job.id)
    assert row["status"] == RunStatus.SUCCEEDED.value and row["attempt"] == 1
    assert row["started_at"] == instant


def test_no_early_start_under_jitter(harness: Any) -> None:
    # Given jobs with jitter (sub-second dispatch offsets) firing every 10 s
    harness.settings = harness.settings.model_copy(update={"due_shards": 1})
    jobs = [harness.add("*/10 * * * * *", jitter_s=9) for _ in range(6)]
    offsets = {job.id: jitter_offset_ms(job.id, 9) for job in jobs}
    assert any(o % 1000 for o in offsets.values())
    a = harness.contender()
    sleeper = Sleeper(harness)
    worker = worker_of(harness, sleeper)

    # When a tick runs each second and every message is delivered right after it (held on the fake clock)
    for _ in range(60):
        harness.run_seconds(a, 1)
        for n, message in enumerate(harness.drain()):
            assert deliver(worker, message, n) is Outcome.SUCCEEDED

    # Then every run started at its dispatch instant (fire + offset) or after, and the ones sent ahead exactly at it
    rows = [row for job in jobs for row in harness.runs_of(job.id)]
    assert len(rows) >= 30
    for row in rows:
        assert row["dispatch_at"] == row["scheduled_for"] + offsets[row["job_id"]]
        assert row["started_at"] >= row["dispatch_at"], row
        assert row["lateness_ms"] == row["started_at"] - row["scheduled_for"]
    held = [row for row in rows if row["enqueued_at"] < row["dispatch_at"]]
    assert held and all(row["started_at"] == row["dispatch_at"] for row in held)
    assert sleeper.slept


def test_the_message_carries_its_dispatch_instant_only_when_sent_ahead() -> None:
    ahead = RunMessage("j_1", 10_000, dispatch_at=10_400)
    assert ahead.body() == '{"job_id":"j_1","scheduled_for":10000,"dispatch_at":10400}'
    assert RunMessage.parse(ahead.body()) == ahead
    plain = RunMessage("j_1", 10_000)
    assert plain.body() == '{"job_id":"j_1","scheduled_for":10000}'  # as before: older workers read it alike
    assert RunMessage.parse(plain.body()) == plain
    for bad in ('{"job_id":"j_1","scheduled_for":1,"dispatch_at":"soon"}', "[1, 2]"):
        with pytest.raises(ValueError, match="malformed run message"):
            RunMessage.parse(bad)
