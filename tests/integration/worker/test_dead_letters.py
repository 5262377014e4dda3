"""The run queue's dead-letter queue on moto: SQS's redrive moves a run message there after ``maxReceiveCount``
deliveries, and the sweeper (wired from the settings, as deployed) records its run dead with an alert."""

from __future__ import annotations

import json

from jobsched.models import RunStatus
from jobsched.runtime.wiring import Components
from tests.support.worker import Kit

from .conftest import T0, redrive


def test_a_message_redriven_before_any_claim_is_recorded_dead_by_the_sweeper(kit: Kit) -> None:
    # Given a scheduled run's message received maxReceiveCount times without a claim (e.g. handed back for lack
    # of invocation time each time), so that SQS's redrive policy moved it to the dead-letter queue
    job = kit.make_job()
    url = kit.settings.run_queue_url
    redrive(kit.aws.sqs, url, job.id)
    assert kit.settings.run_dlq_url is not None
    assert kit.runs.get(job.id, T0) is None
    # When the sweeper passes
    report = Components(kit.settings, kit.aws, clock=kit.clock).sweeper().sweep()
    # Then the run is recorded dead (no try), its dead-run envelope is on the dead-run queue, the letter is gone
    row = kit.runs.get(job.id, T0)
    assert report.dead_letters == 1 and report.dead == 1
    assert row is not None and row.status is RunStatus.DEAD and row.attempt == 0 and row.sweep_at is None
    letters = kit.aws.sqs.receive_message(QueueUrl=kit.settings.dead_run_queue_url, WaitTimeSeconds=0)[
        "Messages"
    ]
    assert [json.loads(m["Body"])["run_id"] for m in letters] == [row.run_id]
    assert (
        kit.aws.sqs.receive_message(QueueUrl=kit.settings.run_dlq_url, WaitTimeSeconds=0).get("Messages", [])
        == []
    )
