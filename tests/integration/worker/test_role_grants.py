"""The worker's and the sweeper's deployed IAM roles against the requests their code makes on moto: every
DynamoDB, SQS and SNS request of a path (recorded by ``tests.support.grants``) must be allowed by the role the
stack gives that function, or the path fails in AWS with AccessDenied while passing on moto (which enforces no
IAM)."""

from __future__ import annotations

import time
from typing import Any

from jobsched.domain.retries import Outcome
from jobsched.handlers import worker as worker_handler
from jobsched.runtime.wiring import Components
from jobsched.runtime.worker import Batches
from tests.support.grants import granted, record_requests
from tests.support.worker import Kit

from .conftest import T0, Context, redrive

PAUSE_AFTER_ONE_DEAD = {"pause_after_consecutive_dead": 1, "after_consecutive_failures": 1}


def test_the_worker_role_allows_a_dead_run_of_a_job_with_an_alert_policy(kit: Kit) -> None:
    # Given a job (just edited) that alerts and pauses itself after one dead run, whose run has one attempt
    job = kit.make_job(command="fail", retry={"max_attempts": 1}, alerts=PAUSE_AFTER_ONE_DEAD)
    kit.make_run(job)
    # When the worker runs it to its death, as deployed
    with record_requests(kit.settings) as requests:
        assert kit.deliver(job) == Outcome.DEAD
    # Then every request it made is one its role allows (the streak read, the audit events, the pause)
    assert kit.jobs.get(job.id).job.paused  # the path did reach the pause (moto enforces no IAM)
    assert requests.needed - granted("worker") == set()


def test_the_sweeper_role_allows_a_dead_letter_of_a_job_with_an_alert_policy(kit: Kit) -> None:
    # Given a run message of a job that pauses itself after one dead run, redriven to the run queue's DLQ
    job = kit.make_job(alerts=PAUSE_AFTER_ONE_DEAD)
    url = kit.settings.run_queue_url
    redrive(kit.aws.sqs, url, job.id)
    # When the sweeper, as deployed, records it dead
    with record_requests(kit.settings) as requests:
        report = Components(kit.settings, kit.aws, clock=kit.clock).sweeper().sweep()
    # Then every request it made is one its role allows
    assert report.dead == 1 and kit.jobs.get(job.id).job.paused
    assert requests.needed - granted("sweeper") == set()


def test_the_worker_role_allows_a_batch_through_the_lambda_handler(kit: Kit) -> None:
    # Given two runs received from the run queue (held, claimed, run, acknowledged by the handler)
    worker = kit.worker  # made here, not in the handler's threads
    records = [kit.delivered(job, T0) for job in (kit.make_job(), kit.make_job())]
    # When the worker function handles the batch, as deployed
    with record_requests(kit.settings) as requests:
        response = worker_handler.handler({"Records": records}, Context(), batches=Batches(lambda: worker))
    # Then every request it made (the batch's visibility hold, the claims, heartbeats, results) is allowed
    assert response == {"batchItemFailures": []}
    assert ("sqs:ChangeMessageVisibility", "RUN_QUEUE_URL", None) in requests.needed
    assert ("dynamodb:BatchGetItem", "JOBS_TABLE", None) in requests.needed  # the batch's jobs, read together
    assert requests.needed - granted("worker") == set()


def test_the_sweeper_role_allows_the_handler_s_whole_pass(kit: Kit, environment: None) -> None:
    from jobsched.handlers import sweeper as sweeper_handler

    # Given the sweeper function as deployed (its environment), on a deployment whose scheduler stored its read
    # positions: the handler sweeps, counts the partitions without a leader and makes a pass of the due index's
    # move to timer items (each reads the control table)
    sweeper_handler.default_runtime().components.control().save_positions(
        0, '{"floor": null, "cursors": {}}', term=1
    )
    # and one job still in the due index's GSI layout (the pass moves it)
    _to_old_layout(kit, kit.make_job(schedule="every 1 minute"))
    # and one job due long ago (T0, before the deployment's clock) in a bucket its partition has drained (the
    # watermark at now): the anti-entropy pass refiles it
    stuck = kit.make_job(schedule="every 1 hour")
    now_bucket = int(time.time() * 1000) // (kit.settings.due_bucket_s * 1000)
    control = sweeper_handler.default_runtime().components.control()
    assert control.advance_watermark(0, now_bucket, term=1, now_ms=int(time.time() * 1000))
    with record_requests(kit.settings) as requests:
        report = sweeper_handler.handler({"source": "aws.events"}, Context(function_name="jobsched-sweeper"))
    # Then each step ran, and every request it made is one its role allows
    assert report["partitions_without_leader"] == [0]
    assert report["due_index_migration"] == {"moved": 1, "done": False}
    assert report["refile_stuck"]["jobs"] == [stuck.id]  # read, confirmed and refiled
    assert ("dynamodb:GetItem", "CONTROL_TABLE", None) in requests.needed
    assert requests.needed - granted("sweeper") == set()


def _to_old_layout(kit: Kit, job: Any) -> None:
    """Store ``job``'s scheduling item in the GSI layout: its due entry on the item (``due``
    GSI), no timer item of its own."""
    from dataclasses import replace

    from jobsched.dynamodb import layout
    from jobsched.ports.jobs import INDEX

    state = kit.jobs.scheduling_states([job.id])[job.id]
    assert state.due is not None
    old = replace(state, due=replace(state.due, lane=INDEX, position=None, version=None))
    item = layout.sched_item(old)
    assert "due_pk" in item and "timer_pk" not in item
    kit.jobs.table.put_item(Item=item)
