"""Changing ``scheduler_partitions`` on a live deployment, both ways: no job stranded, no fire run twice.

Lowering it would strand the jobs of the removed partitions if nothing polled them; raising it only spreads new
jobs. The leaders of the remaining partitions adopt the removed ones (``adopted_partitions``, from the
high-water mark in the CONTROL table), and every move re-homes a job in its partition under the current count.
On the fakes, with the scheduler groups the composition root builds (``tests.support.backends.MemoryComponents``);
the stores' high-water mark and due-partition reads are held to the DynamoDB adapters' contract
(``tests/contract``).
"""

from __future__ import annotations

from typing import Any

from jobsched.domain.loop import SchedulerGroup, adopted_partitions
from jobsched.domain.registration import partition_of
from tests.support.backends import MemoryComponents
from tests.support.scheduler import stop_groups

PERIOD_MS = 10_000


def groups(harness: Any, partitions: int, holder: str) -> list[SchedulerGroup]:
    settings = harness.settings.model_copy(update={"scheduler_partitions": partitions})
    components = MemoryComponents.on(harness, settings)
    return [components.scheduler_group(p, holder=f"{holder}-{p}") for p in range(partitions)]


def assert_every_fire_ran_once(harness: Any, job_ids: list[str], until_ms: int) -> None:
    """Each job's runs are exactly its fires from T0 to ``until_ms``: none missing (a unique key rules out
    duplicates; a gap would be a stranded job). The messages sent so far are claimed first, as workers would:
    a scheduled run's row is made by its claim."""
    harness.claim_sent()
    for job_id in job_ids:
        fires = [r["scheduled_for"] for r in harness.runs_of(job_id)]
        expected = list(range(harness.T0, until_ms + 1, PERIOD_MS))
        assert fires == expected, (job_id, partition_of(job_id, 4))


def test_adopted_partitions() -> None:
    assert adopted_partitions(0, 1, 4) == [1, 2, 3]
    assert adopted_partitions(1, 2, 5) == [3]
    assert adopted_partitions(0, 4, 4) == []
    assert adopted_partitions(0, 4, 2) == []


def test_lowering_then_raising_the_partition_count_keeps_every_job_firing_exactly_once(harness: Any) -> None:
    # Given 24 jobs every 10 s spread over 4 partitions, served by 4 leaders for a minute
    harness.settings = harness.settings.model_copy(update={"scheduler_partitions": 4})
    harness.clock.now_ms = harness.T0
    job_ids = [harness.add(f"every {PERIOD_MS // 1000} seconds").id for _ in range(24)]
    assert {partition_of(j, 4) for j in job_ids} == {0, 1, 2, 3}
    four = groups(harness, 4, "v1")
    harness.run_groups(four, 60)

    # When the count is lowered to 2 and, during the deploy, the old leaders keep running for 15 s
    two = groups(harness, 2, "v2")
    assert [len(g.loops) for g in two] == [2, 2]  # partitions 2 and 3 are adopted by 0 and 1
    harness.roll_over(four, two, 75)
    # Then every job kept firing, and each moved home to its partition out of 2
    assert_every_fire_ran_once(harness, job_ids, harness.clock())
    for job_id in job_ids:
        assert harness.sched(job_id)["partition"] == partition_of(job_id, 2)

    # When the count is raised to 3 (the old leaders overlapping again)
    three = groups(harness, 3, "v3")
    harness.roll_over(two, three, 60)
    stop_groups(three)
    # Then again no fire is lost or doubled, and the jobs live in their partitions out of 3
    assert_every_fire_ran_once(harness, job_ids, harness.clock())
    for job_id in job_ids:
        sched = harness.sched(job_id)
        assert sched["partition"] == partition_of(job_id, 3)
        assert sched["timer_pk"].startswith(f"due#p{sched['partition']}#")


def test_lowering_the_count_in_the_deploy_that_brings_the_mark_strands_no_job(harness: Any) -> None:
    # A deployment from before the high-water mark ran 4 partitions and never wrote the mark; it deploys this
    # version with 2: the first scheduler finds the mark missing and bootstraps it from the due index.
    harness.settings = harness.settings.model_copy(update={"scheduler_partitions": 4})
    harness.clock.now_ms = harness.T0
    job_ids: list[str] = []
    # job ids are random: add until partition 3 (the highest, which the bootstrap must find) holds a job
    while len(job_ids) < 12 or 3 not in {partition_of(j, 4) for j in job_ids}:
        assert len(job_ids) < 64, "64 random job ids missed partition 3"
        job_ids.append(harness.add(f"every {PERIOD_MS // 1000} seconds").id)
    two = groups(harness, 2, "v2")
    assert [len(g.loops) for g in two] == [2, 2]
    harness.run_groups(two, 60)
    stop_groups(two)
    assert_every_fire_ran_once(harness, job_ids, harness.clock())


def test_jobs_created_by_an_api_on_a_higher_count_are_served_by_schedulers_on_a_lower_one(
    harness: Any,
) -> None:
    # Raising 2 -> 4: the API runs the new count before any scheduler does (or the update rolls back to 2).
    # The API records the count in the mark before homing its first job, so the schedulers on 2 adopt 2 and 3.
    from jobsched.api.schemas import JobCreate

    two = groups(harness, 2, "v2")
    harness.clock.now_ms = harness.T0
    api = harness.api(scheduler_partitions=4)
    job_ids: list[str] = []
    # the API's job ids are random: create until partitions 2 and 3 (the ones count 2 lacks) both hold jobs
    while len(job_ids) < 12 or not {partition_of(j, 4) for j in job_ids} >= {2, 3}:
        assert len(job_ids) < 64, "64 random job ids missed a partition"
        body = {"name": f"j{len(job_ids)}", "schedule": "every 10 seconds", "command": "echo"}
        job_ids.append(api.create_job("team-a", JobCreate.model_validate(body)).job.id)
    stop_groups(two)
    two = groups(harness, 2, "v2-next-minute")  # the schedulers' next invocations read the raised mark
    harness.run_groups(two, 60)
    stop_groups(two)
    assert_every_fire_ran_once(harness, job_ids, harness.clock())
