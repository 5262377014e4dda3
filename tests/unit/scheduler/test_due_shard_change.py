"""Changing ``due_shards`` on a live deployment, both ways: no job silenced, no fire run twice.

Writers file a job's due entry in one of ``due_shards`` shards; a tick reads as many shards as any deployment
filed entries in (the due shards' high-water mark in the CONTROL table, ``raise_shard_high_water``), so an entry
filed under a higher count is still read after the count is lowered, and each job moves into the new shards at
its next fire. On the fakes, with the scheduler groups the composition root builds
(``tests.support.backends.MemoryComponents``); the stores' mark is held to the DynamoDB adapter's contract
(``tests/contract``).
"""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain.loop import SchedulerGroup
from jobsched.domain.registration import shard_of
from tests.support.backends import MemoryComponents
from tests.support.scheduler import stop_groups

PERIOD_MS = 10_000


def groups(harness: Any, shards: int, holder: str) -> list[SchedulerGroup]:
    settings = harness.settings.model_copy(update={"due_shards": shards})
    components = MemoryComponents.on(harness, settings)
    return [components.scheduler_group(0, holder=f"{holder}-0")]


def assert_every_fire_ran_once(harness: Any, job_ids: list[str], until_ms: int) -> None:
    """Each job's runs are exactly its fires from T0 to ``until_ms`` (the sent messages claimed first, as workers
    would): none missing (a silenced job leaves a gap), none twice (the run key is unique)."""
    harness.claim_sent()
    for job_id in job_ids:
        fires = [r["scheduled_for"] for r in harness.runs_of(job_id)]
        assert fires == list(range(harness.T0, until_ms + 1, PERIOD_MS)), job_id


def shard(harness: Any, job_id: str) -> int:
    """The due shard job ``job_id``'s current entry is filed in."""
    due = harness.jobs.scheduling_states([job_id])[job_id].due
    assert due is not None, job_id
    return int(due.shard)


def add_jobs(harness: Any, shards: int) -> list[str]:
    """Eight or more every-10-second jobs filed under ``shards`` due shards, at least one in the highest."""
    harness.settings = harness.settings.model_copy(update={"due_shards": shards})
    harness.clock.now_ms = harness.T0
    job_ids: list[str] = []
    while len(job_ids) < 8 or shards - 1 not in {shard(harness, j) for j in job_ids}:
        assert len(job_ids) < 64, "64 random job ids missed the highest shard"
        job_ids.append(harness.add(f"every {PERIOD_MS // 1000} seconds").id)
    return job_ids


def test_lowering_then_raising_due_shards_keeps_every_job_firing_exactly_once(harness: Any) -> None:
    # Given every-10-second jobs filed over 4 due shards, served for a minute
    job_ids = add_jobs(harness, 4)
    four = groups(harness, 4, "v1")
    harness.run_groups(four, 60)

    # When due_shards is lowered to 1 and, during the deploy, the old leader keeps running for 15 s
    one = groups(harness, 1, "v2")
    assert [loop.scheduler.read_shards for g in one for loop in g.loops] == [4]  # the mark: 4 shards read
    harness.roll_over(four, one, 75)
    # Then every job kept firing, and each moved into shard 0 at its next fire
    assert_every_fire_ran_once(harness, job_ids, harness.clock())
    assert {shard(harness, j) for j in job_ids} == {0}

    # When it is raised to 3 (the old leader overlapping again)
    three = groups(harness, 3, "v3")
    harness.roll_over(one, three, 60)
    stop_groups(three)
    # Then again no fire is lost or doubled, and the jobs are spread over 3 shards
    assert_every_fire_ran_once(harness, job_ids, harness.clock())
    for job_id in job_ids:
        assert shard(harness, job_id) == shard_of(job_id, 3)


def test_lowering_due_shards_in_the_deploy_that_brings_the_mark_silences_no_job(harness: Any) -> None:
    # A deployment from before the mark filed entries over 4 shards and never wrote the mark; it deploys this
    # version with 1: the first scheduler finds the mark missing and bootstraps it from the due index
    job_ids = add_jobs(harness, 4)
    one = groups(harness, 1, "v2")
    assert [loop.scheduler.read_shards for g in one for loop in g.loops] == [4]
    harness.run_groups(one, 60)
    stop_groups(one)
    assert_every_fire_ran_once(harness, job_ids, harness.clock())


