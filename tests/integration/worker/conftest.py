"""Fixtures of the worker/sweeper integration tests: jobs and runs written straight through the stores
(no scheduler or API needed), a fake clock, a simulated-time waiter, and SQS event records."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.aws import Aws
from jobsched.clock import FakeClock
from jobsched.handlers.worker import build_worker
from jobsched.models import Job, JobCreate, to_ms
from jobsched.settings import Settings
from jobsched.store.jobs import JobStore
from jobsched.store.layout import new_run_item, sched_item, spec_item
from jobsched.store.runs import RunStore
from jobsched.targets import TargetCall, commands
from jobsched.worker import Worker

T0 = to_ms(datetime(2026, 1, 5, 2, 0, tzinfo=UTC))
"""The scheduled_for of most test runs (epoch ms)."""


class SimWaiter:
    """A ``Waiter`` in simulated time: each wait gives the try a brief real chance to finish, then moves
    the monotonic time and the fake clock by the full wait. Heartbeats and timeouts happen without sleeping."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.wait(0.05):
            return True
        self.now += seconds
        self.clock.advance(int(seconds * 1000))
        return False


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + 1_500)


@pytest.fixture
def waiter(clock: FakeClock) -> SimWaiter:
    return SimWaiter(clock)


@pytest.fixture
def worker(settings: Settings, aws: Aws, clock: FakeClock, waiter: SimWaiter) -> Worker:
    """The worker as the Lambda handler builds it, on moto, in simulated time."""
    return build_worker(settings, aws, clock=clock, waiter=waiter)


@pytest.fixture
def jobs(aws: Aws, settings: Settings) -> JobStore:
    return JobStore(aws.table(settings.jobs_table))


@pytest.fixture
def runs(aws: Aws, settings: Settings) -> RunStore:
    return RunStore(aws.table(settings.runs_table))


@pytest.fixture
def make_job(jobs: JobStore, clock: FakeClock) -> Callable[..., Job]:
    """``make_job(name=..., owner=..., **JobCreate fields)``: a job saved as the API would (spec + sched)."""
    counter = iter(range(10_000))

    def make(owner: str = "team-a", name: str | None = None, **fields: Any) -> Job:
        fields.setdefault("schedule", "0 2 * * *")
        if "target" not in fields:
            fields.setdefault("command", "echo")
        create = JobCreate.model_validate({"name": name or f"job-{next(counter)}", **fields})
        now = datetime.fromtimestamp(clock() / 1000, tz=UTC)
        job = Job.model_validate(
            {
                **create.model_dump(),
                "id": f"j_{next(counter):020x}",
                "owner": owner,
                "created_at": now,
                "updated_at": now,
            }
        )
        sched = sched_item(
            job,
            anchor_at_ms=clock(),
            next_run_at_ms=T0 + 86_400_000,
            partition=0,
            shards=1,
            bucket_ms=60_000,
            now_ms=clock(),
        )
        jobs.create(spec_item(job), sched)
        return job

    return make


@pytest.fixture
def make_run(runs: RunStore, settings: Settings, clock: FakeClock) -> Callable[..., dict[str, Any]]:
    """``make_run(job, scheduled_for_ms=T0)``: the run row the scheduler saves before it enqueues."""

    def make(job: Job, scheduled_for_ms: int = T0, **kwargs: Any) -> dict[str, Any]:
        item = new_run_item(
            job.id,
            scheduled_for_ms,
            now_ms=clock(),
            retention_days=settings.retention_days,
            sweep_after_ms=settings.sweep_queued_after_s * 1000,
            owner=job.owner,
            **kwargs,
        )
        assert runs.put_new(item) is None
        return item

    return make


def sqs_record(
    job_id: str,
    scheduled_for_ms: int,
    *,
    message_id: str = "m-1",
    receive_count: int = 1,
    receipt_handle: str = "",
) -> dict[str, Any]:
    """An SQS event record as Lambda's event source mapping delivers it."""
    return {
        "messageId": message_id,
        "receiptHandle": receipt_handle,
        "body": json.dumps({"job_id": job_id, "scheduled_for": scheduled_for_ms}),
        "attributes": {"ApproximateReceiveCount": str(receive_count), "SentTimestamp": "0"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:test-RunQueue",
        "awsRegion": "us-east-1",
    }


@pytest.fixture
def record() -> Callable[..., dict[str, Any]]:
    return sqs_record


@pytest.fixture
def calls() -> Iterator[list[TargetCall]]:
    """Registers the command ``record`` (returns its input, remembering every call) for one test."""
    seen: list[TargetCall] = []

    @commands.register("record", replace=True)
    def record_command(call: TargetCall) -> Any:
        seen.append(call)
        return call.input

    yield seen
    commands.unregister("record")
