"""Scheduler test harness on the in-memory fakes (``jobsched.memory``): no moto, no network. The same names as
tests/integration/scheduler/conftest.py's (``harness``, ``Harness.add``, ``sched``, ``contender``,
``run_seconds``, ``runs_of``, ``all_runs``, ``drain``...), so a test body reads the same on either. Items
(``sched``, ``runs_of``, ``all_runs``) are the fakes' records rendered by the DynamoDB layout, so assertions on
stored attributes stay as they are."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobsched.clock import FakeClock
from jobsched.domain.lease import LeaderLease
from jobsched.domain.loop import SchedulerLoop
from jobsched.domain.planning import TickLimits
from jobsched.domain.registration import register
from jobsched.domain.tick import Scheduler, TickResult
from jobsched.memory.control import MemoryControlStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.memory.queue import MemoryRunQueue
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import CommandTarget, Job, from_ms
from jobsched.ports.jobs import SchedulingState
from jobsched.ports.runs import RunMessage
from jobsched.settings import Settings
from jobsched.store import layout
from tests.support.scheduler import T0, Recorder, Wrapped

_ids = itertools.count(1)


@pytest.fixture
def settings() -> Settings:
    """Default settings; resource names only label the fakes."""
    return Settings(
        jobs_table="jobs",
        runs_table="runs",
        control_table="control",
        idempotency_table="idempotency",
        run_queue_url="memory://run-queue",
        dead_run_queue_url="memory://dead-run-queue",
        alerts_topic_arn="arn:aws:sns:us-east-1:123456789012:alerts",
    )


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
    """The fakes (one job store, run store, run queue and control store), a FakeClock at ``T0``, and helpers."""

    T0 = T0

    settings: Settings
    clock: FakeClock
    jobs: MemoryJobStore = field(default_factory=MemoryJobStore)
    runs: MemoryRunStore = field(default_factory=MemoryRunStore)
    queue: MemoryRunQueue = field(default_factory=MemoryRunQueue)
    control: MemoryControlStore = field(default_factory=MemoryControlStore)
    contenders: list[Contender] = field(default_factory=list)

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
        """Register a job (job, scheduling state, name) as the API would; returns it."""
        job = self.job(schedule, **fields)
        self.jobs.create(job, self.sched_for(job))
        return job

    def add_many(self, count: int, schedule: str, **fields: Any) -> list[str]:
        """Store ``count`` scheduling states only (no jobs): enough for the scheduler."""
        ids = []
        for _ in range(count):
            job = self.job(schedule, **fields)
            self.jobs.states[job.id] = self.sched_for(job)
            ids.append(job.id)
        return ids

    def sched(self, job_id: str) -> dict[str, Any] | None:
        """The job's scheduling state as the DynamoDB adapter would store it (plain Python values), or None."""
        state = self.jobs.scheduling_states([job_id]).get(job_id)
        if state is None:
            return None
        assert isinstance(state, SchedulingState), state
        return dict(layout.plain(layout.sched_item(state)))

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
            jobs=Wrapped(jobs or self.jobs, recorder),
            runs=Wrapped(runs or self.runs, recorder),
            queue=Wrapped(queue or self.queue, recorder),
            control=Wrapped(self.control, recorder),
            settings=settings,
            clock=self.clock,
            limits=limits or TickLimits(threads=4),
        )
        lease = LeaderLease(
            Wrapped(self.control, recorder),
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
        """Every run row of ``job_id`` as the DynamoDB adapter would store it, oldest scheduled_for first."""
        rows, _ = self.runs.list_for_job(job_id, 10_000)
        return sorted((layout.run_item(r) for r in rows), key=lambda r: r["scheduled_for"])

    def all_runs(self) -> list[dict[str, Any]]:
        """Every run row, as stored items (plain Python values)."""
        return [layout.plain(layout.run_item(r)) for r in self.runs.rows()]

    def drain(self) -> list[RunMessage]:
        """Take every message sent to the run queue (in the order they were sent)."""
        return self.queue.take()


@pytest.fixture
def harness(settings: Settings) -> Iterator[Harness]:
    h = Harness(settings=settings, clock=FakeClock(T0))
    yield h
    for contender in h.contenders:
        contender.scheduler.close()
