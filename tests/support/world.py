"""A whole deployment on the in-memory fakes, driven on an injected clock and judged by the independent oracle
(``tests.support.oracle``): the API service, two competing scheduler loops, workers, the sweeper with the run
queue's dead-letter queue, and an SQS-like run queue (visibility, redelivery, redrive after
``RUN_QUEUE.max_receive_count`` receives). Every store and queue call of each component goes through a
``FaultyPort``, so a test can make any call fail transiently before or after it took effect, or the calling
process die (``Crash``) before or after it, and run a hook after it (a racing component's step).

Every action the test takes through :class:`World` is recorded in the oracle first-hand (the spec as the test
wrote it, the instant, pauses, deletes, triggers, backfills, re-runs); every try a target runs is observed by
the :class:`OracleExecutor`; every message the scheduler sends by the scheduler's queue port. Nothing the
oracle holds comes from an answer of the API.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched.api.schemas import BackfillRequest, JobCreate, JobPatch
from jobsched.api.service import JobService
from jobsched.api.wsgi import api_context
from jobsched.aws.metrics import PowertoolsRunMetrics
from jobsched.aws.positions import JsonPositions
from jobsched.clock import FakeClock, from_ms, to_ms
from jobsched.domain.lease import LeaderLease
from jobsched.domain.loop import SchedulerLoop
from jobsched.domain.planning import TickLimits
from jobsched.domain.retries import Failures
from jobsched.domain.sweeper import Sweeper
from jobsched.domain.tick import Scheduler
from jobsched.domain.worker import Deferred, Worker
from jobsched.memory.queue import MemoryAlerts, MemoryDeadLetters
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.run_messages import Delivery, QueueSendError, RunMessage
from jobsched.ports.runs import RunRow, run_id
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.resources import RUN_QUEUE
from jobsched.runtime.wiring import Components, tick_config
from jobsched.settings import Settings
from jobsched.targets import Targets
from tests.support.backends import memory_backend
from tests.support.oracle import Oracle, Spec, Try

T0 = to_ms(datetime(2026, 3, 2, 9, 58, 30, tzinfo=UTC))
"""A Monday, 90 s before a daily 10:00 fire (epoch ms)."""
OWNER = "team-world"
SPEC_FIELDS = {
    "schedule": "schedule",
    "timezone": "timezone",
    "missed": "missed",
    "misfire_grace_s": "grace_s",
    "catch_up_window_s": "window_s",
    "overlap": "overlap",
    "jitter_s": "jitter_s",
}


class Crash(BaseException):
    """A process dying in the middle of a call: not an Exception, so nothing on the way catches it."""


@dataclass
class Fault:
    """At the ``nth`` (0-based) call of ``method`` by ``component`` (None: any): ``error_before`` (a transient
    error, nothing written), ``error_after`` (the call took effect, then the error), ``crash_before``,
    ``crash_after`` (the process dies), or ``hook`` (run ``action`` after the call)."""

    component: str | None
    method: str | None
    mode: str
    nth: int = 0
    action: Callable[[], None] | None = None
    seen: int = 0
    fired: bool = False

    def matches(self, component: str, method: str) -> bool:
        return (
            not self.fired
            and (self.component is None or self.component == component)
            and (self.method is None or self.method == method)
        )


class FaultyPort:
    """A proxy over a port whose calls go through the world's pending faults."""

    def __init__(self, inner: Any, component: str, world: World) -> None:
        self._inner, self._component, self._world = inner, component, world

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target) or name.startswith("_"):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._world.call(self._component, name, lambda: target(*args, **kwargs), args)

        return call


@dataclass
class InFlight:
    message: RunMessage
    visible_at: int
    receives: int = 0
    handle: str = ""


