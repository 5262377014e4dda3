"""The scheduler harnesses' shared parts (tests/integration/scheduler on moto, tests/unit/scheduler on the
fakes): the start instant, the fault-injecting recorder around adapters, and the harness base."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.aws.positions import JsonPositions
from jobsched.clock import FakeClock, from_ms, to_ms
from jobsched.domain.lease import LeaderLease
from jobsched.domain.loop import SchedulerGroup, SchedulerLoop
from jobsched.domain.planning import TickLimits
from jobsched.domain.registration import due_entry, register
from jobsched.domain.runs import claim_message, new_run
from jobsched.domain.tick import Scheduler
from jobsched.domain.tick_records import TickResult
from jobsched.dynamodb import layout
from jobsched.models import CommandTarget, Job
from jobsched.ports.jobs import DueEntry, SchedulingState
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.runs import Claim
from jobsched.runtime.wiring import tick_config
from jobsched.settings import Settings

# 2026-03-02T10:00:00Z, a Monday, on a whole minute.
T0 = to_ms(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))


class Recorder:
    """Counts calls through a wrapper and can inject a fault before (``before``) or after (``after``) the real
    call: a callable receiving the call's arguments that may raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.results: list[tuple[str, tuple[Any, ...], Any]] = []
        self.before: dict[str, Callable[..., None]] = {}
        self.after: dict[str, Callable[..., None]] = {}

    def count(self, name: str) -> int:
        return sum(1 for call in self.calls if call[0] == name)


