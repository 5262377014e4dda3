"""A backlog larger than a tick (a rush): the next tick takes the entries a full tick read and did not reach
instead of querying their shards again, and every fire is still enqueued exactly once, in order, whatever
fails in between. On the in-memory fakes with the injected clock."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from jobsched.domain.planning import TickLimits
from jobsched.ports.jobs import EARLY, EARLY_HIGH, LATE, LATE_HIGH, DueQuery, Move
from tests.support.scheduler import throttled

LIMITS = TickLimits(max_jobs=30, page_size=50, threads=2)


def _queries_of_bucket(contender: Any, bucket: int) -> list[tuple[str, int]]:
    """The lane and ``up_to_ms`` bound of each due-index query of ``bucket`` the contender made so far."""
    return [
        (args[0].lane, args[0].up_to_ms)
        for name, args, _ in contender.recorder.calls
        if name == "query_due" and args[0].bucket == bucket
    ]


def _sent(harness: Any) -> Counter[tuple[str, int]]:
    return Counter((m.job_id, m.scheduled_for) for m in harness.drain())


def test_the_next_tick_takes_a_full_ticks_backlog_without_reading_it_again(harness: Any) -> None:
    # Given 100 jobs due at T0, registered 30 s before (early entries: 25 in each of the bucket's 4 shards), and
    # ticks of at most 30 jobs
    harness.clock.now_ms = harness.T0 - 30_000
    ids = harness.add_many(100, "* * * * *")
    harness.clock.now_ms = harness.T0
    bucket = harness.T0 // (harness.settings.due_bucket_s * 1000)
    a = harness.contender(limits=LIMITS)

    # When the scheduler ticks once a second, noting the bounds of the queries of the rush's bucket tick by tick
    per_tick, results = [], []
    for _ in range(5):
        before = len(_queries_of_bucket(a, bucket))
        results += harness.run_seconds(a, 1)
        per_tick.append(_queries_of_bucket(a, bucket)[before:])

    # Then the first tick read both lanes of the bucket's 4 shards and the two high lanes of its high shard, the
    # next three planned what it had read (30, 30, 10), asking each early lane only for entries filed before the
    # backlog (written since: none here) and each late lane (filed at their writing, not their due instant) and
    # each high lane (a normal backlog never holds them back) up to the tick's horizon, and the fifth, no longer
    # behind, read them afresh up to its now
    assert [r.due for r in results] == [30, 30, 30, 10, 0]
    assert [len(bounds) for bounds in per_tick] == [10, 10, 10, 10, 10]
    # (while the backlog fills a tick, every early lane is read only before it, carried or not)
    for bounds, result in zip(per_tick[1:3], results[1:3], strict=True):
        horizon = result.now + 994
        assert sorted(bounds) == [(EARLY, harness.T0 - 1)] * 4 + [(EARLY_HIGH, horizon)] + [
            (LATE, horizon)
        ] * 4 + [(LATE_HIGH, horizon)]
    assert all(bound == harness.T0 - 1 or bound == results[3].now + 994 for _, bound in per_tick[3])
    assert {lane for bounds in per_tick for lane, _ in bounds} == {EARLY, LATE, EARLY_HIGH, LATE_HIGH}
    assert all(bound >= results[4].now for _, bound in per_tick[4])
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

    assert harness.run_second_with(a, "query_due", shard_0_throttled) == []
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

    (first,) = harness.run_second_with(a, "move", move_refused)
    assert first.due == 30 and first.errors == 2

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
    # whose clock was three minutes behind)
    (late,) = harness.add_many(1, "every 1 hour")
    state = harness.jobs.states[late]
    entry = harness.entry(late, harness.T0 + 1, written_at=harness.T0, version=state.version)
    assert entry.bucket == bucket
    harness.jobs.states[late] = replace(state, next_run_at=harness.T0 + 1, due=entry)
    results = harness.run_seconds(a, 3)
    # (filed in the late lane at its writer's instant, it is read as soon as the backlog no longer fills a tick)
    assert [r.due for r in results] == [30, 30, 11]

    # Then the watermark passed the bucket only with the late entry handled: every job ran, the late one too
    harness.run_seconds(a, 2)
    assert {job_id for job_id, _ in _sent(harness)} == {*ids, late}
    assert a.scheduler.watermark > bucket
