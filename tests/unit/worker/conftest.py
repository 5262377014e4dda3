"""Fixtures of the worker's and sweeper's logic tests on the in-memory fakes (``jobsched.memory``): no moto, no
network. The same names as tests/integration/worker's fixtures (``worker``, ``runs``, ``jobs``, ``make_job``,
``make_run``, ``sent``, ``drain``), so a test reads the same on either; simulated time, SQS records and
``kit`` (the common fixtures as one object) are ``tests.support.worker``'s."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import count
from typing import Any

import pytest

from jobsched.aws.metrics import PowertoolsRunMetrics
from jobsched.aws.wire import dead_run_envelope, run_message_body
from jobsched.clock import FakeClock
from jobsched.domain.chains import Chains
from jobsched.domain.retries import Failures
from jobsched.domain.supervision import Waiter
from jobsched.domain.sweeper import Sweeper
from jobsched.domain.worker import Worker
from jobsched.memory.jobs import MemoryJobStore
from jobsched.memory.queue import MemoryDeadRuns, MemoryRunQueue
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Job
from jobsched.ports.run_messages import MAX_DELAY_S, RunMessage
from jobsched.settings import Settings
from jobsched.targets import Targets
from tests.support.backends import DEAD_RUN_QUEUE_URL, RUN_QUEUE_URL, memory_settings
from tests.support.worker import sqs_record


@pytest.fixture
def settings() -> Settings:
    """Default settings; resource names only label the fakes."""
    return memory_settings()


@pytest.fixture
def runs() -> MemoryRunStore:
    return MemoryRunStore()


@pytest.fixture
def jobs() -> MemoryJobStore:
    return MemoryJobStore()


@pytest.fixture
def queue() -> MemoryRunQueue:
    return MemoryRunQueue()


@pytest.fixture
def dead_runs() -> MemoryDeadRuns:
    return MemoryDeadRuns()


@pytest.fixture
def parts(
    settings: Settings,
    runs: MemoryRunStore,
    jobs: MemoryJobStore,
    queue: MemoryRunQueue,
    dead_runs: MemoryDeadRuns,
    clock: FakeClock,
) -> dict[str, Any]:
    """What the worker and the sweeper are built from: the settings, the fakes and the clock, by keyword."""
    return {
        "settings": settings,
        "runs": runs,
        "jobs": jobs,
        "queue": queue,
        "dead_runs": dead_runs,
        "clock": clock,
        "metrics": PowertoolsRunMetrics(),
    }


@pytest.fixture
def build_worker(parts: dict[str, Any], queue: MemoryRunQueue, waiter: Waiter) -> Callable[..., Worker]:
    """``build_worker(targets=None, **overrides)``: a ``Worker`` on the fakes (command targets unless told)."""

    def build(targets: Targets | None = None, **overrides: Any) -> Worker:
        defaults = {"targets": targets or Targets(), "visibility": queue, "waiter": waiter}
        return Worker(**{**parts, **defaults, **overrides})

    return build


@pytest.fixture
def worker(build_worker: Callable[..., Worker]) -> Worker:
    return build_worker()


@pytest.fixture
def build_sweeper(parts: dict[str, Any]) -> Callable[..., Sweeper]:
    """``build_sweeper(dead_runs=None, **overrides)``: a ``Sweeper`` on the fakes (its failed tries notify
    ``dead_runs`` when given)."""

    def build(dead_runs: Any = None, **overrides: Any) -> Sweeper:
        shared = {name: parts[name] for name in ("settings", "runs", "queue", "clock", "metrics")}
        chains = Chains(**{n: parts[n] for n in ("jobs", "runs", "queue", "settings", "clock")})
        failures = Failures(**shared, dead_runs=dead_runs or parts["dead_runs"], chains=chains)
        return Sweeper(**{**shared, "jobs": parts["jobs"], "failures": failures, **overrides})

    return build


@pytest.fixture
def sent(queue: MemoryRunQueue) -> list[dict[str, Any]]:
    """Every run message sent from now on, as the SQS SendMessageBatch entry the queue adapter would make of
    it (``MessageBody``, ``DelaySeconds``)."""
    entries: list[dict[str, Any]] = []
    send = queue.send

    def recording(messages: Any) -> None:
        send(messages)
        entries.extend(
            {"MessageBody": run_message_body(m), "DelaySeconds": max(0, min(m.delay_s, MAX_DELAY_S))}
            for m in messages
        )

    queue.send = recording  # type: ignore[method-assign]
    return entries


class FakeDrain:
    """``drain.bodies(url)``: the JSON bodies on the run queue (its messages) or the dead-run queue (each dead
    run's envelope), emptying it, as the moto tests read the queues."""

    def __init__(self, queue: MemoryRunQueue, dead_runs: MemoryDeadRuns) -> None:
        self.queue, self.dead_runs = queue, dead_runs

    def bodies(self, url: str) -> list[Any]:
        if url == RUN_QUEUE_URL:
            return [json.loads(run_message_body(m)) for m in self.queue.take()]
        assert url == DEAD_RUN_QUEUE_URL, url
        dead, self.dead_runs.notified = self.dead_runs.notified, []
        return [json.loads(json.dumps(dead_run_envelope(d), default=str)) for d in dead]


@pytest.fixture
def drain(queue: MemoryRunQueue, dead_runs: MemoryDeadRuns) -> FakeDrain:
    return FakeDrain(queue, dead_runs)


__all__ = ["FakeDrain", "RunMessage"]


@pytest.fixture
def visibility_calls(queue: MemoryRunQueue) -> list[dict[str, Any]]:
    """Every visibility change from now on, as the ChangeMessageVisibility parameters the queue adapter would
    send (``QueueUrl``, ``ReceiptHandle``, ``VisibilityTimeout``)."""
    seen: list[dict[str, Any]] = []
    change = queue.change_visibility

    def recording(receipt_handle: str, seconds: int) -> None:
        change(receipt_handle, seconds)
        seen.append(
            {"QueueUrl": RUN_QUEUE_URL, "ReceiptHandle": receipt_handle, "VisibilityTimeout": seconds}
        )

    queue.change_visibility = recording  # type: ignore[method-assign]
    return seen


@pytest.fixture
def delivered() -> Callable[[Job, int], dict[str, Any]]:
    """A run message as received from the run queue: an SQS event record with its own receipt handle."""
    handles = count(1)
    return lambda job, scheduled_for: sqs_record(job.id, scheduled_for, receipt_handle=f"rh-{next(handles)}")