class SimQueue:
    """The run queue as SQS behaves: a sent message becomes visible after its delay; a received one stays
    invisible until acknowledged or its visibility ends (the worker's ``hold`` and heartbeats, a hand-back);
    after ``RUN_QUEUE.max_receive_count`` receives it is redriven to ``dead_letters``."""

    def __init__(self, clock: FakeClock, dead_letters: MemoryDeadLetters, visibility_ms: int) -> None:
        self.clock, self.dead_letters, self.visibility_ms = clock, dead_letters, visibility_ms
        self.messages: list[InFlight] = []
        self._handles = itertools.count(1)

    def send(self, messages: Sequence[RunMessage]) -> None:
        now = self.clock()
        self.messages += [InFlight(m, now + m.delay_s * 1000) for m in messages]

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        for m in self.messages:
            if m.handle == receipt_handle:
                m.visible_at = self.clock() + seconds * 1000

    def change_visibility_batch(self, receipt_handles: Sequence[str], seconds: int) -> None:
        for handle in receipt_handles:
            self.change_visibility(handle, seconds)

    def receive(self, limit: int) -> list[InFlight]:
        now, taken = self.clock(), []
        for m in list(self.messages):
            if len(taken) >= limit:
                break
            if m.visible_at > now:
                continue
            if m.receives >= RUN_QUEUE.max_receive_count:
                self.messages.remove(m)
                self.dead_letters.redrive(m.message, m.receives)
                continue
            self.take(m)
            taken.append(m)
        return taken

    def take(self, m: InFlight) -> None:
        """Receive ``m`` now: one more receive, a new receipt handle, invisible for the visibility timeout."""
        m.receives += 1
        m.handle = f"rh-{next(self._handles)}"
        m.visible_at = self.clock() + self.visibility_ms

    def ack(self, handle: str) -> None:
        self.messages = [m for m in self.messages if m.handle != handle]

    def pending(self) -> int:
        return len(self.messages)

    def next_visible(self) -> int | None:
        return min((m.visible_at for m in self.messages), default=None)


def wrapped_sweeper(
    settings: Settings,
    clock: FakeClock,
    wrap: Callable[[Any], Any],
    stores: tuple[Any, Any, Any, Any],
    dead_runs: Any,
) -> Sweeper:
    """A sweeper on ``stores`` (its run store, job store, run queue and dead-letter queue), each seen through
    ``wrap`` (a fault-injecting proxy), with Powertools run metrics; ``dead_runs`` is used as is."""
    runs, jobs, queue, dead_letters = stores
    return Sweeper(
        settings=settings,
        runs=wrap(runs),
        jobs=wrap(jobs),
        queue=wrap(queue),
        failures=Failures(
            runs=wrap(runs),
            queue=wrap(queue),
            dead_runs=dead_runs,
            settings=settings,
            clock=clock,
            metrics=PowertoolsRunMetrics(),
        ),
        clock=clock,
        metrics=PowertoolsRunMetrics(),
        dead_letters=wrap(dead_letters),
    )


@contextmanager
def observed_try(oracle: Oracle, call: TargetCall, clock: Callable[[], int]) -> Iterator[None]:
    """The try of ``call`` the block runs, observed by ``oracle``: started when it enters, ended when it exits
    (at ``clock()``, epoch ms), ok unless it raised."""
    started: Try = oracle.try_started(call.job_id, call.run_id, clock())
    ok = False
    try:
        yield
        ok = True
    finally:
        oracle.try_ended(started, ok, clock())


def command_answer(target: Any) -> str:
    """What the observed ``command`` target answers: ``fail`` raises ``TargetFailed``, any other returns "ok"."""
    if target.name == "fail":
        raise TargetFailed("failing on purpose")
    return "ok"


class OracleExecutor:
    """The ``command`` executor: each try is observed by the oracle (start, end, success); the command ``fail``
    fails; a hook registered for a run id (``World.during``) runs inside its next try."""

    def __init__(self, world: World) -> None:
        self.world = world

    def execute(self, target: Any, call: TargetCall) -> str:
        world = self.world
        with observed_try(world.oracle, call, world.clock):
            hook = world.hooks.pop(call.run_id, None) or world.hooks.pop(call.job_id, None)
            if hook is not None:
                hook()
            return command_answer(target)


@dataclass(frozen=True)
class WorldComponents(Components):
    """The composition root (``jobsched.runtime.wiring.Components``) on the world's fakes: each store and queue call goes
    through the world's faults as component ``name``; dead runs go to the backend's notifier fake, alerts to
    the world's ``MemoryAlerts``. ``aws`` is None: nothing built from it needs AWS clients."""

    world: Any = None
    name: str = ""

    def jobs(self) -> Any:
        return FaultyPort(self.world.jobs, self.name, self.world)

    def runs(self) -> Any:
        return FaultyPort(self.world.runs, self.name, self.world)

    def run_queue(self) -> Any:
        return FaultyPort(self.world.queue, self.name, self.world)

    def notifier(self) -> Any:
        return self.world.backend.dead_runs

    def alert_publisher(self) -> Any:
        return self.world.alerts


