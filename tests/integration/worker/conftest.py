"""Fixtures of the worker/sweeper integration tests: jobs and runs written straight through the stores
(no scheduler or API needed), a fake clock, a simulated-time waiter, SQS event records, and reading a queue."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.adapters.queue import RunQueue
from jobsched.aws import Aws
from jobsched.clock import FakeClock
from jobsched.domain.registration import scheduling_state
from jobsched.domain.worker import Worker
from jobsched.handlers.worker import build_worker
from jobsched.local.embedded_aws import serialize_dynamodb
from jobsched.models import Job, JobCreate, to_ms
from jobsched.ports.runs import RunMessage
from jobsched.settings import Settings
from jobsched.store.jobs import JobStore
from jobsched.store.layout import new_run_item
from jobsched.store.runs import RunStore
from jobsched.targets import CancelToken, TargetCall, commands

T0 = to_ms(datetime(2026, 1, 5, 2, 0, tzinfo=UTC))
"""The scheduled_for of most test runs (epoch ms)."""


class SimTimeStuck(AssertionError):
    """A try under ``SimWaiter`` neither finished nor parked within its (real) patience: a test command that
    waits for simulated time must say so (``SimWaiter.sleep_until`` or the ``parked`` predicate)."""


class SimWaiter:
    """A ``Waiter`` in simulated time whose outcome does not depend on how busy the machine is.

    A try either finishes by itself (most commands: ``wait`` lets it, waiting in real time for as long as it
    takes, up to ``patience_s``), or waits for simulated time: a test command blocks in ``sleep_until`` (or a
    test passes ``parked``, a predicate that is true once its try can only wait, e.g. a subprocess that has
    started). Simulated time (``monotonic`` seconds and the fake ``clock`` together) moves only while the try
    is parked, by the waited seconds or up to the first sleeper's wake-up, whichever is earlier. So heartbeats
    and timeouts happen exactly where the test puts them, never because a slow machine ran a try late.
    """

    def __init__(
        self, clock: FakeClock, *, parked: Callable[[], bool] | None = None, patience_s: float = 30.0
    ) -> None:
        self.clock = clock
        self.parked = parked
        self.patience_s = patience_s
        self.stuck: list[str] = []
        self._now_ms = 0
        self._cond = threading.Condition()
        self._sleepers: dict[object, int | None] = {}  # sleeper -> wake-up (fake clock ms; None: cancel only)

    def monotonic(self) -> float:
        return self._now_ms / 1000

    @property
    def now(self) -> float:
        """Simulated monotonic seconds since the waiter was made."""
        return self.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait for ``event`` (the try's end) for ``seconds`` of simulated time; True when it ended."""
        target_ms = self._now_ms + max(0, round(seconds * 1000))
        while True:
            self._settle(event)
            if event.is_set():
                return True
            if self._now_ms >= target_ms:
                return False
            with self._cond:
                wakes = [
                    max(0, until - self.clock()) for until in self._sleepers.values() if until is not None
                ]
                step_ms = min([target_ms - self._now_ms, *wakes])
                self._now_ms += step_ms
                self.clock.advance(step_ms)
                now = self.clock()
                for sleeper, until in list(self._sleepers.items()):
                    if until is not None and until <= now:
                        del self._sleepers[sleeper]  # released here, so the next settle waits for it
                self._cond.notify_all()

    def sleep_until(self, until_ms: int | None, cancel: CancelToken) -> bool:
        """For test commands: park the calling try until the fake clock reaches ``until_ms`` (epoch ms;
        None: until cancelled) or the try is cancelled. Returns True when cancelled."""
        sleeper = object()

        def release() -> None:
            with self._cond:
                self._sleepers.pop(sleeper, None)
                self._cond.notify_all()

        with self._cond:
            if until_ms is None or until_ms > self.clock():
                self._sleepers[sleeper] = until_ms
                self._cond.notify_all()
        cancel.on_cancel(release)
        with self._cond:
            self._cond.wait_for(lambda: sleeper not in self._sleepers, timeout=self.patience_s * 10)
        release()
        return cancel.cancelled

    def _is_parked(self) -> bool:
        return bool(self._sleepers) or (self.parked is not None and self.parked())

    def _settle(self, event: threading.Event) -> None:
        """Wait (real time, up to ``patience_s``) until the try has ended or is parked."""
        deadline = time.monotonic() + self.patience_s
        while not event.wait(0.002):
            with self._cond:
                if self._is_parked():
                    return
            if time.monotonic() >= deadline:
                self.stuck.append(f"a try neither ended nor parked within {self.patience_s:g} s")
                raise SimTimeStuck(self.stuck[-1])


@pytest.fixture(autouse=True)
def atomic_dynamodb() -> None:
    """DynamoDB applies each conditional write atomically; moto checks and writes in separate steps. The
    handler runs a batch's records in concurrent threads (a duplicate delivery in the same batch races for
    the claim), so moto's DynamoDB requests are serialized, as local mode does. Installed before any boto3
    session of the test is created (autouse fixtures run first)."""
    serialize_dynamodb()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + 1_500)


@pytest.fixture
def waiter(clock: FakeClock) -> Iterator[SimWaiter]:
    sim = SimWaiter(clock)
    yield sim
    assert not sim.stuck, sim.stuck  # the worker turns the waiter's error into a failed try: say it here


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
def make_job(jobs: JobStore, clock: FakeClock, settings: Settings) -> Callable[..., Job]:
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
        state = scheduling_state(
            job,
            anchor_at_ms=clock(),
            next_run_at_ms=T0 + 86_400_000,
            partition=0,
            settings=settings.model_copy(update={"due_shards": 1, "due_bucket_s": 60}),
            now_ms=clock(),
        )
        jobs.create(job, state)
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


@dataclass
class Context:
    """The Lambda context fields Powertools reads."""

    aws_request_id: str = "req-123"
    function_name: str = "jobsched-worker"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-worker"
    remaining_ms: int = 899_000  # a fresh invocation of the 900 s worker function

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


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
