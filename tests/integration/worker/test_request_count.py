"""AWS requests per run on the worker path, counted with botocore event hooks (the target's own call is
not counted; these runs use ``command`` targets). The numbers are the ones in ``jobsched.runtime.worker``'s
docstring: through the Lambda handler a batch's jobs are read together (success 2 per run + 0.2 per batch of
10); a delivery handled alone reads its own job (success 3, <= 3.5 per run); a duplicate 1."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from jobsched.aws.clients import Aws
from jobsched.aws.queue import delivery_of
from jobsched.clock import FakeClock
from jobsched.domain.chains import MARK_FRESH_MS
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Deferred, Worker
from jobsched.dynamodb.jobs import JobStore
from jobsched.models import Job
from jobsched.ports.targets import TargetCall
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings
from jobsched.targets import commands

from .conftest import T0, Context


@pytest.fixture
def requests(aws: Aws) -> Counter[str]:
    """Every AWS request made from now on by the shared clients, by ``service.Operation``."""
    seen: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        seen[f"{model.service_model.service_name}.{model.name}"] += 1

    for client in (aws.dynamodb_resource.meta.client, aws.sqs, aws.sns):
        client.meta.events.register("before-call", count)
    return seen


def test_the_success_path_of_a_delivery_handled_alone_costs_three_requests_per_run(
    make_job: Callable[..., Job],
    make_run: Callable[..., dict[str, Any]],
    requests: Counter[str],
    deliver: Callable[..., str],
) -> None:
    jobs = [make_job() for _ in range(4)]
    for job in jobs:
        make_run(job)
    requests.clear()
    for job in jobs:
        assert deliver(job) == Outcome.SUCCEEDED
    assert requests == {"dynamodb.UpdateItem": 8, "dynamodb.GetItem": 4}
    assert sum(requests.values()) / len(jobs) == 3 <= 3.5


@pytest.mark.parametrize("edited_recently", [False, True])
def test_overlap_skip_adds_one_lock_and_one_release(
    requests: Counter[str],
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
    clock: FakeClock,
    settings: Settings,
    edited_recently: bool,
) -> None:
    job = due_job(overlap="skip")
    if not edited_recently:  # past the longest a try started before the job's last change can still run
        clock.advance((settings.worker_timeout_cap_s + settings.heartbeat_stale_s) * 1000 + 1)
    requests.clear()
    assert deliver(job) == Outcome.SUCCEEDED
    # the job's overlap lock: taken with one conditional update, given back with one conditional delete; a job
    # changed within that time also has its newest audit events read (one query): a change of its overlap may have
    # left a try running without the lock
    assert requests == {
        "dynamodb.UpdateItem": 3,
        "dynamodb.GetItem": 1,
        "dynamodb.DeleteItem": 1,
        **({"dynamodb.Query": 1} if edited_recently else {}),
    }


def test_overlap_skip_on_a_recently_changed_job_reads_one_page_of_events_whatever_its_history(
    requests: Counter[str],
    due_job: Callable[..., Job],
    make_run: Callable[..., Any],
    deliver: Callable[..., str],
) -> None:
    # Given a job changed just now (created with overlap: skip, so no change of its overlap), with a day of runs
    # every 5 minutes behind it (288 rows, none running: the usual case)
    job = due_job(overlap="skip")
    for n in range(1, 289):
        make_run(job, T0 - n * 300_000)
    requests.clear()
    # When its next run is delivered
    assert deliver(job) == Outcome.SUCCEEDED
    # Then looking for a try running without the lock costs one query (its newest audit events: no change of its
    # overlap), not a read of the job's whole history before the target starts (a Query with a status filter
    # reads pages of 100 items until 11 match: a job run every minute for the 90 days kept reads ~1,300 pages)
    assert requests["dynamodb.Query"] == 1, requests


def test_a_duplicate_delivery_costs_one_request(
    requests: Counter[str],
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    job = due_job()
    deliver(job)
    requests.clear()
    assert deliver(job) == Outcome.DROPPED
    assert requests == {"dynamodb.UpdateItem": 1}


def test_failure_paths_cost_what_the_docstring_says(
    requests: Counter[str],
    clock: FakeClock,
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    job = due_job(command="fail", retry={"max_attempts": 2, "backoff_s": 1})
    requests.clear()
    assert deliver(job) == Outcome.RETRYING
    assert requests == {"dynamodb.UpdateItem": 2, "dynamodb.GetItem": 1, "sqs.SendMessageBatch": 1}
    requests.clear()
    clock.advance(1_000)
    assert deliver(job) == Outcome.DEAD
    assert requests == {
        "dynamodb.UpdateItem": 3,
        "dynamodb.GetItem": 1,
        "sqs.SendMessage": 1,
        "sns.Publish": 1,
    }


def test_the_sweeper_idle_pass_costs_one_query_per_shard_and_one_dead_letter_receive(
    settings: Settings,
    aws: Aws,
    clock: FakeClock,
    requests: Counter[str],
) -> None:
    from jobsched.ports.runs import SWEEP_SHARDS

    Components(settings, aws, clock=clock).sweeper().sweep()
    # (the receive is the drain of the run queue's dead-letter queue: empty, one short poll)
    assert requests == {"dynamodb.Query": SWEEP_SHARDS, "sqs.ReceiveMessage": 1}


def test_time_checks_cost_nothing_on_the_paths_that_run(
    worker: Worker,
    record: Callable[..., dict[str, Any]],
    requests: Counter[str],
    jobs: JobStore,
    due_job: Callable[..., Job],
) -> None:
    # a fresh invocation: the claim does not wait for the spec
    job = due_job(timeout_s=840)
    requests.clear()
    assert worker.handle(delivery_of(record(job.id, T0), Context(remaining_ms=899_000))) == Outcome.SUCCEEDED
    assert requests == {"dynamodb.UpdateItem": 2, "dynamodb.GetItem": 1}
    # little time left, but enough for this job: the spec is read before the claim, not twice
    short = due_job(timeout_s=30)
    requests.clear()
    assert worker.handle(delivery_of(record(short.id, T0), Context(remaining_ms=60_000))) == Outcome.SUCCEEDED
    assert requests == {"dynamodb.UpdateItem": 2, "dynamodb.GetItem": 1}
    # a deleted job is claimed and skipped (no try to make room for)
    gone = due_job(timeout_s=600)
    assert jobs.get_spec(gone.id) is not None
    jobs.delete(jobs.get(gone.id).job, deleted_at_ms=T0, retention_days=None)
    requests.clear()
    assert worker.handle(delivery_of(record(gone.id, T0), Context(remaining_ms=60_000))) == Outcome.SKIPPED
    assert requests == {"dynamodb.UpdateItem": 2, "dynamodb.GetItem": 1}


@pytest.mark.parametrize("in_a_batch", [False, True])
def test_a_record_handed_back_for_lack_of_time_costs_one_request_and_its_job_s_read(
    worker: Worker,
    delivered: Callable[[Job, int], dict[str, Any]],
    requests: Counter[str],
    due_job: Callable[..., Job],
    in_a_batch: bool,
) -> None:
    # handled alone, the time check reads the job (1 GetItem); in a batch, its job was read with the batch's
    job = due_job(timeout_s=600)
    message = delivered(job, T0)
    specs = worker.read_specs([job.id]) if in_a_batch else None
    assert specs is None or specs.asked(job.id)
    requests.clear()
    with pytest.raises(Deferred):
        worker.handle(delivery_of(message, Context(remaining_ms=600_000)), specs)
    assert requests == {"sqs.ChangeMessageVisibility": 1, **({} if in_a_batch else {"dynamodb.GetItem": 1})}


def test_a_batch_through_the_lambda_handler_reads_its_jobs_in_one_request(
    worker: Worker,
    delivered: Callable[[Job, int], dict[str, Any]],
    requests: Counter[str],
    due_job: Callable[..., Job],
    jobs: JobStore,
) -> None:
    # Given a batch of 10 runs received from the run queue, one of whose jobs was deleted since it was enqueued
    batch = [due_job() for _ in range(10)]
    records = [delivered(job, T0) for job in batch]
    jobs.delete(jobs.get(batch[3].id).job, deleted_at_ms=T0, retention_days=None)
    requests.clear()
    # When the worker function handles it
    response = _handle_batch(worker, records)
    # Then the batch's jobs were read with one request, not one per run (2.2 requests per run, from 3.1)
    assert response == {"batchItemFailures": []}
    assert requests == {
        "sqs.ChangeMessageVisibilityBatch": 1,
        "dynamodb.BatchGetItem": 1,
        "dynamodb.UpdateItem": 20,  # claim and result of each, the deleted job's run recorded skipped
    }
    assert worker.runs.get(batch[3].id, T0).status.value == "skipped"  # type: ignore[union-attr]
    assert worker.runs.get(batch[4].id, T0).status.value == "succeeded"  # type: ignore[union-attr]


def test_a_batch_whose_jobs_cannot_be_read_together_reads_each_run_s_own(
    worker: Worker,
    delivered: Callable[[Job, int], dict[str, Any]],
    requests: Counter[str],
    due_job: Callable[..., Job],
    jobs: JobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from botocore.exceptions import ClientError

    # Given a batch of 3 runs, and a BatchGetItem that is throttled (after the SDK's retries)
    records = [delivered(job, T0) for job in (due_job(), due_job(), due_job())]
    client = worker.jobs.table.meta.client  # type: ignore[attr-defined]

    def throttled(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "BatchGetItem")

    monkeypatch.setattr(client, "batch_get_item", throttled)
    requests.clear()
    # When the worker function handles it
    response = _handle_batch(worker, records)
    # Then every run still ran, each reading its own job
    assert response == {"batchItemFailures": []}
    assert requests == {
        "sqs.ChangeMessageVisibilityBatch": 1,
        "dynamodb.GetItem": 3,
        "dynamodb.UpdateItem": 6,
    }


def test_a_delivery_whose_job_the_batch_did_not_read_reads_its_own(
    worker: Worker,
    record: Callable[..., dict[str, Any]],
    requests: Counter[str],
    due_job: Callable[..., Job],
) -> None:
    from jobsched.domain.worker import BatchSpecs

    # a batch read that did not ask for this job (nothing found for it) does not make the job "deleted"
    job = due_job()
    requests.clear()
    outcome = worker.handle(
        delivery_of(record(job.id, T0), Context()), BatchSpecs(frozenset({"j_other"}), {})
    )
    assert outcome == Outcome.SUCCEEDED
    assert requests == {"dynamodb.UpdateItem": 2, "dynamodb.GetItem": 1}


def _handle_batch(worker: Worker, records: list[dict[str, Any]]) -> Any:
    """The worker Lambda handler's response to the SQS event of ``records``, every record on ``worker``."""
    from jobsched.handlers import worker as worker_handler
    from jobsched.runtime.worker import Batches

    return worker_handler.handler({"Records": records}, Context(), batches=Batches(lambda: worker))


