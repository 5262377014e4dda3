"""The scheduler function's deployed IAM role against the requests one invocation makes on moto: every DynamoDB,
SQS and SNS request (recorded by ``tests.support.grants``) must be allowed by the role the stack gives the
scheduler, or it fails in AWS with AccessDenied while passing on moto (which enforces no IAM)."""

from __future__ import annotations

from typing import Any

from jobsched.handlers import scheduler as handler_module
from jobsched.runtime.wiring import Components
from tests.support.grants import granted, record_requests
from tests.support.scheduler import FakeContext


def test_the_scheduler_role_allows_an_invocation_that_runs_fires_and_alerts_skipped_ones(
    harness: Any,
) -> None:
    # Given a job due every 10 s, and one that skips the fires it missed (ten, while no scheduler ran) and
    # alerts its owner of them
    harness.add("every 10 seconds")
    harness.add("every 1 minute", missed="skip", misfire_grace_s=5, alerts={"on_skipped": True})
    harness.clock.advance(600_000)
    components = Components(
        settings=harness.settings, aws=harness.aws, clock=harness.clock, sleep=harness.clock.sleep
    )
    # When one scheduler invocation runs, as deployed (35 s of its time)
    with record_requests(harness.settings) as requests:
        report = handler_module.handler(
            {"partition": 0}, FakeContext(harness.clock, harness.clock() + 35_000), components=components
        )
    # Then it ran fires and alerted the skipped ones, and every request it made is one its role allows
    assert report["enqueued"] >= 1
    assert ("sns:Publish", "ALERTS_TOPIC_ARN", None) in requests.needed
    assert requests.needed - granted("scheduler") == set()
