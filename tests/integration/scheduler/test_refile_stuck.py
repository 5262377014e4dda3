"""The due index's anti-entropy (``DueRepair.refile_stuck``, each minute from the sweeper Lambda), on moto: a job
whose timer item was lost, which no tick can ever read again, is found by the scan, given a new timer item and
fired on; jobs whose entries are in place are left alone, and the scan resumes where the last pass stopped."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain.due_repair import STUCK_AFTER_MS
from jobsched.dynamodb.due_repair import REFILE_CURSOR_KEY, REFILE_REST_MS
from tests.support.aws import published

HOUR = 3_600_000


def _state(harness: Any, job_id: str) -> Any:
    return harness.jobs.scheduling_states([job_id])[job_id]


def _lose_timer(harness: Any, job_id: str) -> None:
    item = harness.aws.table(harness.settings.jobs_table).get_item(Key={"pk": f"job#{job_id}", "sk": "sched"})
    timer = item["Item"]
    harness.aws.table(harness.settings.jobs_table).delete_item(
        Key={"pk": timer["timer_pk"], "sk": timer["timer_sk"]}
    )


def _drained(harness: Any) -> dict[int, int]:
    """Partition 0's watermark as if every bucket before now had been drained."""
    return {0: harness.clock() // (harness.settings.due_bucket_s * 1000)}


def _fires(harness: Any, job_id: str) -> list[int]:
    harness.claim_sent()
    return [r["scheduled_for"] for r in harness.runs_of(job_id)]


def test_a_job_whose_timer_item_was_lost_is_refiled_and_fires_on(harness: Any) -> None:
    # Given two hourly jobs and a daily one, and the first hourly job's timer item lost (no tick can read it)
    lost, healthy = harness.add("every 1 hour"), harness.add("every 1 hour")
    daily = harness.add("0 0 * * *")
    _lose_timer(harness, lost.id)
    lost_bucket = _state(harness, lost.id).due.bucket
    daily_next = _state(harness, daily.id).next_run_at
    contender = harness.contender()
    harness.clock.now_ms = harness.T0 + HOUR
    harness.run_seconds(contender, 3)
    assert harness.T0 + HOUR in _fires(harness, healthy.id)
    assert _fires(harness, lost.id) == []  # stuck: its fire was never read, and nothing moves it on
    # When, more than STUCK_AFTER_MS later, the sweeper's anti-entropy pass scans the table
    harness.clock.now_ms = harness.T0 + HOUR + STUCK_AFTER_MS + 60_000
    bucket_ms = harness.settings.due_bucket_s * 1000
    watermark = harness.control_for(harness.settings).read_watermark(0)
    assert watermark is not None and watermark > lost_bucket  # the tick drained the lost entry's bucket
    done = harness.jobs.repair.refile_stuck(
        harness.clock, shards=harness.settings.due_shards, bucket_ms=bucket_ms, watermarks={0: watermark}
    )
    # Then only the stuck job gets a new timer item (the healthy one moved on; the daily one is not due)
    assert done.refiled == [lost.id] and done.wrapped
    # and the next ticks read it and move the job on from its missed fire
    harness.run_seconds(contender, 3)
    state = _state(harness, lost.id)
    assert state.next_run_at is not None and state.next_run_at > harness.clock()
    assert _state(harness, daily.id).next_run_at == daily_next > harness.clock()


def test_the_scan_goes_on_where_the_last_pass_stopped(harness: Any) -> None:
    # Given 6 jobs whose timer items were all lost, their fires long past
    jobs = [harness.add("every 1 hour") for _ in range(6)]
    for job in jobs:
        _lose_timer(harness, job.id)
    harness.clock.now_ms = harness.T0 + HOUR + STUCK_AFTER_MS + 60_000
    bucket_ms = harness.settings.due_bucket_s * 1000
    # When passes of a small budget (a page of 4 items each) run until one reaches the table's end
    refiled: list[str] = []
    passes = 0
    while True:
        done = harness.jobs.repair.refile_stuck(
            harness.clock,
            shards=harness.settings.due_shards,
            bucket_ms=bucket_ms,
            watermarks=_drained(harness),
            budget=4,
            page_size=4,
        )
        passes += 1
        refiled += done.refiled
        if done.wrapped:
            break
    # Then each job was refiled once, over several passes, and the place to go on from was saved between them
    assert sorted(refiled) == sorted(job.id for job in jobs) and passes > 2
    marks = harness.aws.table(harness.settings.jobs_table).get_item(Key=REFILE_CURSOR_KEY)["Item"]
    assert "cursor" not in marks  # wrapped: the next pass starts over


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_the_sweeper_publishes_what_a_pass_refiled_and_survives_a_failed_pass(
    harness: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobsched.dynamodb.due_repair import DueRepair
    from jobsched.observability import MetricName, metrics
    from jobsched.runtime.sweeper import refile_stuck
    from jobsched.runtime.wiring import Components

    job = harness.add("every 1 hour")
    _lose_timer(harness, job.id)
    harness.clock.now_ms = harness.T0 + HOUR + STUCK_AFTER_MS + 60_000
    components = Components(harness.settings, harness.aws, clock=harness.clock)
    drained = _drained(harness)[0]  # the partition's tick drained every bucket before now (as stored)
    assert components.control().advance_watermark(0, drained, term=1, now_ms=harness.clock())
    assert components.control().save_positions(0, '{"floor": null, "cursors": {}}', term=1)
    metrics.clear_metrics()
    capsys.readouterr()
    report = refile_stuck(components)
    assert report is not None and (report["refiled"], report["jobs"]) == (1, [job.id])
    assert published(capsys, MetricName.JOBS_REFILED) == [1.0]

    def throttled(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ThrottlingException")

    monkeypatch.setattr(DueRepair, "refile_stuck", throttled)
    assert refile_stuck(components) is None  # logged; the next minute's pass goes on
    assert published(capsys, MetricName.JOBS_REFILED) == []


def test_a_table_read_to_its_end_rests_before_it_is_read_again(harness: Any) -> None:
    job = harness.add("every 1 hour")
    bucket_ms = harness.settings.due_bucket_s * 1000
    assert harness.jobs.repair.refile_stuck(
        harness.clock, shards=harness.settings.due_shards, bucket_ms=bucket_ms, watermarks={}
    ).wrapped  # read to its end
    _lose_timer(harness, job.id)
    assert _state(harness, job.id).next_run_at == harness.T0  # a rate's first fire is at its creation
    harness.clock.now_ms = harness.T0 + STUCK_AFTER_MS + 60_000  # the job is stuck now, but the pass rests
    assert (
        harness.jobs.repair.refile_stuck(
            harness.clock,
            shards=harness.settings.due_shards,
            bucket_ms=bucket_ms,
            watermarks=_drained(harness),
        ).scanned
        == 0
    )
    harness.clock.now_ms = harness.T0 + REFILE_REST_MS  # an hour after the first read began
    assert harness.jobs.repair.refile_stuck(
        harness.clock, shards=harness.settings.due_shards, bucket_ms=bucket_ms, watermarks=_drained(harness)
    ).refiled == [job.id]


def test_a_job_waiting_in_an_undrained_bucket_is_not_refiled(harness: Any) -> None:
    # Given a job whose fire is long past, but whose bucket its partition has not drained (an outage, a rush:
    # the tick will still read its entry)
    job = harness.add("every 1 hour")
    bucket = _state(harness, job.id).due.bucket
    harness.clock.now_ms = harness.T0 + HOUR + STUCK_AFTER_MS + 60_000
    bucket_ms = harness.settings.due_bucket_s * 1000
    # When the anti-entropy pass runs, the watermark at that bucket
    done = harness.jobs.repair.refile_stuck(
        harness.clock, shards=harness.settings.due_shards, bucket_ms=bucket_ms, watermarks={0: bucket}
    )
    # Then it is left alone (no second entry, no alarm), and so is a job of a partition without a watermark
    assert done.refiled == [] and done.wrapped
    harness.clock.now_ms += REFILE_REST_MS
    assert (
        harness.jobs.repair.refile_stuck(
            harness.clock, shards=harness.settings.due_shards, bucket_ms=bucket_ms, watermarks={}
        ).refiled
        == []
    )


def test_a_scheduling_item_this_code_cannot_read_is_skipped_not_a_stop(harness: Any) -> None:
    # Given a job whose timer item was lost, and another whose scheduling item no code of ours wrote
    lost, bad = harness.add("every 1 hour"), harness.add("every 1 hour")
    _lose_timer(harness, lost.id)
    harness.aws.table(harness.settings.jobs_table).update_item(
        Key={"pk": f"job#{bad.id}", "sk": "sched"},
        UpdateExpression="SET missed = :m",
        ExpressionAttributeValues={":m": "no-such-policy"},
    )
    harness.clock.now_ms = harness.T0 + HOUR + STUCK_AFTER_MS + 60_000
    bucket_ms = harness.settings.due_bucket_s * 1000
    # When the anti-entropy pass reads them
    done = harness.jobs.repair.refile_stuck(
        harness.clock, shards=harness.settings.due_shards, bucket_ms=bucket_ms, watermarks=_drained(harness)
    )
    # Then the unreadable one is counted and skipped, and the lost one is refiled all the same
    assert (done.refiled, done.unreadable, done.wrapped) == ([lost.id], 1, True)


def test_the_buckets_a_partition_may_still_read_are_not_taken_for_drained(harness: Any) -> None:
    from jobsched.runtime.sweeper import drained
    from jobsched.runtime.wiring import Components

    # Given partition 0 led by this code with its watermark at bucket 1000, partition 1 (adopted: a deployment
    # ran 3 partitions, this one runs 1) whose positions were stored with watermark 900 while a leader that
    # stores none (a rollback) moved the watermark on to 1000, and partition 2 never led by this code
    components = Components(harness.settings, harness.aws, clock=harness.clock)
    control = components.control()
    assert control.raise_partition_high_water(3) == (3, True)
    for partition in (0, 1, 2):
        assert control.advance_watermark(partition, 1000, term=1, now_ms=harness.clock())
    assert control.save_positions(0, '{"floor": null, "watermark": 1000, "cursors": {}}', term=1)
    assert control.save_positions(1, '{"floor": null, "watermark": 900, "cursors": {}}', term=1)
    # Then the anti-entropy takes only partition 0's buckets before 1000 for drained, partition 1's before 900
    # (its next leader reads again from there), and none of partition 2's
    assert drained(components) == {0: 1000, 1: 900}


def test_a_candidate_whose_job_moved_since_the_scan_read_it_is_not_refiled(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    # Given a job the (eventually consistent) Scan sees stuck, but which a tick moved a moment before: its
    # consistent read shows the next fire
    job = harness.add("every 1 hour")
    harness.clock.now_ms = harness.T0 + HOUR + STUCK_AFTER_MS + 60_000
    moved = _state(harness, job.id)
    moved = replace(moved, due=replace(moved.due, due_at=moved.due.due_at + HOUR))
    store = harness.jobs
    monkeypatch.setattr(store, "scheduling_states", lambda ids: {job.id: moved})
    # When the anti-entropy pass reads it
    done = store.repair.refile_stuck(
        harness.clock,
        shards=harness.settings.due_shards,
        bucket_ms=harness.settings.due_bucket_s * 1000,
        watermarks=_drained(harness),
    )
    # Then it is not refiled
    assert done.refiled == [] and done.wrapped


def test_a_refiled_entry_goes_to_a_shard_the_ticks_read_now(harness: Any) -> None:
    from jobsched.domain.registration import register

    # Given a job filed when the deployment had 8 due shards (in a shard above 0), its timer item lost, and the
    # deployment now at 1 shard: the ticks read shard 0 only
    eight = harness.settings.model_copy(update={"due_shards": 8})
    job = next(
        j
        for j in (harness.job("every 1 hour") for _ in range(50))
        if register(j, settings=eight, now_ms=harness.T0).due.shard
    )
    harness.jobs.create(job, register(job, settings=eight, now_ms=harness.T0))
    _lose_timer(harness, job.id)
    harness.clock.now_ms = harness.T0 + HOUR + STUCK_AFTER_MS + 60_000
    # When the anti-entropy pass refiles it
    done = harness.jobs.repair.refile_stuck(
        harness.clock, shards=1, bucket_ms=harness.settings.due_bucket_s * 1000, watermarks=_drained(harness)
    )
    # Then its new timer item is in shard 0, the late lane
    assert done.refiled == [job.id]
    timers = [
        item["pk"]
        for item in harness.aws.table(harness.settings.jobs_table).scan()["Items"]
        if item["pk"].startswith("due#") and job.id in item["sk"]
    ]
    assert len(timers) == 1 and timers[0].endswith("#s0#late")