class Wrapped:
    """A fault-injecting proxy around an adapter: every method call is recorded in ``recorder``."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target
        recorder = self._recorder

        def call(*args: Any, **kwargs: Any) -> Any:
            recorder.calls.append((name, args, kwargs))
            if name in recorder.before:
                recorder.before[name](*args, **kwargs)
            value = target(*args, **kwargs)
            recorder.results.append((name, args, value))
            if name in recorder.after:
                recorder.after[name](*args, **kwargs)
            return value

        return call


_ids = itertools.count(1)


@dataclass
class FakeContext:
    """The parts of a Lambda context the scheduler handler and Powertools read; its remaining time runs out at
    ``deadline_ms`` on the fake ``clock``."""

    clock: FakeClock
    deadline_ms: int
    aws_request_id: str = "req-1"
    function_name: str = "jobsched-scheduler"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-scheduler"

    def get_remaining_time_in_millis(self) -> int:
        return self.deadline_ms - self.clock()


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


class HarnessBase:
    """What both scheduler harnesses share: jobs registered as the API would, recorded scheduler loops, and the
    run rows read back. A subclass gives the adapters (``jobs``, ``runs``, ``*_for(settings)``), ``settings``,
    ``clock`` and ``contenders``."""

    T0 = T0

    settings: Settings
    clock: FakeClock
    contenders: list[Contender]
    jobs: Any
    runs: Any

    def jobs_for(self, settings: Settings) -> Any:
        return self.jobs

    def runs_for(self, settings: Settings) -> Any:
        return self.runs

    def queue_for(self, settings: Settings) -> Any:
        raise NotImplementedError

    def control_for(self, settings: Settings) -> Any:
        raise NotImplementedError

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

    def entry(self, job_id: str, due_at: int, *, written_at: int, version: int | None) -> DueEntry:
        """The due entry of ``job_id`` (partition 0) due at ``due_at``, as a writer files it at ``written_at`` for
        the state's ``version`` (epoch ms; ``registration.due_entry`` with these settings)."""
        return due_entry(
            job_id,
            due_at,
            partition=0,
            shards=self.settings.due_shards,
            bucket_ms=self.settings.due_bucket_s * 1000,
            now_ms=written_at,
            version=version,
        )

    def add(self, schedule: str, **fields: Any) -> Job:
        """Register a job (job, scheduling state, name) as the API would; returns it."""
        job = self.job(schedule, **fields)
        self.jobs.create(job, self.sched_for(job))
        return job

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
        alerts: Any = None,
    ) -> Contender:
        """A scheduler loop whose adapters are recorded (and can be given faults through its recorder);
        ``alerts``: where its alert policies publish (none by default)."""
        settings = settings or self.settings
        recorder = Recorder()
        scheduler = Scheduler(
            partition=partition,
            jobs=Wrapped(jobs or self.jobs_for(settings), recorder),
            runs=Wrapped(runs or self.runs_for(settings), recorder),
            queue=Wrapped(queue or self.queue_for(settings), recorder),
            control=Wrapped(self.control_for(settings), recorder),
            config=tick_config(settings),
            positions=JsonPositions(),
            clock=self.clock,
            limits=limits or TickLimits(threads=4),
            alerts=alerts,
        )
        lease = LeaderLease(
            Wrapped(self.control_for(settings), recorder),
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

    def run_second_with(self, contender: Contender, step: str, hook: Callable[..., Any]) -> list[TickResult]:
        """One simulated second of ``contender`` (:meth:`run_seconds`) with ``hook`` called with the arguments of
        each ``step`` port call before it (``Recorder.before``: a hook that raises fails the call); the hook is
        removed after."""
        contender.recorder.before[step] = hook
        try:
            return self.run_seconds(contender, 1)
        finally:
            del contender.recorder.before[step]

    def run_groups(self, running: Sequence[SchedulerGroup], seconds: int) -> None:
        """Step every group of ``running`` once per simulated second, 5 ms past each second boundary."""
        for _ in range(seconds):
            self.clock.now_ms = (self.clock.now_ms // 1000 + 1) * 1000 + 5
            for group in running:
                group.step()

    def roll_over(
        self,
        old: Sequence[SchedulerGroup],
        new: Sequence[SchedulerGroup],
        seconds: int,
        *,
        overlap_s: int = 15,
    ) -> None:
        """A deploy: ``new`` starts while the ``old`` leaders keep running for ``overlap_s`` simulated seconds,
        then ``old`` stops and ``new`` runs alone for ``seconds`` more."""
        self.run_groups([*old, *new], overlap_s)
        stop_groups(old)
        self.run_groups(new, seconds)

    # --- runs and messages --------------------------------------------------------------------

    def drain(self) -> list[Any]:
        """Take every message on the run queue (each harness reads its own queue)."""
        raise NotImplementedError

    def ticks(self, contender: Contender, seconds: int) -> list[list[Any]]:
        """Step ``contender`` once a second for ``seconds``; the messages each tick sent, in sending order."""
        sent = []
        for _ in range(seconds):
            self.run_seconds(contender, 1)
            sent.append(self.drain())
        return sent

    def claim(self, job_id: str, scheduled_for: int, worker: str = "w", *, term: int | None = None) -> Claim:
        """A worker's claim, now (the clock), of the run ``(job_id, scheduled_for)`` from its message (sent by
        a scheduler of fencing ``term``), as ``Worker.process`` makes it: the claim creates the row of a run
        that has none (``claim_message``)."""
        now = self.clock()
        message = RunMessage(job_id, scheduled_for, term=term)
        return claim_message(
            self.runs, message, worker=worker, now_ms=now, retry_due_by_ms=now, settings=self.settings
        )

    def claim_sent(self) -> int:
        """Claim the run of every message on the run queue as a worker would (``Worker.process``: the claim
        creates the row of a scheduled run from its message); returns the number of claims won."""
        won = 0
        for message in self.drain():
            now = self.clock()
            claim = claim_message(
                self.runs, message, worker="harness", now_ms=now, retry_due_by_ms=now, settings=self.settings
            )
            won += claim.claimed
        return won

    def runs_of(self, job_id: str) -> list[dict[str, Any]]:
        """Every run of ``job_id`` as the DynamoDB adapter stores it, oldest scheduled_for first: its row, or, for
        a scheduled run no worker has claimed yet, the row its claim would create from the message the
        contenders' scheduler sent (the message is that run's durable record until the claim; design §4.2)."""
        rows, _ = self.runs.list_for_job(job_id, 10_000)
        found = {r.scheduled_for: layout.run_item(r) for r in rows}
        for contender in self.contenders:
            for name, args, _ in contender.recorder.results:
                for message in args[0] if name == "send" else ():
                    if message.job_id == job_id and message.enqueued_at is not None:
                        found.setdefault(
                            message.scheduled_for,
                            layout.run_item(
                                new_run(
                                    job_id,
                                    message.scheduled_for,
                                    now_ms=message.enqueued_at,
                                    retention_days=self.settings.retention_days,
                                    dispatch_at_ms=message.dispatch_at,
                                    sweep_after_ms=None,
                                    term=message.term,
                                )
                            ),
                        )
        return [found[at] for at in sorted(found)]


def stop_groups(running: Sequence[SchedulerGroup]) -> None:
    """Stop every loop of every group of ``running`` (a leader shut down by a deploy)."""
    for group in running:
        for loop in group.loops:
            loop.stop()


def throttled(*_: Any, **__: Any) -> None:
    """A store call refused as DynamoDB throttles (``ProvisionedThroughputExceededException``): a fault hook."""
    raise ClientError(
        {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "Op"
    )
