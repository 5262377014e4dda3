"""The registration rule (pure): where a job lives, its anchor and first fire, its scheduling state."""

from __future__ import annotations

from datetime import UTC, datetime

from jobsched.clock import from_ms, to_ms
from jobsched.domain.registration import due_entry, partition_of, register, shard_of
from jobsched.models import CommandTarget, Job
from tests.support.backends import memory_settings

T0 = to_ms(datetime(2026, 3, 2, 10, 0, 0, 500_000, tzinfo=UTC))
SETTINGS = memory_settings(scheduler_partitions=4)


def job(schedule: str, **fields: object) -> Job:
    return Job(
        id="j_0123456789abcdef0123",
        name="report",
        owner="team-a",
        schedule=schedule,
        target=CommandTarget(name="echo"),
        created_at=from_ms(T0),
        updated_at=from_ms(T0),
        **fields,
    )


def test_partition_and_shard_are_stable_hashes_in_range() -> None:
    ids = [f"j_{n:020x}" for n in range(200)]
    assert {partition_of(i, 4) for i in ids} == {0, 1, 2, 3}
    assert [partition_of(i, 4) for i in ids] == [partition_of(i, 4) for i in ids]
    assert any(partition_of(i, 4) != shard_of(i, 4) for i in ids)  # two different hashes


def test_a_past_due_instant_is_filed_in_the_bucket_of_now() -> None:
    entry = due_entry("j_x", T0 - 600_000, partition=2, shards=4, bucket_ms=60_000, now_ms=T0)
    assert (entry.partition, entry.bucket, entry.due_at) == (2, T0 // 60_000, T0 - 600_000)
    future = due_entry("j_x", T0 + 600_000, partition=2, shards=4, bucket_ms=60_000, now_ms=T0)
    assert future.bucket == (T0 + 600_000) // 60_000


def test_a_rate_is_anchored_at_creation_and_homed_in_its_partition() -> None:
    state = register(job("every 10 seconds"), settings=SETTINGS, now_ms=T0)
    assert state.anchor_at == T0 and state.next_run_at == T0  # the first fire of a rate is its anchor
    assert state.partition == partition_of("j_0123456789abcdef0123", 4)
    assert state.due is not None and state.due.partition == state.partition and state.due.due_at == T0
    assert (state.term, state.version, state.on_time_from) == (0, 1, None)


def test_a_one_off_accepted_late_is_on_time_from_now_and_a_paused_job_is_not_due() -> None:
    late = register(job("at 2026-03-02T09:59:59Z"), settings=SETTINGS, now_ms=T0)
    assert late.next_run_at == T0 - 1500 and late.on_time_from == T0
    paused = register(job("0 2 * * *", paused=True), settings=SETTINGS, now_ms=T0)
    assert paused.next_run_at == to_ms(datetime(2026, 3, 3, 2, 0, tzinfo=UTC)) and paused.due is None
