"""The run queue's dead-letter queue on moto: SQS's redrive moves a run message there after ``maxReceiveCount``
deliveries, and the sweeper (wired from the settings, as deployed) records its run dead with an alert."""

from __future__ import annotations

import json
from collections.abc import Callable

from jobsched.aws import Aws
from jobsched.clock import FakeClock
from jobsched.models import Job, RunStatus
from jobsched.ports.runs import RunMessage
from jobsched.resources import RUN_QUEUE
from jobsched.settings import Settings
from jobsched.store.runs import RunStore
from jobsched.wiring import Components

from .conftest import T0


def test_a_message_redriven_before_any_claim_is_recorded_dead_by_the_sweeper(
    settings: Settings, aws: Aws, clock: FakeClock, runs: RunStore, make_job: Callable[..., Job]
) -> None:
    # Given a scheduled run's message received maxReceiveCount times without a claim (e.g. handed back for lack
    # of invocation time each time), so that SQS's redrive policy moved it to the dead-letter queue
    job = make_job()
    url = settings.run_queue_url
    aws.sqs.send_message(
        QueueUrl=url, MessageBody=RunMessage(job.id, T0, dispatch_at=T0, enqueued_at=T0).body()
    )
    for _ in range(RUN_QUEUE.max_receive_count):
        (message,) = aws.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)["Messages"]
        aws.sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    assert aws.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []
    assert settings.run_dlq_url is not None
    assert runs.get(job.id, T0) is None
    # When the sweeper passes
    report = Components(settings, aws, clock=clock).sweeper().sweep()
    # Then the run is recorded dead (no try), its dead-run envelope is on the dead-run queue, the letter is gone
    row = runs.get(job.id, T0)
    assert report.dead_letters == 1 and report.dead == 1
    assert row is not None and row.status is RunStatus.DEAD and row.attempt == 0 and row.sweep_at is None
    letters = aws.sqs.receive_message(QueueUrl=settings.dead_run_queue_url, WaitTimeSeconds=0)["Messages"]
    assert [json.loads(m["Body"])["run_id"] for m in letters] == [row.run_id]
    assert aws.sqs.receive_message(QueueUrl=settings.run_dlq_url, WaitTimeSeconds=0).get("Messages", []) == []
