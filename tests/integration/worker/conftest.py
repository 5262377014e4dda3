"""Fixtures of the worker/sweeper integration tests: jobs and runs written straight through the DynamoDB stores
on moto (no scheduler or API needed), and reading a queue. The fake clock, the simulated-time waiter, SQS event
records, the ``record`` command and ``kit`` (the common fixtures as one object) are ``tests.support.worker``'s."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobsched.aws.clients import Aws
from jobsched.aws.queue import RunQueue
from jobsched.aws.wire import run_message_body
from jobsched.clock import FakeClock
from jobsched.domain.supervision import Waiter
from jobsched.domain.worker import Worker
from jobsched.dynamodb.jobs import JobStore
from jobsched.dynamodb.runs import RunStore
from jobsched.local.embedded_aws import serialize_dynamodb
from jobsched.models import Job
from jobsched.ports.run_messages import RunMessage
from jobsched.resources import RUN_QUEUE
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings
from jobsched.targets import Targets
from tests.support.worker import T0, Context, SimTimeStuck, SimWaiter, sqs_record

__all__ = ["T0", "Context", "SimTimeStuck", "SimWaiter", "sqs_record"]  # imported by the tests from here


@pytest.fixture(autouse=True)
def atomic_dynamodb() -> None:
    """DynamoDB applies each conditional write atomically; moto checks and writes in separate steps. The
    handler runs a batch's records in concurrent threads (a duplicate delivery in the same batch races for
    the claim), so moto's DynamoDB requests are serialized, as local mode does. Installed before any boto3
    session of the test is created (autouse fixtures run first)."""
    serialize_dynamodb()


@pytest.fixture
def build_worker(settings: Settings, aws: Aws, clock: FakeClock, waiter: SimWaiter) -> Callable[..., Worker]:
    """``build_worker(worker_settings=settings, *, targets=None, waiter=<the SimWaiter>)``: the worker as the
    Lambda handler builds it (``Components.worker``), on moto, in simulated time unless told."""

    def build(
        worker_settings: Settings | None = None, *, targets: Targets | None = None, waiter: Waiter = waiter
    ) -> Worker:
        return Components(worker_settings or settings, aws, clock=clock).worker(
            waiter=waiter, targets=targets
        )

    return build


@pytest.fixture
def worker(build_worker: Callable[..., Worker]) -> Worker:
    """The worker as the Lambda handler builds it, on moto, in simulated time."""
    return build_worker()


@pytest.fixture
def jobs(aws: Aws, settings: Settings) -> JobStore:
    return JobStore(aws.table(settings.jobs_table))


@pytest.fixture
def runs(aws: Aws, settings: Settings) -> RunStore:
    return RunStore(aws.table(settings.runs_table))


@pytest.fixture
def visibility_calls(aws: Aws) -> list[dict[str, Any]]:
    """The parameters of every ChangeMessageVisibility request made from now on."""
    seen: list[dict[str, Any]] = []
    aws.sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibility", lambda params, **_: seen.append(dict(params))
    )
    return seen


@pytest.fixture
def delivered(aws: Aws, settings: Settings) -> Callable[[Job, int], dict[str, Any]]:
    """Send a run message to the run queue and receive it: an SQS event record with a live receipt handle."""

    def deliver(job: Job, scheduled_for: int) -> dict[str, Any]:
        RunQueue(aws.sqs, settings.run_queue_url).send([RunMessage(job.id, scheduled_for)])
        message = aws.sqs.receive_message(
            QueueUrl=settings.run_queue_url, AttributeNames=["All"], WaitTimeSeconds=0
        )["Messages"][0]
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message["Attributes"],
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:test-RunQueue",
        }

    return deliver


class Drain:
    """Reads a queue to the end: ``drain(url)`` returns every message visible now (system and message
    attributes included), oldest batch first, deleting each; ``drain.bodies(url)`` their JSON bodies."""

    def __init__(self, sqs: Any) -> None:
        self.sqs = sqs

    def __call__(self, url: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", []):
            found.extend(batch)
            self.sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
            )
        return found

    def bodies(self, url: str) -> list[Any]:
        return [json.loads(message["Body"]) for message in self(url)]


@pytest.fixture
def drain(aws: Aws) -> Drain:
    """Read (and empty) a queue: see ``Drain``."""
    return Drain(aws.sqs)


def redrive(sqs: Any, url: str, job_id: str) -> None:
    """Send the run message of ``job_id`` at ``T0`` to the run queue ``url`` and receive it
    ``RUN_QUEUE.max_receive_count`` times without a claim, handing it back each time, so that SQS's redrive
    policy (on moto) moves it to the dead-letter queue."""
    sqs.send_message(
        QueueUrl=url, MessageBody=run_message_body(RunMessage(job_id, T0, dispatch_at=T0, enqueued_at=T0))
    )
    for _ in range(RUN_QUEUE.max_receive_count):
        (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)["Messages"]
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []  # redriven


@pytest.fixture
def environment(resource_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The functions' environment as deployed (every resource's env var, on moto), with the handlers' cached
    defaults (settings, sweeper runtime, batches) built afresh from it and dropped again after the test."""
    from jobsched.handlers import sweeper as sweeper_handler
    from jobsched.handlers import worker as worker_handler
    from jobsched.settings import get_settings

    for name, value in resource_env.items():
        monkeypatch.setenv(name, value)
    defaults = (
        get_settings,
        worker_handler.default_batches,
        sweeper_handler.default_runtime,
    )
    for default in defaults:
        default.cache_clear()
    yield
    for default in defaults:
        default.cache_clear()