def test_jobs_filed_by_an_api_on_more_shards_are_read_by_schedulers_on_fewer(harness: Any) -> None:
    # The API runs due_shards=4 before the schedulers (on 1) do, or the update rolls back: the API records the
    # count in the mark before filing its first job, and the schedulers' next invocations read 4 shards
    from jobsched.api.schemas import JobCreate

    one = groups(harness, 1, "v1")
    harness.clock.now_ms = harness.T0
    api = harness.api(due_shards=4)
    job_ids: list[str] = []
    while len(job_ids) < 8 or 3 not in {shard(harness, j) for j in job_ids}:
        assert len(job_ids) < 64, "64 random job ids missed shard 3"
        body = {"name": f"j{len(job_ids)}", "schedule": "every 10 seconds", "command": "echo"}
        job_ids.append(api.create_job("team-a", JobCreate.model_validate(body)).job.id)
    stop_groups(one)
    one = groups(harness, 1, "v1-next-minute")
    harness.run_groups(one, 60)
    stop_groups(one)
    assert_every_fire_ran_once(harness, job_ids, harness.clock())


def test_jobs_resumed_by_an_api_on_more_shards_are_read_by_schedulers_on_fewer(harness: Any) -> None:
    # The API runs due_shards=4 before the schedulers (on 1) do, or the update rolls back, and only pauses and
    # resumes jobs (no create): a resume files the job's entry under the API's count, so the API records the count
    # in the mark first, and the schedulers' next invocations read 4 shards
    from jobsched.api.schemas import JobCreate

    harness.settings = harness.settings.model_copy(update={"due_shards": 1})
    harness.clock.now_ms = harness.T0
    api_one = harness.api()
    api_four = harness.api(due_shards=4)
    job_ids: list[str] = []
    while len(job_ids) < 8 or 3 not in {shard_of(j, 4) for j in job_ids}:
        assert len(job_ids) < 64, "64 random job ids missed shard 3"
        body = {"name": f"j{len(job_ids)}", "schedule": "every 10 seconds", "command": "echo"}
        job_ids.append(api_one.create_job("team-a", JobCreate.model_validate(body)).job.id)
    one = groups(harness, 1, "v1")
    harness.run_groups(one, 30)  # the fires T0 .. T0 + 30 s
    for job_id in job_ids:
        api_four.pause_job("team-a", job_id)
    harness.run_groups(one, 15)  # T0 + 40 s falls while paused: not run
    for job_id in job_ids:
        api_four.resume_job("team-a", job_id)
    assert 3 in {shard(harness, j) for j in job_ids}
    stop_groups(one)
    one = groups(harness, 1, "v1-next-minute")
    harness.run_groups(one, 60)
    stop_groups(one)
    harness.claim_sent()
    for job_id in job_ids:
        fires = [r["scheduled_for"] for r in harness.runs_of(job_id)]
        expected = [*range(harness.T0, harness.T0 + 30_001, PERIOD_MS)]
        expected += range(harness.T0 + 50_000, harness.clock() + 1, PERIOD_MS)
        assert fires == expected, job_id


def test_a_rewrite_whose_mark_cannot_be_raised_changes_nothing_and_marks_on_its_retry(harness: Any) -> None:
    # The mark is raised before the rewrite files the entry: when the CONTROL table fails, the request fails and
    # the job is as it was (still paused, nothing filed under the API's count); the retried request marks and writes
    from jobsched.api.schemas import JobCreate
    from jobsched.ports.errors import StoreUnavailable

    harness.settings = harness.settings.model_copy(update={"due_shards": 1})
    api_one = harness.api()
    body = {"name": "j", "schedule": "every 10 seconds", "command": "echo", "paused": True}
    job_id = api_one.create_job("team-a", JobCreate.model_validate(body)).job.id
    api_four = harness.api(due_shards=4)

    harness.control.fail_next.append(StoreUnavailable("control table throttled"))
    with pytest.raises(StoreUnavailable):
        api_four.resume_job("team-a", job_id)
    assert api_four.get_job("team-a", job_id).paused
    assert harness.control.shard_high_water == 1

    assert not api_four.resume_job("team-a", job_id).paused
    assert harness.control.shard_high_water == 4
    assert shard(harness, job_id) == shard_of(job_id, 4)
