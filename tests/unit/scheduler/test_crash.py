"""A scheduler that dies between its steps: the next leader creates no second run and loses none."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.models import RunStatus


class Crash(BaseException):
    """A simulated process death: not an Exception, so nothing in the scheduler can swallow it."""


def crash(*_: Any, **__: Any) -> None:
    raise Crash


def dies_at(harness: Any, step: str, hook: Any = crash) -> None:
    """Contender "a" with ``hook`` (by default :func:`crash`) before its store/queue call ``step``, run for a
    second until the hook kills it."""
    a = harness.contender("a")
    a.recorder.before[step] = hook
    with pytest.raises(Crash):
        harness.run_seconds(a, 1)


def take_over(harness: Any, holder: str = "b") -> Any:
    """A fresh contender that steps each second until it leads and has ticked once; returns it."""
    b = harness.contender(holder)
    for _ in range(10):
        if harness.run_seconds(b, 1):
            return b
    raise AssertionError("the standby never took over")


def test_crash_after_save_before_enqueue_leaves_a_recoverable_queued_run(harness: Any) -> None:
    # Given a leader that dies right after saving the run, before enqueueing it
    job = harness.add("every 1 minute")
    dies_at(harness, "send")

    # Then the run row is queued, in the sweeper's index, and nothing is on the queue
    (row,) = harness.runs_of(job.id)
    assert row["status"] == RunStatus.QUEUED.value
    assert row["sweep_pk"].startswith("sweep#") and row["sweep_at"] > row["enqueued_at"]
    assert harness.drain() == []
    assert harness.sched(job.id)["next_run_at"] == harness.T0  # not moved

    # When a standby takes over after the lease runs out
    b = take_over(harness)

    # Then it creates no second run, enqueues the queued one (the documented re-enqueue) and moves the job
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    assert [(m.job_id, m.scheduled_for) for m in harness.drain()] == [(job.id, harness.T0)]
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000
    assert b.recorder.count("put_new") == 1 and b.recorder.count("move") == 1


def test_crash_after_enqueue_before_move_creates_no_second_run(harness: Any) -> None:
    job = harness.add("every 1 minute")
    dies_at(harness, "move")
    assert len(harness.drain()) == 1  # enqueued once before the crash

    # Given a worker already claimed the run (queued -> running)
    harness.runs.force(job.id, harness.T0, status=RunStatus.RUNNING)
    take_over(harness)

    # Then the new leader's put is refused: no second run, no second message, the job moves on
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    assert harness.drain() == []
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000


def test_crash_after_enqueue_before_move_of_an_unclaimed_run_enqueues_a_harmless_copy(harness: Any) -> None:
    job = harness.add("every 1 minute")
    dies_at(harness, "move")
    b = take_over(harness)
    # One run; its row still queued, so the new leader sent it again (workers claim conditionally)
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    messages = harness.drain()
    assert [(m.job_id, m.scheduled_for) for m in messages] == [(job.id, harness.T0)] * 2
    assert b.recorder.count("put_new") == 1
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000


def test_crash_in_the_middle_of_a_catch_up_resumes_without_duplicates(harness: Any) -> None:
    # Given an every-second job caught up after 30 s of downtime; the leader dies after 10 puts
    job = harness.add("every 1 second")
    harness.clock.advance(30_000)
    puts = {"n": 0}

    def die_after_ten(*_: Any, **__: Any) -> None:
        puts["n"] += 1
        if puts["n"] > 10:
            raise Crash

    dies_at(harness, "put_new", die_after_ten)
    take_over(harness)
    harness.run_seconds(harness.contenders[-1], 3)
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert fires == sorted(set(fires))
    assert fires == list(range(harness.T0, fires[-1] + 1, 1000))  # every fire once, none missing
    sent = [m.scheduled_for for m in harness.drain()]
    assert set(sent) == set(fires)
