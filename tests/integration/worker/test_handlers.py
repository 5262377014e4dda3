"""The Lambda handlers: SQS batches with partial failure reporting, the sweeper's scheduled event, and the
default wiring from the environment."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jobsched.domain.quota_recount import SETTLE_MS
from jobsched.domain.quotas import job_fire_rate
from jobsched.domain.supervision import RealWaiter
from jobsched.dynamodb.due_index import LAYOUT_KEY
from jobsched.handlers import sweeper as sweeper_handler
from jobsched.handlers import worker as worker_handler
from jobsched.models import RunStatus
from jobsched.ports.quotas import OwnerUsage
from jobsched.ports.targets import TargetCall
from jobsched.runtime.sweeper import SweeperRuntime, recount_quotas
from jobsched.runtime.wiring import Components
from jobsched.runtime.worker import Batches
from jobsched.targets.commands import commands
from tests.support.worker import Kit

from .conftest import T0, Context


def test_a_batch_reports_only_its_failed_records(kit: Kit) -> None:
    worker = kit.worker  # made here, not in the handler's threads
    job = kit.due_job()
    event = {
        "Records": [
            kit.record(job.id, T0, message_id="good"),
            kit.record(job.id, T0, message_id="bad") | {"body": "{}"},
            kit.record(job.id, T0, message_id="duplicate"),
        ]
    }
    response = worker_handler.handler(event, Context(), batches=Batches(lambda: worker))
    # the malformed record fails (SQS redelivers it, then redrive moves it to the DLQ); the others are acked
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad"}]}
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.worker == "req-123"


@pytest.mark.parametrize(
    "body",
    ["{}", "[]", "1", "null", '"x"', "not json", '{"job_id": "j", "scheduled_for": 1e999}', "[" * 100_000],
)
def test_a_malformed_body_fails_its_record_alone(kit: Kit, body: str) -> None:
    # Given a batch of two runs and a record whose body is no run message (not even a JSON object)
    worker = kit.worker
    jobs = [kit.due_job(), kit.due_job()]
    records = [kit.record(job.id, T0, message_id=job.id) for job in jobs]
    records.insert(1, kit.record(jobs[0].id, T0, message_id="bad") | {"body": body})
    # When the worker function handles it
    response = worker_handler.handler({"Records": records}, Context(), batches=Batches(lambda: worker))
    # Then that record fails alone (the batch's jobs are still read together, and both runs succeed)
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad"}]}
    assert all(kit.runs.get(job.id, T0).status == RunStatus.SUCCEEDED for job in jobs)  # type: ignore[union-attr]


def test_a_job_this_worker_cannot_read_fails_its_run_alone(kit: Kit) -> None:
    # Given a batch of three runs, one of whose jobs has a spec item this code cannot read (e.g. written by a
    # newer version before a rollback)
    worker = kit.worker
    jobs = [kit.due_job(), kit.due_job(), kit.due_job()]
    kit.jobs.table.update_item(
        Key={"pk": f"job#{jobs[1].id}", "sk": "spec"},
        UpdateExpression="SET #doc = :doc",
        ExpressionAttributeNames={"#doc": "doc"},
        ExpressionAttributeValues={":doc": "{"},
    )
    records = [kit.record(job.id, T0, message_id=job.id) for job in jobs]
    # When the worker function handles it
    response = worker_handler.handler({"Records": records}, Context(), batches=Batches(lambda: worker))
    # Then only that run's record fails; the other two ran (the batch read failed, so each read its own job)
    assert response == {"batchItemFailures": [{"itemIdentifier": jobs[1].id}]}
    assert kit.runs.get(jobs[0].id, T0).status == RunStatus.SUCCEEDED  # type: ignore[union-attr]
    assert kit.runs.get(jobs[2].id, T0).status == RunStatus.SUCCEEDED  # type: ignore[union-attr]


def test_the_default_wiring_comes_from_the_environment(kit: Kit, environment: None) -> None:
    job = kit.make_job()
    kit.make_run(job, T0)
    response = worker_handler.handler({"Records": [kit.record(job.id, T0)]}, Context())
    assert response == {"batchItemFailures": []}
    assert worker_handler.default_batches().worker() is worker_handler.default_batches().worker()
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED
    report = sweeper_handler.handler({"source": "aws.events"}, Context(function_name="jobsched-sweeper"))
    assert report["examined"] == 0 and report["errors"] == []
    # and the due index's move to timer items waits for a scheduler of this code to lead every partition
    assert report["due_index_migration"] == {"moved": 0, "done": False, "waiting": True}
    control = sweeper_handler.default_runtime().components.control()
    for partition in range(kit.settings.scheduler_partitions):
        assert control.save_positions(partition, '{"floor": null, "cursors": {}}', term=1)
    report = sweeper_handler.handler({"source": "aws.events"}, Context(function_name="jobsched-sweeper"))
    assert report["due_index_migration"] == {"moved": 0, "done": False}  # its first pass: nothing to move
    # once a pass finds the move done, this execution environment makes no further pass
    components = sweeper_handler.default_runtime().components
    components.aws.table(kit.settings.jobs_table).put_item(Item={**LAYOUT_KEY, "timers_only": True})
    report = sweeper_handler.handler({"source": "aws.events"}, Context(function_name="jobsched-sweeper"))
    assert report["due_index_migration"] == {"moved": 0, "done": True}
    report = sweeper_handler.handler({"source": "aws.events"}, Context(function_name="jobsched-sweeper"))
    assert "due_index_migration" not in report and report["errors"] == []


def test_the_sweeper_handler_returns_its_report(kit: Kit) -> None:
    runtime = SweeperRuntime(Components(kit.settings, kit.aws, clock=kit.clock, sleep=kit.clock.sleep))
    kit.due_job()
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    report = sweeper_handler.handler(
        {"source": "aws.events"}, Context(function_name="jobsched-sweeper"), runtime=runtime
    )
    assert report["requeued"] == 1 and report["examined"] == 1


def test_the_sweeper_counts_the_jobs_written_without_quota_usage_until_none_is_left(kit: Kit) -> None:
    # Given jobs written as a version without quotas wrote them (no usage, no count on the job)
    made = [kit.make_job(schedule="every 1 minute") for _ in range(3)]
    runtime = SweeperRuntime(Components(kit.settings, kit.aws, clock=kit.clock, sleep=kit.clock.sleep))
    # When the sweeper runs
    report = runtime.serve(Context(function_name="jobsched-sweeper"))
    # Then each is counted in its owner's usage, once
    assert report["quota_recount"] == {"counted": 3, "changed": 0, "done": False}
    assert kit.jobs.usage("team-a") == OwnerUsage(3, 3 * job_fire_rate("every 1 minute", "UTC"))
    assert all(kit.jobs.get(job.id).job.quota_rate is not None for job in made)
    # and once the deploy has settled, a clean round marks the recount done: no further pass is made
    kit.clock.advance(SETTLE_MS)
    report = runtime.serve(Context(function_name="jobsched-sweeper"))
    assert report["quota_recount"] == {"counted": 0, "changed": 0, "done": True}
    assert "quota_recount" not in runtime.serve(Context(function_name="jobsched-sweeper"))
    assert recount_quotas(runtime.components)["counted"] == 0  # type: ignore[index]


def test_local_modes_sweeper_without_upkeep_still_counts_the_jobs_written_without_quota_usage(
    kit: Kit,
) -> None:
    # Given a job written without usage on local mode's moto backend (a data dir of a version without quotas)
    made = kit.make_job(schedule="every 1 minute")
    runtime = SweeperRuntime(
        Components(kit.settings, kit.aws, clock=kit.clock, sleep=kit.clock.sleep), upkeep=False
    )
    # When local mode's sweeper runs (the sweep only: no DynamoDB upkeep passes)
    report = runtime.serve(Context(function_name="jobsched-sweeper-local"))
    # Then the job is counted once all the same, and the recount is done at once (no API of another version)
    assert report["quota_recount"] == {"counted": 1, "changed": 0, "done": True}
    assert "partitions_without_leader" not in report
    assert kit.jobs.usage("team-a") == OwnerUsage(1, job_fire_rate("every 1 minute", "UTC"))
    assert kit.jobs.get(made.id).job.quota_rate == job_fire_rate("every 1 minute", "UTC")


def test_the_quota_recount_leaves_out_a_job_spec_this_code_cannot_read(kit: Kit) -> None:
    # Given two jobs without quota usage, one with a spec item this code cannot read (a newer version's)
    readable, unreadable = kit.make_job(), kit.make_job()
    kit.jobs.table.update_item(
        Key={"pk": f"job#{unreadable.id}", "sk": "spec"},
        UpdateExpression="SET #doc = :doc",
        ExpressionAttributeNames={"#doc": "doc"},
        ExpressionAttributeValues={":doc": "{"},
    )
    # Then the recount counts the other and finishes: the unreadable one stays uncounted
    components = Components(kit.settings, kit.aws, clock=kit.clock)
    assert recount_quotas(components) == {"counted": 1, "changed": 0, "done": False}
    kit.clock.advance(SETTLE_MS)
    assert recount_quotas(components) == {"counted": 0, "changed": 0, "done": True}
    assert kit.jobs.get(readable.id).job.quota_rate is not None
    assert kit.jobs.usage("team-a") == OwnerUsage(1, job_fire_rate(readable.schedule, readable.timezone))


def test_a_failed_or_crowded_out_quota_recount_pass_is_left_to_the_next_invocation(kit: Kit) -> None:
    missing = kit.settings.model_copy(update={"jobs_table": "no-such-table"})
    assert recount_quotas(Components(missing, kit.aws, clock=kit.clock)) is None  # logged, not raised
    kit.make_job()
    components = Components(kit.settings, kit.aws, clock=kit.clock)
    assert recount_quotas(components, seconds=0.5) is None  # too little of the invocation left
    assert kit.jobs.usage("team-a") == OwnerUsage(0, 0)
    assert recount_quotas(components) == {"counted": 1, "changed": 0, "done": False}


@pytest.fixture
def rendezvous() -> Iterator[list[tuple[str, str]]]:
    """Command ``rendezvous``: waits until 3 tries are inside it at once (30 s at most, then it fails).
    Returns the ``("start"|"end", run_id)`` events in order."""
    barrier = threading.Barrier(3, timeout=30)
    events: list[tuple[str, str]] = []
    lock = threading.Lock()

    @commands.register("rendezvous", replace=True)
    def meet(call: TargetCall) -> str:
        with lock:
            events.append(("start", call.run_id))
        barrier.wait()  # BrokenBarrierError (a failed try) unless the other two are running too
        with lock:
            events.append(("end", call.run_id))
        return "met"

    yield events
    barrier.abort()
    commands.unregister("rendezvous")


def test_the_records_of_a_batch_run_concurrently(
    kit: Kit, rendezvous: list[tuple[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given three runs due now in one batch, whose targets each finish only once all three have started
    worker = kit.build_worker(waiter=RealWaiter())  # beats are 30 s away
    jobs = [kit.make_job(command="rendezvous") for _ in range(3)]
    for job in jobs:
        kit.make_run(job)
    event = {"Records": [kit.record(job.id, T0, message_id=f"m-{i}") for i, job in enumerate(jobs)]}
    # When the worker handles the batch
    response = worker_handler.handler(event, Context(), batches=Batches(lambda: worker))
    # Then every run started before any finished (run 3 did not wait for the targets of runs 1 and 2)
    assert response == {"batchItemFailures": []}
    assert [kind for kind, _ in rendezvous] == ["start"] * 3 + ["end"] * 3
    for job in jobs:
        row = kit.runs.get(job.id, T0)
        assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 1
    # and the metrics the three threads added at once were all kept (one EMF document at the end)
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert len(emf) == 1
    assert emf[0]["RunsSucceeded"] == [1.0, 1.0, 1.0] and len(emf[0]["RunLatenessMs"]) == 3


def test_a_record_without_time_left_for_its_timeout_is_not_claimed_and_comes_back(
    kit: Kit, visibility_calls: list[dict[str, Any]]
) -> None:
    worker = kit.worker  # made here, not in the handler's threads
    # Given an invocation with 100 s left, a run whose job may take 300 s and one whose job takes 60 s
    long_job = kit.make_job(timeout_s=300)
    short_job = kit.make_job(timeout_s=60)  # 60 s + the claim margin fits in 100 s
    kit.make_run(long_job)
    kit.make_run(short_job)
    long_record, short_record = kit.delivered(long_job, T0), kit.delivered(short_job, T0)
    # When the batch is handled
    response = worker_handler.handler(
        {"Records": [long_record, short_record]},
        Context(remaining_ms=100_000),
        batches=Batches(lambda: worker),
    )
    # Then the long run is not claimed: reported failed, its message visible again at once
    assert response == {"batchItemFailures": [{"itemIdentifier": long_record["messageId"]}]}
    row = kit.runs.get(long_job.id, T0)
    assert row is not None and row.status == RunStatus.QUEUED
    assert row.attempt == 0 and row.worker is None and row.started_at is None
    assert visibility_calls == [
        {
            "QueueUrl": kit.settings.run_queue_url,
            "ReceiptHandle": long_record["receiptHandle"],
            "VisibilityTimeout": 0,
        }
    ]
    again = kit.aws.sqs.receive_message(QueueUrl=kit.settings.run_queue_url, WaitTimeSeconds=0)["Messages"]
    assert [m["MessageId"] for m in again] == [long_record["messageId"]]
    # and the short one ran
    short_row = kit.runs.get(short_job.id, T0)
    assert short_row is not None and short_row.status == RunStatus.SUCCEEDED


def test_a_deferred_record_whose_visibility_change_fails_is_still_reported(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = kit.worker  # made here, not in the handler's threads

    class BrokenVisibility:
        def change_visibility(self, receipt_handle: str, seconds: int) -> None:
            raise ConnectionError("SQS unreachable")

    monkeypatch.setattr(worker, "visibility", BrokenVisibility())
    job = kit.due_job(timeout_s=600)
    event = {"Records": [kit.record(job.id, T0, receipt_handle="rh-1")]}
    # the whole batch failed: reported, not raised (no function error for a batch handed back)
    assert worker_handler.handler(event, Context(remaining_ms=600_000), batches=Batches(lambda: worker)) == {
        "batchItemFailures": [{"itemIdentifier": "m-1"}]
    }
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.QUEUED


def test_a_batchs_messages_are_held_for_the_heartbeats_stale_time_before_the_claims(kit: Kit) -> None:
    worker = kit.worker  # made here, not in the handler's threads
    # Given two scheduled runs received from the run queue (no rows: their messages are their records)
    jobs = [kit.make_job(), kit.make_job()]
    records = [kit.delivered(job, T0) for job in jobs]
    held: list[dict[str, Any]] = []
    kit.aws.sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibilityBatch",
        lambda params, **_: held.append(dict(params)),
    )
    # When the batch is handled
    response = worker_handler.handler({"Records": records}, Context(), batches=Batches(lambda: worker))
    # Then one request held both messages for the heartbeat's stale time plus one beat (a lost worker's message
    # comes back when its run can be taken over), and both runs ran, their rows made by the claims
    assert response == {"batchItemFailures": []}
    assert [
        [(e["ReceiptHandle"], e["VisibilityTimeout"]) for e in request["Entries"]] for request in held
    ] == [
        [
            (r["receiptHandle"], kit.settings.heartbeat_stale_s + kit.settings.heartbeat_interval_s)
            for r in records
        ]
    ]
    for job in jobs:
        row = kit.runs.get(job.id, T0)
        assert row is not None and row.status == RunStatus.SUCCEEDED and row.sweep_at is None


def test_a_sweeper_invocation_with_little_time_left_leaves_the_long_passes_to_the_next(
    kit: Kit, environment: None
) -> None:
    # Given a sweeper invocation that starts with 9 s left (a slow sweep before it, say)
    report = sweeper_handler.handler(
        {"source": "aws.events"}, Context(function_name="jobsched-sweeper", remaining_ms=9_000)
    )
    # Then the leaders are still counted, and neither the anti-entropy pass nor the migration's starts
    assert report["partitions_without_leader"] == [0]
    assert report["refile_stuck"] is None
    assert report["due_index_migration"]["skipped"] == "too little of the invocation left"
