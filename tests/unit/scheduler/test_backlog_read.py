"""A backlog larger than a tick (a rush): the next tick takes the entries a full tick read and did not reach
instead of querying their shards again, and every fire is still enqueued exactly once, in order, whatever
fails in between. On the in-memory fakes with the injected clock."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from jobsched.domain.planning import TickLimits
from jobsched.ports.jobs import DueQuery, Move
from tests.support.scheduler import throttled

LIMITS = TickLimits(max_jobs=30, page_size=50, threads=2)


def _queries_of_bucket(contender: Any, bucket: int) -> list[int]:
    """The ``up_to_ms`` bound of each due-index query of ``bucket`` the contender made so far."""
    return [
        args[0].up_to_ms
        for name, args, _ in contender.recorder.calls
        if name == "query_due" and args[0].bucket == bucket
    ]


def _queries_before(contender: Any, bucket: int) -> int:
    """How many due-index queries of buckets before ``bucket`` the contender made so far."""
    return sum(
        1 for name, args, _ in contender.recorder.calls if name == "query_due" and args[0].bucket < bucket
    )


def _sent(harness: Any) -> Counter[tuple[str, int]]:
    return Counter((m.job_id, m.scheduled_for) for m in harness.drain())


def test_the_next_tick_takes_a_full_ticks_backlog_without_reading_it_again(harness: Any) -> None:
    # Given 100 jobs due at T0 (25 in each of the bucket's 4 shards) and ticks of at most 30 jobs
    ids = harness.add_many(100, "every 1 minute")
    bucket = harness.T0 // (harness.settings.due_bucket_s * 1000)
    a = harness.contender(limits=LIMITS)

    # When the scheduler ticks once a second, noting the bounds of the queries of the rush's bucket tick by tick
    per_tick, results = [], []
    for _ in range(5):
        before = len(_queries_of_bucket(a, bucket))
        results += harness.run_seconds(a, 1)
        per_tick.append(_queries_of_bucket(a, bucket)[before:])

    # Then the first tick read the bucket's 4 shards, the next three planned what it had read (30, 30, 10),
    # asking each shard only for entries due before its backlog (written since: none here), and the fifth, no
    # longer behind, read them afresh up to its now
    assert [r.due for r in results] == [30, 30, 30, 10, 0]
    assert [len(bounds) for bounds in per_tick] == [4, 4, 4, 4, 4]
    assert all(bound == harness.T0 - 1 for bounds in per_tick[1:4] for bound in bounds)
    assert all(bound >= results[4].now for bound in per_tick[4])
    # And each fire was enqueued exactly once, oldest first (by job id among equals)
    sent = _sent(harness)
    assert set(sent) == {(job_id, harness.T0) for job_id in ids} and set(sent.values()) == {1}
    assert all(harness.sched(job_id)["next_run_at"] == harness.T0 + 60_000 for job_id in ids)


def test_a_failed_read_after_a_full_tick_loses_no_run(harness: Any) -> None:
    # Given a full tick that left a backlog of 10 jobs (too few to fill the next tick, which queries too)
    ids = harness.add_many(40, "every 1 minute")
    a = harness.contender(limits=LIMITS)
    harness.run_seconds(a, 1)

    # When the next tick's read of one shard fails (the tick ends: the loop steps again a second later)
    def shard_0_throttled(query: DueQuery) -> None:
        if query.shard == 0:
            throttled()

    a.recorder.before["query_due"] = shard_0_throttled
    assert harness.run_seconds(a, 1) == []
    del a.recorder.before["query_due"]
    results = harness.run_seconds(a, 4)

    # Then the other shards' jobs and the backlog are not lost: every fire is enqueued exactly once
    assert sum(r.due for r in results) == 10
    sent = _sent(harness)
    assert set(sent) == {(job_id, harness.T0) for job_id in ids} and set(sent.values()) == {1}


def test_jobs_whose_move_failed_in_a_full_tick_are_retried_by_the_next(harness: Any) -> None:
    # Given 100 jobs due at T0 and a first tick of 30 in which two of them cannot be moved
    ids = sorted(harness.add_many(100, "every 1 minute"))
    failing = set(ids[:2])
    a = harness.contender(limits=LIMITS)

    def move_refused(move: Move) -> None:
        if move.job_id in failing:
            throttled()

    a.recorder.before["move"] = move_refused
    (first,) = harness.run_seconds(a, 1)
    assert first.due == 30 and first.errors == 2
    del a.recorder.before["move"]

    # When the next tick runs from the first one's backlog
    (second,) = harness.run_seconds(a, 1)

    # Then it retries those two first (oldest due, lowest ids), as a fresh read would have: they move now
    assert second.due == 30 and second.errors == 0
    assert all(harness.sched(job_id)["next_run_at"] == harness.T0 + 60_000 for job_id in failing)
    harness.run_seconds(a, 3)
    sent = _sent(harness)
    assert set(sent) == {(job_id, harness.T0) for job_id in ids}
    # Their fire went out twice (its first move failed); a worker's claim keeps one run per fire
    assert {key for key, count in sent.items() if count > 1} == {(job_id, harness.T0) for job_id in failing}


def test_an_entry_written_behind_a_backlog_is_not_passed_by_the_watermark(harness: Any) -> None:
    # Given 100 jobs due at T0 and a scheduler that first ticks three minutes later (their bucket is closed)
    ids = harness.add_many(100, "every 1 hour")
    bucket_ms = harness.settings.due_bucket_s * 1000
    bucket = harness.T0 // bucket_ms
    harness.clock.now_ms = harness.T0 + 3 * bucket_ms
    a = harness.contender(limits=LIMITS)
    harness.run_seconds(a, 1)

    # When, while the next ticks plan the first tick's backlog, an entry appears in the closed bucket (a writer
    # whose clock was behind)
    (late,) = harness.add_many(1, "every 1 hour")
    state = harness.jobs.states[late]
    harness.jobs.states[late] = replace(state, due=replace(state.due, bucket=bucket, due_at=harness.T0 + 1))
    results = harness.run_seconds(a, 3)
    assert [r.due for r in results] == [30, 30, 10]
    assert a.scheduler.watermark is not None and a.scheduler.watermark <= bucket

    # Then the watermark waits for a tick that reads the bucket afresh, which finds the late entry
    harness.run_seconds(a, 2)
    assert {job_id for job_id, _ in _sent(harness)} == {*ids, late}
    assert a.scheduler.watermark > bucket


@pytest.mark.parametrize(
    ("jobs", "limits", "due"),
    [
        # a backlog left: 100 jobs, ticks of 30, pages of 50 (the first tick reads all, plans 30)
        (100, LIMITS, [30, 30, 30, 10, 0]),
        # the third tick takes the last of the backlog and is still full, leaving nothing (one read of all 90)
        (90, TickLimits(max_jobs=30, page_size=1000, threads=2), [30, 30, 30, 0, 0]),
    ],
    ids=["while a backlog drains", "after the last full tick"],
)
def test_the_look_behind_waits_while_a_backlog_drains_and_for_a_tick_after_the_last_full_one(
    harness: Any, jobs: int, limits: TickLimits, due: list[int]
) -> None:
    # Given jobs due at T0 and a new leader's first tick 29 s later, just before the bucket's middle (when the
    # look-behind reads the buckets behind the watermark again)
    harness.add_many(jobs, "every 1 hour")
    bucket = harness.T0 // (harness.settings.due_bucket_s * 1000)
    harness.clock.now_ms = harness.T0 + 28_000
    a = harness.contender(limits=limits)

    # When it ticks once a second through the middle of the bucket while it takes the backlog
    behind, results = [], []
    for _ in range(5):
        before = _queries_before(a, bucket)
        results += harness.run_seconds(a, 1)
        behind.append(_queries_before(a, bucket) - before)

    # Then the first tick looked behind (a new leader), the ticks taking the backlog or full did not, and the
    # first tick after them did (the period's look-behind, postponed, not dropped)
    assert [r.due for r in results] == due
    shards = harness.settings.due_shards
    assert behind == [5 * shards, 0, 0, 0, 5 * shards]


def test_a_look_behind_postponed_for_its_width_runs_even_in_a_backlog(harness: Any) -> None:
    # Given a backlog that lasts longer than the look-behind's width (700 jobs, 2 a tick, one read of all)
    harness.add_many(700, "every 1 day")
    bucket = harness.T0 // (harness.settings.due_bucket_s * 1000)
    a = harness.contender(limits=TickLimits(max_jobs=2, page_size=1000, threads=2))

    # When it ticks once a second through it
    looked = []
    for second in range(360):
        # (buckets before the one ahead of the rush's are read by the look-behind alone)
        before = _queries_before(a, bucket - 1)
        (result,) = harness.run_seconds(a, 1)
        if _queries_before(a, bucket - 1) > before:
            looked.append((second, result.due))

    # Then besides the new leader's first tick, it looked behind once the look-behind was LOOK_BEHIND_MS late,
    # while still full (the buckets behind were read though the backlog alone filled the tick)
    assert looked[0] == (0, 2)
    second, due = looked[1]
    assert due == 2 and 5 * 60 - 60 <= second <= 5 * 60 + 60, looked
