"""The Lambda handlers: SQS batches with partial failure reporting, the sweeper's scheduled event, and the
default wiring from the environment."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jobsched.aws import Aws
from jobsched.clock import FakeClock
from jobsched.handlers import sweeper as sweeper_handler
from jobsched.handlers import worker as worker_handler
from jobsched.handlers.sweeper import build_sweeper
from jobsched.models import Job, RunStatus
from jobsched.settings import Settings, get_settings
from jobsched.store.runs import RunStore
from jobsched.worker import Worker

from .conftest import T0


@dataclass
class Context:
    """The Lambda context fields Powertools reads."""

    aws_request_id: str = "req-123"
    function_name: str = "jobsched-worker"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-worker"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def test_a_batch_reports_only_its_failed_records(
    worker: Worker,
    make_job: Callable[..., Job],
    make_run: Callable[..., dict[str, Any]],
    runs: RunStore,
    record: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_handler, "worker_factory", lambda: worker)
    job = make_job()
    make_run(job)
    event = {
        "Records": [
            record(job.id, T0, message_id="good"),
            record(job.id, T0, message_id="bad") | {"body": "{}"},
            record(job.id, T0, message_id="duplicate"),
        ]
    }
    response = worker_handler.handler(event, Context())
    # the malformed record fails (SQS redelivers it, then redrive moves it to the DLQ); the others are acked
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad"}]}
    row = runs.get(job.id, T0)
    assert row is not None and row["status"] == RunStatus.SUCCEEDED and row["worker"] == "req-123"


@pytest.fixture
def environment(resource_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in resource_env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    worker_handler._local.__dict__.clear()
    sweeper_handler.default_sweeper.cache_clear()
    yield
    get_settings.cache_clear()
    worker_handler._local.__dict__.clear()
    sweeper_handler.default_sweeper.cache_clear()


def test_the_default_wiring_comes_from_the_environment(
    environment: None,
    make_job: Callable[..., Job],
    make_run: Callable[..., dict[str, Any]],
    runs: RunStore,
    record: Callable[..., dict[str, Any]],
) -> None:
    job = make_job()
    make_run(job, T0)
    response = worker_handler.handler({"Records": [record(job.id, T0)]}, Context())
    assert response == {"batchItemFailures": []}
    assert worker_handler.default_worker() is worker_handler.default_worker()
    row = runs.get(job.id, T0)
    assert row is not None and row["status"] == RunStatus.SUCCEEDED
    report = sweeper_handler.handler({"source": "aws.events"}, Context(function_name="jobsched-sweeper"))
    assert report["examined"] == 0 and report["errors"] == []


def test_the_sweeper_handler_returns_its_report(
    settings: Settings,
    aws: Aws,
    clock: FakeClock,
    make_job: Callable[..., Job],
    make_run: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweeper_handler, "sweeper_factory", lambda: build_sweeper(settings, aws, clock=clock))
    job = make_job()
    make_run(job)
    clock.advance(settings.sweep_queued_after_s * 1000)
    report = sweeper_handler.handler({"source": "aws.events"}, Context(function_name="jobsched-sweeper"))
    assert report["requeued"] == 1 and report["examined"] == 1