def test_a_run_of_a_job_with_a_downstream_job_reads_its_downstream_jobs_and_makes_their_run(
    make_job: Callable[..., Job],
    make_run: Callable[..., dict[str, Any]],
    requests: Counter[str],
    deliver: Callable[..., str],
    worker: Worker,
) -> None:
    # design §2.1: the upstream's spec carries the chain mark, so its run's end queries by_upstream
    upstream = make_job()
    downstream = make_job(after={"job": upstream.id})
    make_run(upstream)
    requests.clear()
    assert deliver(upstream) == Outcome.SUCCEEDED
    assert requests["dynamodb.Query"] == 1, requests  # the by_upstream index
    chained = worker.runs.get(downstream.id, T0)
    assert chained is not None and chained.upstream_run_id == f"{upstream.id}@{T0}"


def test_a_downstream_job_made_while_an_upstream_run_lasts_gets_a_run_from_its_end(
    make_job: Callable[..., Job],
    make_run: Callable[..., dict[str, Any]],
    deliver: Callable[..., str],
    worker: Worker,
    clock: FakeClock,
) -> None:
    # the spec the worker read before the try counted no downstream job; the try outlasts MARK_FRESH_MS, so the
    # run's end reads the downstream jobs as the index has them by then (no chained run missed for the mark)
    upstream = make_job(target={"type": "command", "name": "chainmark-slow"})
    made: list[Job] = []

    @commands.register("chainmark-slow", replace=True)
    def slow(call: TargetCall) -> Any:
        made.append(make_job(after={"job": upstream.id}))
        clock.advance(MARK_FRESH_MS + 1)
        return None

    try:
        make_run(upstream)
        assert deliver(upstream) == Outcome.SUCCEEDED
    finally:
        commands.unregister("chainmark-slow")
    chained = worker.runs.get(made[0].id, T0)
    assert chained is not None and chained.upstream_run_id == f"{upstream.id}@{T0}"
