"""A scheduler that dies between its steps: the next leader creates no second run and loses none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


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


def leader_dies_before(harness: Any, step: str, death: Callable[..., None] = crash) -> None:
    """A leader that ticks once and dies on its way (``death``, by default right before its first ``step``:
    ``send``, ``move``)."""
    a = harness.contender("a")
    a.recorder.before[step] = death
    with pytest.raises(Crash):
        harness.run_seconds(a, 1)


def test_crash_before_enqueue_leaves_the_job_due_and_the_next_leader_sends_its_run(harness: Any) -> None:
    # Given a leader that dies right before enqueueing the run (its first write for a scheduled run)
    job = harness.add("every 1 minute")
    leader_dies_before(harness, "send")

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
    leader_dies_before(harness, "move")
    assert len(harness.drain()) == 1  # enqueued once before the crash

    # Given a worker already claimed the run from that message (its claim created the row)
    assert harness.claim(job.id, harness.T0, "w1").claimed
    take_over(harness)

    # Then the new leader sends a copy (it cannot know) and moves the job on; the copy's claim is refused
    copies = harness.drain()
    assert [(m.job_id, m.scheduled_for) for m in copies] == [(job.id, harness.T0)]
    refused = harness.claim(job.id, harness.T0, "w2")
    assert not refused.claimed and refused.before is not None and refused.before.worker == "w1"
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000


def test_crash_after_enqueue_before_move_of_an_unclaimed_run_enqueues_a_harmless_copy(harness: Any) -> None:
    job = harness.add("every 1 minute")
    leader_dies_before(harness, "move")
    take_over(harness)
    # One run, sent twice (the new leader cannot know the first message went out): one claim wins
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0]
    messages = harness.drain()
    assert [(m.job_id, m.scheduled_for) for m in messages] == [(job.id, harness.T0)] * 2
    assert [harness.claim(m.job_id, m.scheduled_for, f"w{i}").claimed for i, m in enumerate(messages)] == [
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
    sends = {"n": 0}

    def die_after_one_batch(*_: Any, **__: Any) -> None:
        sends["n"] += 1
        if sends["n"] > 1:
            raise Crash

    leader_dies_before(harness, "send", die_after_one_batch)
    take_over(harness)
    harness.run_seconds(harness.contenders[-1], 3)
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert fires == sorted(set(fires))
    assert fires == list(range(harness.T0, fires[-1] + 1, 1000))  # every fire once, none missing
    sent = [m.scheduled_for for m in harness.drain()]
    assert set(sent) == set(fires)
    # each fire's claims: exactly one wins, whatever the number of copies sent
    wins = [harness.claim(job.id, at, f"w{i}").claimed for i, at in enumerate(sent)]
    assert sum(wins) == len(fires)


def _claimed_and_skipped(harness: Any, job_id: str, messages: list[Any]) -> tuple[set[int], list[Any]]:
    """Claim every message as a worker would; the fires whose claim won, and the job's skipped rows."""
    won = {m.scheduled_for for m in messages if harness.claim(m.job_id, m.scheduled_for, "w").claimed}
    rows, _ = harness.runs.list_for_job(job_id, 10_000)
    return won, [row for row in rows if row.status.value == "skipped"]


def test_a_fire_sent_on_time_by_a_leader_that_died_before_its_move_is_not_recorded_missed(
    harness: Any,
) -> None:
    # Given: a leader sends the T0 fire of an every-minute job (missed: skip) on time, then dies before its move
    job = harness.add("every 1 minute", missed="skip")
    leader_dies_before(harness, "move")
    sent_on_time = harness.drain()
    assert [m.scheduled_for for m in sent_on_time] == [harness.T0]

    # When: no scheduler runs for two minutes, then a standby takes over (T0 is now late beyond the grace)
    harness.clock.advance(120_000)
    take_over(harness)

    # Then: the fire sent on time runs (its claim wins); it is not recorded skipped. Only T0+1 min, never sent,
    # is missed; T0+2 min runs on time
    won, skipped = _claimed_and_skipped(harness, job.id, sent_on_time + harness.drain())
    assert won == {harness.T0, harness.T0 + 120_000}
    assert [(row.scheduled_for, row.skipped_count) for row in skipped] == [(harness.T0 + 60_000, None)]


def test_fires_sent_during_a_catch_up_are_not_inside_a_later_leaders_skipped_summary(harness: Any) -> None:
    # Given: an every-second job (catch_up, 5 s window) whose leader sends T0..T0+3 s, then dies before its move
    job = harness.add("every 1 second", misfire_grace_s=2, catch_up_window_s=5)
    harness.clock.advance(3_000)
    leader_dies_before(harness, "move")
    sent_on_time = harness.drain()
    assert [m.scheduled_for for m in sent_on_time] == [harness.T0 + s * 1000 for s in range(5)]

    # When: a standby takes over a minute later
    harness.clock.advance(60_000)
    take_over(harness)

    # Then: each fire sent on time runs once, and no skipped row stands for any of them
    won, skipped = _claimed_and_skipped(harness, job.id, sent_on_time + harness.drain())
    assert {m.scheduled_for for m in sent_on_time} <= won
    for row in skipped:
        last = row.skipped_through or row.scheduled_for
        assert not [fire for fire in won if row.scheduled_for <= fire <= last], row


def test_a_fire_sent_by_a_leader_whose_move_keeps_failing_is_not_recorded_missed(harness: Any) -> None:
    # Given: a leader sends the T0 fire (missed: skip) on time, and its moves fail for two minutes
    job = harness.add("every 1 minute", missed="skip")
    a = harness.contender("a")
    failures = {"left": 1}

    def store_down(*_: Any, **__: Any) -> None:
        if failures["left"]:
            raise RuntimeError("store unavailable")

    a.recorder.before["move"] = store_down
    harness.run_seconds(a, 1)
    sent_on_time = harness.drain()
    assert [m.scheduled_for for m in sent_on_time] == [harness.T0]
    harness.run_seconds(a, 120)  # the same leader, its lease renewed, ticking each second

    # When: the store is back
    failures["left"] = 0
    harness.run_seconds(a, 1)

    # Then: T0 runs, sent again rather than skipped
    won, skipped = _claimed_and_skipped(harness, job.id, sent_on_time + harness.drain())
    assert harness.T0 in won
    assert harness.T0 not in {row.scheduled_for for row in skipped}
