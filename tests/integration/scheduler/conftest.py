"""Scheduler test harness: jobs written straight into the tables (no API), schedulers with fault-injecting
adapters, and helpers to read back runs and queue messages. Everything runs in-process under moto with a
FakeClock."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobsched.aws.clients import Aws
from jobsched.aws.queue import RunQueue
from jobsched.aws.wire import parse_run_message
from jobsched.clock import FakeClock
from jobsched.dynamodb import layout
from jobsched.dynamodb.control import ControlStore
from jobsched.dynamodb.jobs import JobStore
from jobsched.dynamodb.runs import RunStore
from jobsched.ports.run_messages import RunMessage
from jobsched.settings import Settings
from tests.support.scheduler import T0, Contender, HarnessBase


@dataclass
class Harness(HarnessBase):
    """Tables/queue under moto, a FakeClock at ``T0``, and helpers."""

    settings: Settings
    aws: Aws
    clock: FakeClock
    contenders: list[Contender] = field(default_factory=list)

    @property
    def jobs(self) -> JobStore:
        return JobStore(self.aws.table(self.settings.jobs_table))

    @property
    def runs(self) -> RunStore:
        return RunStore(self.aws.table(self.settings.runs_table))

    def add_many(self, count: int, schedule: str, **fields: Any) -> list[str]:
        """Write ``count`` scheduling items quickly (batch writes, no spec items): enough for the scheduler."""
        table = self.aws.table(self.settings.jobs_table)
        ids = []
        with table.batch_writer() as batch:
            for _ in range(count):
                job = self.job(schedule, **fields)
                for item in layout.state_items(self.sched_for(job)):
                    batch.put_item(Item=item)
                ids.append(job.id)
        return ids

    def sched(self, job_id: str) -> dict[str, Any] | None:
        """The job's scheduling item as stored (plain Python values), or None."""
        table = self.aws.table(self.settings.jobs_table)
        item = table.get_item(Key={"pk": layout.job_pk(job_id), "sk": layout.SCHED_SK}, ConsistentRead=True)
        return layout.plain(item["Item"]) if "Item" in item else None

    def count_requests(self) -> Counter[str]:
        """Count every AWS request made from now on through the harness's clients, by operation name
        (botocore event hooks)."""
        counts: Counter[str] = Counter()

        def hook(model: Any, **_: Any) -> None:
            counts[model.name] += 1

        for client in (self.aws.dynamodb, self.aws.dynamodb_resource.meta.client, self.aws.sqs):
            client.meta.events.register("before-call.*.*", hook)
        return counts

    def drain(self) -> list[RunMessage]:
        """Take every message on the run queue (received and deleted)."""
        url, got = self.settings.run_queue_url, []
        while batch := self.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            for message in batch:
                self.aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                got.append(parse_run_message(message["Body"]))
        return got

    def jobs_for(self, settings: Settings) -> JobStore:
        return JobStore(self.aws.table(settings.jobs_table))

    def runs_for(self, settings: Settings) -> RunStore:
        return RunStore(self.aws.table(settings.runs_table))

    def queue_for(self, settings: Settings) -> RunQueue:
        return RunQueue(self.aws.sqs, settings.run_queue_url)

    def control_for(self, settings: Settings) -> ControlStore:
        return ControlStore(self.aws.dynamodb, settings.control_table)


@pytest.fixture
def harness(aws: Aws, settings: Settings) -> Iterator[Harness]:
    h = Harness(settings=settings, aws=aws, clock=FakeClock(T0))
    yield h
    for contender in h.contenders:
        contender.scheduler.close()
