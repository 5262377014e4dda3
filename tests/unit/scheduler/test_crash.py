"""A scheduler that dies between its steps: the next leader creates no second run and loses none."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.ports.runs import Claim, ClaimRequest, new_run


class Crash(BaseException):
    """A simulated process death: not an Exception, so nothing in the scheduler can swallow it."""


def crash(*_: Any, **__: Any) -> None:
    raise Crash


def take_over(harness: Any, holder: str = "b") -> Any:
    """A fresh contender that steps each second until it leads and has ticked once; returns it."""
    b = harness.contender(holder)
    for _ in range(10):
        if harness.run_seconds(b, 1):
            return b
    raise AssertionError("the standby never took over")


def claim(harness: Any, job_id: str, fire: int, worker: str) -> Claim:
    """A worker's claim of the run ``(job_id, fire)`` from its message, as ``Worker.process`` makes it."""
    now = harness.clock()
    return harness.runs.claim(
        ClaimRequest(
            job_id,
            fire,
            worker=worker,
            now_ms=now,
            stale_before_ms=now - 120_000,
            retry_due_by_ms=now,
            create=new_run(job_id, fire, now_ms=now, retention_days=90, sweep_after_ms=None),
        )
    )


def test_crash_before_enqueue_leaves_the_job_due_and_the_next_leader_sends_its_run(harness: Any) -> None:
    # Given a leader that dies right before enqueueing the run (its first write for a scheduled run)
    job = harness.add("every 1 minute")
    a = harness.contender("a")
    a.recorder.before["send"] = crash
    with pytest.raises(Crash):
        harness.run_seconds(a, 1)

    # Then nothing records the run yet, and the job is not moved
    assert harness.runs_of(job.id) == []
    assert harness.runs.list_for_job(job.id, 10)[0] == []
    assert harness.drain() == []
    assert harness.sched(job.id)["next_run_at"] == harness.T0  # not moved

    # When a standby takes over after the lease runs out
    b = take_over(harness)

    # Then it sends the run once and moves the job; no run row is written by a scheduler
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    assert [(m.job_id, m.scheduled_for) for m in harness.drain()] == [(job.id, harness.T0)]
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000
    assert b.recorder.count("put_new") == 0 and b.recorder.count("move") == 1


def test_crash_after_enqueue_before_move_creates_no_second_run(harness: Any) -> None:
    job = harness.add("every 1 minute")
    a = harness.contender("a")
    a.recorder.before["move"] = crash
    with pytest.raises(Crash):
        harness.run_seconds(a, 1)
    assert len(harness.drain()) == 1  # enqueued once before the crash

    # Given a worker already claimed the run from that message (its claim created the row)
    assert claim(harness, job.id, harness.T0, "w1").claimed
    take_over(harness)

    # Then the new leader sends a copy (it cannot know) and moves the job on; the copy's claim is refused
    copies = harness.drain()
    assert [(m.job_id, m.scheduled_for) for m in copies] == [(job.id, harness.T0)]
    refused = claim(harness, job.id, harness.T0, "w2")
    assert not refused.claimed and refused.before is not None and refused.before.worker == "w1"
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000


def test_crash_after_enqueue_before_move_of_an_unclaimed_run_enqueues_a_harmless_copy(harness: Any) -> None:
    job = harness.add("every 1 minute")
    a = harness.contender("a")
    a.recorder.before["move"] = crash
    with pytest.raises(Crash):
        harness.run_seconds(a, 1)
    take_over(harness)
    # One run, sent twice (the new leader cannot know the first message went out): one claim wins
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    messages = harness.drain()
    assert [(m.job_id, m.scheduled_for) for m in messages] == [(job.id, harness.T0)] * 2
    assert [claim(harness, m.job_id, m.scheduled_for, f"w{i}").claimed for i, m in enumerate(messages)] == [
        True,
        False,
    ]
    (row,) = harness.runs.list_for_job(job.id, 10)[0]
    assert row.attempt == 1 and row.worker == "w0"
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000


def test_crash_in_the_middle_of_a_catch_up_resumes_without_duplicates(harness: Any) -> None:
    # Given an every-second job caught up after 30 s of downtime; the leader dies after its first batch of 10
    job = harness.add("every 1 second")
    harness.clock.advance(30_000)
    a = harness.contender("a")
    sends = {"n": 0}

    def die_after_one_batch(*_: Any, **__: Any) -> None:
        sends["n"] += 1
        if sends["n"] > 1:
            raise Crash

    a.recorder.before["send"] = die_after_one_batch
    with pytest.raises(Crash):
        harness.run_seconds(a, 1)
    take_over(harness)
    harness.run_seconds(harness.contenders[-1], 3)
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert fires == sorted(set(fires))
    assert fires == list(range(harness.T0, fires[-1] + 1, 1000))  # every fire once, none missing
    sent = [m.scheduled_for for m in harness.drain()]
    assert set(sent) == set(fires)
    # each fire's claims: exactly one wins, whatever the number of copies sent
    wins = [claim(harness, job.id, at, f"w{i}").claimed for i, at in enumerate(sent)]
    assert sum(wins) == len(fires)
