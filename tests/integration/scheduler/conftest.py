"""Scheduler test harness: jobs written straight into the tables (no API), schedulers with fault-injecting
adapters, and helpers to read back runs and queue messages. Everything runs in-process under moto with a
FakeClock."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobsched.adapters.queue import RunQueue
from jobsched.aws import Aws
from jobsched.clock import FakeClock
from jobsched.domain.lease import LeaderLease
from jobsched.domain.loop import SchedulerLoop
from jobsched.domain.planning import TickLimits
from jobsched.domain.registration import register
from jobsched.domain.tick import Scheduler, TickResult
from jobsched.models import CommandTarget, Job, from_ms
from jobsched.ports.jobs import SchedulingState
from jobsched.settings import Settings
from jobsched.store import layout
from jobsched.store.control import ControlStore
from jobsched.store.jobs import JobStore
from jobsched.store.runs import RunStore
from tests.support.scheduler import T0, Recorder, Wrapped

_ids = itertools.count(1)


@dataclass
class Contender:
    """One scheduler instance (lease contender + its partition's scheduler) with recorded adapters."""

    loop: SchedulerLoop
    recorder: Recorder

    @property
    def scheduler(self) -> Scheduler:
        return self.loop.scheduler

    @property
    def lease(self) -> LeaderLease:
        return self.loop.lease

    def step(self) -> TickResult | None:
        return self.loop.step()


@dataclass
class Harness:
    """Tables/queue under moto, a FakeClock at ``T0``, and helpers."""

    T0 = T0

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

    # --- jobs ---------------------------------------------------------------------------------

    def job(self, schedule: str, **fields: Any) -> Job:
        """A Job model created now (the clock), with a command target and the given fields."""
        now = from_ms(self.clock())
        job_id = fields.pop("id", None) or f"j_test{next(_ids):06d}"
        return Job(
            id=job_id,
            name=fields.pop("name", job_id),
            owner=fields.pop("owner", "team-a"),
            schedule=schedule,
            target=fields.pop("target", CommandTarget(name="echo")),
            created_at=fields.pop("created_at", now),
            updated_at=now,
            **fields,
        )

    def sched_for(self, job: Job) -> SchedulingState:
        """The scheduling state of ``job`` with its first fire from now (what the API would write)."""
        return register(job, settings=self.settings, now_ms=self.clock())

    def add(self, schedule: str, **fields: Any) -> Job:
        """Register a job (spec, scheduling item, name lock) as the API would; returns it."""
        job = self.job(schedule, **fields)
        self.jobs.create(job, self.sched_for(job))
        return job

    def add_many(self, count: int, schedule: str, **fields: Any) -> list[str]:
        """Write ``count`` scheduling items quickly (batch writes, no spec items): enough for the scheduler."""
        table = self.aws.table(self.settings.jobs_table)
        ids = []
        with table.batch_writer() as batch:
            for _ in range(count):
                job = self.job(schedule, **fields)
                batch.put_item(Item=layout.sched_item(self.sched_for(job)))
                ids.append(job.id)
        return ids

    def sched(self, job_id: str) -> dict[str, Any] | None:
        """The job's scheduling item as stored (plain Python values), or None."""
        table = self.aws.table(self.settings.jobs_table)
        item = table.get_item(Key={"pk": layout.job_pk(job_id), "sk": layout.SCHED_SK}, ConsistentRead=True)
        return layout.plain(item["Item"]) if "Item" in item else None

    # --- schedulers ---------------------------------------------------------------------------

    def contender(
        self,
        holder: str = "a",
        *,
        partition: int = 0,
        limits: TickLimits | None = None,
        settings: Settings | None = None,
        jobs: Any = None,
        runs: Any = None,
        queue: Any = None,
    ) -> Contender:
        """A scheduler loop whose adapters are recorded (and can be given faults through its recorder)."""
        settings = settings or self.settings
        recorder = Recorder()
        scheduler = Scheduler(
            partition=partition,
            jobs=Wrapped(jobs or JobStore(self.aws.table(settings.jobs_table)), recorder),
            runs=Wrapped(runs or RunStore(self.aws.table(settings.runs_table)), recorder),
            queue=Wrapped(queue or RunQueue(self.aws.sqs, settings.run_queue_url), recorder),
            control=Wrapped(ControlStore(self.aws.dynamodb, settings.control_table), recorder),
            settings=settings,
            clock=self.clock,
            limits=limits or TickLimits(threads=4),
        )
        lease = LeaderLease(
            Wrapped(ControlStore(self.aws.dynamodb, settings.control_table), recorder),
            partition,
            holder,
            clock=self.clock,
            ttl_ms=int(settings.lease_ttl_s * 1000),
        )
        contender = Contender(
            SchedulerLoop(scheduler, lease, clock=self.clock, sleep=self.clock.sleep), recorder
        )
        self.contenders.append(contender)
        return contender

    def run_seconds(self, contender: Contender, seconds: int, *, offset_ms: int = 5) -> list[TickResult]:
        """Step ``contender`` once per simulated second, ``offset_ms`` past each second boundary."""
        results = []
        for _ in range(seconds):
            self.clock.now_ms = (self.clock.now_ms // 1000 + 1) * 1000 + offset_ms
            result = contender.step()
            if result is not None:
                results.append(result)
        return results

    # --- runs and messages --------------------------------------------------------------------

    def runs_of(self, job_id: str) -> list[dict[str, Any]]:
        """Every run row of ``job_id``, oldest scheduled_for first."""
        rows, _ = self.runs.list_for_job(job_id, 10_000)
        return sorted((layout.run_item(r) for r in rows), key=lambda r: r["scheduled_for"])


@pytest.fixture
def harness(aws: Aws, settings: Settings) -> Iterator[Harness]:
    h = Harness(settings=settings, aws=aws, clock=FakeClock(T0))
    yield h
    for contender in h.contenders:
        contender.scheduler.close()
