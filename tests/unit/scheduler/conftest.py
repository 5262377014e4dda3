"""Scheduler test harness on the in-memory fakes (``jobsched.memory``): no moto, no network. The same names as
tests/integration/scheduler/conftest.py's (``harness``, ``Harness.add``, ``sched``, ``contender``,
``run_seconds``, ``runs_of``, ``all_runs``, ``drain``...), so a test body reads the same on either. Items
(``sched``, ``runs_of``, ``all_runs``) are the fakes' records rendered by the DynamoDB layout, so assertions on
stored attributes stay as they are."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobsched.api.service import JobService
from jobsched.clock import FakeClock
from jobsched.dynamodb import layout
from jobsched.memory.control import MemoryControlStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.memory.queue import MemoryRunQueue
from jobsched.memory.runs import MemoryRunStore
from jobsched.ports.jobs import SchedulingState
from jobsched.ports.run_messages import RunMessage
from jobsched.settings import Settings
from tests.support.backends import memory_settings
from tests.support.scheduler import T0, Contender, HarnessBase


@pytest.fixture
def settings() -> Settings:
    """Default settings; resource names only label the fakes."""
    return memory_settings()


@dataclass
class Harness(HarnessBase):
    """The fakes (one job store, run store, run queue and control store), a FakeClock at ``T0``, and helpers."""

    settings: Settings
    clock: FakeClock
    jobs: MemoryJobStore = field(default_factory=MemoryJobStore)
    runs: MemoryRunStore = field(default_factory=MemoryRunStore)
    queue: MemoryRunQueue = field(default_factory=MemoryRunQueue)
    control: MemoryControlStore = field(default_factory=MemoryControlStore)
    contenders: list[Contender] = field(default_factory=list)

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

    def parts(self) -> dict[str, Any]:
        """What the worker and the API's ``JobService`` are built from, by keyword: the settings, the job and
        run stores, the run queue and the clock."""
        return {
            "settings": self.settings,
            "jobs": self.jobs,
            "runs": self.runs,
            "queue": self.queue,
            "clock": self.clock,
        }

    def api(self, **settings: Any) -> JobService:
        """The API's ``JobService`` over the harness's stores and clock, recording its partition and shard marks
        in the harness's control store, on the harness's settings with ``settings`` changed."""
        return JobService(
            **(self.parts() | {"settings": self.settings.model_copy(update=settings)}),
            partition_marks=self.control,
        )

    def queue_for(self, settings: Settings) -> MemoryRunQueue:
        return self.queue

    def control_for(self, settings: Settings) -> MemoryControlStore:
        return self.control

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
