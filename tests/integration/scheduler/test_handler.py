"""The scheduler Lambda handler: ticks once a second until shortly before its timeout, then hands over."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.aws.lateness import JsonLateness
from jobsched.dynamodb.control import ControlStore
from jobsched.handlers import scheduler as handler_module
from jobsched.observability import MetricName
from jobsched.ports.lateness import LatenessLabels
from jobsched.runtime.scheduler import STOP_BEFORE_MS
from jobsched.runtime.wiring import Components
from tests.support.scheduler import FakeContext


@pytest.fixture
def invoke(harness: Any) -> Any:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        harness.clock.sleep(seconds)

    components = Components(settings=harness.settings, aws=harness.aws, clock=harness.clock, sleep=sleep)

    def call(event: dict[str, Any], timeout_s: int, request_id: str = "req-1") -> dict[str, int]:
        context = FakeContext(harness.clock, harness.clock() + timeout_s * 1000, aws_request_id=request_id)
        return handler_module.handler(event, context, components=components)

    call.sleeps = sleeps  # type: ignore[attr-defined]
    return call


def test_one_invocation_ticks_each_second_then_releases_the_lease(
    harness: Any, invoke: Any, capsys: Any
) -> None:
    job = harness.add("every 10 seconds")
    harness.clock.now_ms = harness.T0 + 250  # started by EventBridge a little after the minute

    timeout_s = 67 + STOP_BEFORE_MS // 1000  # the deployed timeout: 67 s of ticking, then the stop margin
    report = invoke({"partition": 0}, timeout_s=timeout_s)

    # It ticked once a second on the second boundary until STOP_BEFORE_MS before the timeout
    assert report["partition"] == 0 and report["ticks"] == report["iterations"] == 68
    assert invoke.sleeps[0] == pytest.approx(0.75) and all(s == 1.0 for s in invoke.sleeps[1:])
    assert harness.clock() <= harness.T0 + 250 + timeout_s * 1000 - STOP_BEFORE_MS + 1000
    # It ran the job's fires in that window (each run's row made by a worker's claim of its message), and
    # released the lease for the next invocation
    harness.claim_sent()
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [
        harness.T0 + k * 10_000 for k in range(7)
    ]
    assert report["enqueued"] == 7
    lease = ControlStore(harness.aws.dynamodb, harness.settings.control_table).read_lease(0)
    # (released: it expired the instant before its release, so a standby takes it at its next poll)
    assert lease is not None and lease.expires_at == harness.clock() - 1 and lease.holder.startswith("req-1/")
    # Metrics went out as EMF, one document per tick, and one per labels for each tick that sent a run (its
    # dispatch lateness by priority and owner: a lone job's owner is "other")
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    documents = [d for d in emitted if "priority" not in d]
    assert len(documents) == 68
    names = {m["Name"] for d in documents for m in d["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {MetricName.RUNS_ENQUEUED, MetricName.SCHEDULER_LAG, MetricName.DISPATCH_LATENESS} <= names
    labelled = [d for d in emitted if "priority" in d]
    assert [(d["priority"], d["owner"]) for d in labelled] == [("normal", "other")] * 7
    assert all(MetricName.DISPATCH_LATENESS in d for d in labelled)
    # and the partition's lateness summary was saved once its minute of dispatches was up (GET /health)
    saved = ControlStore(harness.aws.dynamodb, harness.settings.control_table).read_lateness(0)
    assert saved is not None and JsonLateness().decode(saved).groups[0][0] == LatenessLabels(
        "normal", "other"
    )


def test_the_next_invocation_takes_over_at_once_with_a_higher_term(harness: Any, invoke: Any) -> None:
    job = harness.add("every 10 seconds")
    invoke({"partition": 0}, timeout_s=40, request_id="first")
    first = ControlStore(harness.aws.dynamodb, harness.settings.control_table).read_lease(0)
    report = invoke({"partition": 0}, timeout_s=40, request_id="second")
    second = ControlStore(harness.aws.dynamodb, harness.settings.control_table).read_lease(0)
    assert first is not None and second is not None and second.term > first.term
    assert report["ticks"] == report["iterations"]  # led from its first step
    harness.claim_sent()
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert fires == list(range(harness.T0, fires[-1] + 1, 10_000)) and len(fires) >= 5


def test_a_scheduled_event_without_input_is_partition_zero_and_a_bad_one_is_refused(invoke: Any) -> None:
    assert invoke({"source": "aws.events", "detail-type": "Scheduled Event"}, timeout_s=5)["partition"] == 0
    with pytest.raises(ValidationError):
        invoke({"partition": -1}, timeout_s=5)