@dataclass
class World:
    """See the module docstring. ``settings`` defaults to the fakes' (one due shard)."""

    settings: Settings | None = None
    start_ms: int = T0
    loops_count: int = 2
    limits: TickLimits = field(default_factory=lambda: TickLimits(threads=1))

    def __post_init__(self) -> None:
        backend = memory_backend()
        self.settings = self.settings or backend.settings
        self.backend = backend
        self.clock = FakeClock(self.start_ms)
        self.oracle = Oracle(retention_ms=self.settings.retention_days * 86_400_000, limits=self.limits)
        self.faults: list[Fault] = []
        self.hooks: dict[str, Callable[[], None]] = {}
        self.dead_letters = MemoryDeadLetters()
        self.alerts = MemoryAlerts()
        stale_ms = (self.settings.heartbeat_stale_s + self.settings.heartbeat_interval_s) * 1000
        self.queue = SimQueue(self.clock, self.dead_letters, stale_ms)
        self.jobs, self.runs = backend.jobs, backend.runs
        backend.idempotency.bind_invocation(api_context())
        self.service = self.make_service()
        self.worker = self.make_worker()
        stores = (self.runs, self.jobs, self.queue, self.dead_letters)
        self.sweeper = wrapped_sweeper(
            self.settings,
            self.clock,
            lambda port: FaultyPort(port, "sweeper", self),
            stores,
            backend.dead_runs,
        )
        self.loops: dict[str, SchedulerLoop] = {}
        self.names = itertools.count()
        for name in "ab"[: self.loops_count]:
            self.start_loop(name)
        self.ticking_clean = True

    # --- plumbing --------------------------------------------------------------------------------------

    def call(self, component: str, method: str, real: Callable[[], Any], args: tuple[Any, ...]) -> Any:
        """One port call of ``component`` under the pending faults (see ``Fault``)."""
        fault = next((f for f in self.faults if f.matches(component, method)), None)
        if fault is not None and fault.seen < fault.nth:
            fault.seen += 1
            fault = None
        if fault is not None:
            fault.fired = True
            if fault.mode == "crash_before":
                raise Crash(f"{component} died before {method}")
            if fault.mode == "error_before":
                raise _transient(component, method, args)
        value = real()
        if component == "tick" and method == "send":
            for message in args[0]:
                self.oracle.sent(message.job_id, message.scheduled_for, self.clock())
        if fault is not None:
            if fault.mode == "crash_after":
                raise Crash(f"{component} died after {method}")
            if fault.mode == "error_after":
                raise _transient(component, method, args)
            if fault.mode == "hook" and fault.action is not None:
                fault.action()
        return value

    def fault(
        self, component: str | None, method: str | None, mode: str, nth: int = 0, action: Any = None
    ) -> None:
        self.faults.append(Fault(component, method, mode, nth, action))

    def make_service(self) -> JobService:
        """The API's use cases on the world's settings, their store and queue calls made as component ``api``."""
        assert self.settings is not None
        return JobService(
            settings=self.settings,
            jobs=FaultyPort(self.jobs, "api", self),
            runs=FaultyPort(self.runs, "api", self),
            queue=FaultyPort(self.queue, "api", self),
            clock=self.clock,
            idempotency=self.backend.idempotency,
            partition_marks=self.backend.control,
        )

    def make_worker(self, *, waiter: Any = None, name: str = "worker") -> Worker:
        """A worker built as the composition root builds it (``Components.worker``), its store and queue calls
        made as component ``name`` (see ``Fault``), its tries observed by the oracle."""
        assert self.settings is not None
        components = WorldComponents(self.settings, None, self.clock, self.clock.sleep, world=self, name=name)
        return components.worker(targets=Targets(command=OracleExecutor(self)), waiter=waiter)

    def start_loop(self, name: str, settings: Settings | None = None) -> None:
        old = self.loops.pop(name, None)
        if old is not None:
            old.scheduler.close()
        settings = settings or self.settings
        # as ``wiring.scheduler_group`` builds it: reading as many due shards as any deployment filed entries in
        read_shards, _ = self.backend.control.raise_shard_high_water(settings.due_shards)
        scheduler = Scheduler(
            partition=0,
            jobs=FaultyPort(self.jobs, "tick", self),
            runs=FaultyPort(self.runs, "tick", self),
            queue=FaultyPort(self.queue, "tick", self),
            control=FaultyPort(self.backend.control, "tick", self),
            config=tick_config(settings),
            positions=JsonPositions(),
            clock=self.clock,
            limits=self.limits,
            read_shards=read_shards,
        )
        lease = LeaderLease(
            self.backend.control,
            0,
            f"world-{name}-{next(self.names)}",
            clock=self.clock,
            ttl_ms=int(settings.lease_ttl_s * 1000),
        )
        self.loops[name] = SchedulerLoop(scheduler, lease, clock=self.clock, sleep=self.clock.sleep)

    def close(self) -> None:
        for loop in self.loops.values():
            loop.scheduler.close()

    # --- the owner's actions (recorded in the oracle first) ----------------------------------------------

    def create(self, schedule: str, **fields: Any) -> str:
        """Register a job (``command: echo`` unless ``command`` is given) and record its spec; its id."""
        body = {"name": f"j{len(self.oracle.jobs)}", "schedule": schedule, "command": "echo", **fields}
        body.setdefault("timeout_s", 840)
        now = self.clock()
        job = self.service.create_job(OWNER, JobCreate.model_validate(body)).job
        self.oracle.created(job.id, _spec(body), now)
        return job.id

    def patch(self, job_id: str, **fields: Any) -> None:
        now = self.clock()
        self.service.update_job(OWNER, job_id, JobPatch.model_validate(fields))
        self.oracle.changed(job_id, now, **{SPEC_FIELDS[k]: v for k, v in fields.items() if k in SPEC_FIELDS})

    def pause(self, job_id: str) -> None:
        now = self.clock()
        self.service.pause_job(OWNER, job_id)
        self.oracle.paused(job_id, now)

    def resume(self, job_id: str) -> None:
        now = self.clock()
        self.service.resume_job(OWNER, job_id)
        self.oracle.resumed(job_id, now)

    def delete(self, job_id: str) -> None:
        now = self.clock()
        self.service.delete_job(OWNER, job_id)
        self.oracle.deleted(job_id, now)

    def trigger(self, job_id: str, key: str | None = None) -> None:
        self.oracle.triggered(job_id, key, self.clock())
        self.service.trigger_job(OWNER, job_id, idempotency_key=key)

    def backfill(self, job_id: str, start_ms: int, end_ms: int) -> Any:
        now = self.clock()
        request = BackfillRequest.model_validate({"start": from_ms(start_ms), "end": from_ms(end_ms)})
        result, _ = self.service.backfill(OWNER, job_id, request)
        self.oracle.backfilled(job_id, start_ms, end_ms, now)
        return result

    def rerun(self, job_id: str, scheduled_for: int) -> None:
        now = self.clock()
        self.service.reruns.retry_run(OWNER, job_id, run_id(job_id, scheduled_for))
        self.oracle.rerun(job_id, scheduled_for, now)

    def during(self, key: str, action: Callable[[], None]) -> None:
        """Run ``action`` inside the next try of run id (or job id) ``key``."""
        self.hooks[key] = action

    # --- time, schedulers, workers, sweeper -------------------------------------------------------------

    def second(self) -> None:
        self.clock.now_ms = (self.clock.now_ms // 1000 + 1) * 1000 + 5

    def step_loops(self) -> list[Any]:
        """Step each loop once (a crash restarts its process); a tick with no fault pending is clean."""
        results = []
        for name in sorted(self.loops):
            clean = not any(not f.fired and f.component in (None, "tick") for f in self.faults)
            try:
                result = self.loops[name].step()
            except Crash:
                self.start_loop(name)
                continue
            if result is None:
                continue
            results.append(result)
            if clean and not result.aborted and not result.errors and not result.malformed:
                self.oracle.ticked(result.now, complete=result.lag_ms == 0)
        return results

    def tick(self, seconds: int = 1) -> None:
        for _ in range(seconds):
            self.second()
            self.step_loops()

    def downtime(self, seconds: int) -> None:
        self.clock.advance(seconds * 1000)

    def deliver(self, limit: int = 100, *, worker: Worker | None = None, only: str | None = None) -> int:
        """Receive up to ``limit`` visible messages (of job ``only``, if given) and hand each to a worker; a
        message whose delivery failed (an error, a crash) stays and comes back after its visibility."""
        worker = worker or self.worker
        taken = [m for m in self.queue.receive(limit) if only is None or m.message.job_id == only]
        if taken:
            worker.hold([m.handle for m in taken])
        for m in taken:
            self.hand(worker, m)
        return len(taken)

    def deliver_fire(
        self, job_id: str, fire: int, *, worker: Worker | None = None, specs: Any = None
    ) -> None:
        """Receive the visible message of run ``(job_id, fire)`` alone and hand it to a worker (with the batch
        ``specs`` it read earlier, if given); raises AssertionError when there is none."""
        worker = worker or self.worker
        now = self.clock()
        m = next(
            (
                m
                for m in self.queue.messages
                if (m.message.job_id, m.message.scheduled_for) == (job_id, fire) and m.visible_at <= now
            ),
            None,
        )
        assert m is not None, f"no visible message of {run_id(job_id, fire)}"
        self.queue.take(m)
        self.hand(worker, m, specs)

    def hand(self, worker: Worker, m: InFlight, specs: Any = None) -> None:
        """Hand the received message ``m`` to ``worker`` (with the batch ``specs`` it read earlier, if given) and
        acknowledge it once handled; one whose delivery failed (an error, a crash) stays on the queue."""
        delivery = Delivery(
            m.message, worker=f"w-{m.handle}", receipt_handle=m.handle, receive_count=m.receives
        )
        try:
            worker.handle(delivery, specs)
        except (Deferred, StoreUnavailable, ConnectionError, Crash):
            return
        self.queue.ack(m.handle)

    def sweep(self) -> Any:
        try:
            return self.sweeper.sweep()
        except Crash:
            return None

    def settle(self, max_seconds: int = 900) -> None:
        """Clean seconds (no faults left) of ticks, deliveries and a sweep each minute until the loops have
        caught up and no message is pending (or ``max_seconds`` passed)."""
        self.faults = [f for f in self.faults if f.mode == "hook" and not f.fired]
        for second in range(max_seconds):
            self.second()
            results = self.step_loops()
            while self.deliver():
                pass
            if second % 60 == 59:
                self.sweep()
            caught_up = results and all(r.lag_ms == 0 for r in results)
            if second >= 3 and caught_up and not self.queue.pending() and not self.dead_letters.letters:
                break
            if second >= 3 and caught_up and self.dead_letters.letters:
                self.sweep()

    def run_for(self, seconds: int) -> None:
        """``seconds`` clean seconds: ticks, every visible message delivered, a sweep each minute."""
        for second in range(seconds):
            self.second()
            self.step_loops()
            while self.deliver():
                pass
            if second % 60 == 59:
                self.sweep()

    def redeploy(self, settings: Settings) -> None:
        """Every component restarted with ``settings`` on the same stores and queues (a deployment change)."""
        self.settings = settings
        self.service = self.make_service()
        self.worker = self.make_worker()
        for name in list(self.loops):
            self.start_loop(name, settings)

    def expire(self) -> int:
        """Rows and locks past their retention (``expires_at_s``) disappear, as DynamoDB's TTL removes them; how
        many rows went."""
        now_s = self.clock() // 1000
        gone = [r for r in self.runs.rows() if r.expires_at_s is not None and r.expires_at_s <= now_s]
        with self.runs._lock:
            for row in gone:
                self.runs._rows.pop(row.key, None)
        return len(gone)

    # --- judgement --------------------------------------------------------------------------------------

    def rows(self) -> list[RunRow]:
        return self.runs.rows()

    def row(self, job_id: str, scheduled_for: int) -> RunRow | None:
        return self.runs.get(job_id, scheduled_for)

    def check(self, *, liveness: bool = True) -> None:
        """The oracle's safety judgement, and its liveness one: no violation."""
        rows, now = self.rows(), self.clock()
        problems = self.oracle.safety(rows, now)
        if liveness:
            problems += self.oracle.liveness(rows, now)
        assert not problems, "\n".join(problems[:20])


def _spec(body: dict[str, Any]) -> Spec:
    """The oracle's spec of a job body, as the test wrote it (the API's defaults: ``jobsched.models``)."""
    retry = body.get("retry") or {}
    start = body.get("start_at")
    return Spec(
        schedule=body["schedule"],
        timezone=body.get("timezone", "UTC"),
        start_at=to_ms(datetime.fromisoformat(start)) if isinstance(start, str) else None,
        missed=body.get("missed", "catch_up"),
        grace_s=body.get("misfire_grace_s", 60),
        window_s=body.get("catch_up_window_s", 86400),
        overlap=body.get("overlap", "allow"),
        jitter_s=body.get("jitter_s", 0),
        max_attempts=retry.get("max_attempts", 4),
    )


def _transient(component: str, method: str, args: tuple[Any, ...]) -> Exception:
    """The transient error a port raises: the stores' ``StoreUnavailable``; the run queue's ``QueueSendError``
    (every message of the batch) for a send, ``ConnectionError`` for its other calls."""
    if method == "send":
        return QueueSendError(list(args[0]))
    if method in ("change_visibility", "change_visibility_batch", "receive", "delete", "notify"):
        return ConnectionError(f"transient error in {component}.{method}")
    return StoreUnavailable(f"transient error in {component}.{method}")
