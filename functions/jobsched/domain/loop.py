"""The scheduler loop: a lease contender plus its partition's tick, once a second; partitions adopted after
``scheduler_partitions`` was lowered, and the group of loops one process runs."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Protocol

from jobsched.clock import Clock
from jobsched.domain.lateness import LatenessBoard
from jobsched.domain.lease import LeaderLease, LeaseLost
from jobsched.domain.tick import Scheduler
from jobsched.domain.tick_records import TickResult

logger = logging.getLogger(__name__)

INSTANT_TICKS_MAX = 20
"""Extra ticks a loop makes in a second, on average at most, at the instants its ticks saw due before the
next whole second (design §4.9): a token bucket refilled with one tick every ``INSTANT_TICK_GAP_MS`` and
holding ``INSTANT_TICK_BURST``."""

INSTANT_TICK_GAP_MS = 1000 // INSTANT_TICKS_MAX
"""Milliseconds per token of the instant ticks' bucket: once a burst is spent, ticks come this far apart, and
each finds every fire due by then, so no fire waits longer than this for its tick (design §4.9)."""

INSTANT_TICK_BURST = 5
"""Instant ticks a loop may make back to back (fires a few ms apart are each sent at their instant) before
they are spaced ``INSTANT_TICK_GAP_MS`` apart."""

# --- the loop -------------------------------------------------------------------------------------


class TickMetrics(Protocol):
    """Where a loop reports each tick (``PowertoolsTickMetrics`` in Lambda and local mode)."""

    def record(self, result: TickResult) -> None: ...


@dataclass
class LoopReport:
    """What a loop did: iterations, ticks as leader, runs enqueued, whether it held the lease at the end."""

    iterations: int = 0
    ticks: int = 0
    enqueued: int = 0
    skipped: int = 0
    aborted_ticks: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(eq=False)
class SchedulerLoop:
    """A lease contender plus its partition's scheduler: :meth:`step` once a second (:meth:`run`), and in
    between a tick at each instant a tick saw due before the next second (:meth:`tick_at`).

    Each step renews or acquires the lease and, while leading, ticks; each tick goes to ``tick_metrics`` and to
    ``board``, which saves the partition's lateness summary once a minute (``domain.lateness``). Local mode runs
    several of these in threads (competing for the lease); the Lambda handler runs one per invocation.
    """

    scheduler: Scheduler
    lease: LeaderLease
    _: KW_ONLY
    clock: Clock
    sleep: Callable[[float], None] = time.sleep
    tick_metrics: TickMetrics | None = None
    board: LatenessBoard | None = None
    report: LoopReport = field(default_factory=LoopReport, init=False)
    _tokens: float = field(default=float(INSTANT_TICK_BURST), init=False)
    _tokens_at: int | None = field(default=None, init=False)

    def step(self) -> TickResult | None:
        """One iteration: ensure the lease, then tick if leading. Returns the tick's result, or None as a
        standby. Errors reading the due index or the watermark end the step (the next one retries)."""
        self.report.iterations += 1
        was_leading = self.scheduler.watermark is not None
        if self.lease.ensure() is None:
            if was_leading:
                self.scheduler.on_lost()
            return None
        return self._tick(take_over=not was_leading)

    def tick_at(self, instant_ms: int) -> TickResult | None:
        """Tick again at ``instant_ms`` (epoch ms; sleeping until then), without renewing the lease (the
        step of this second did; the tick checks it before each write). For the instants a tick saw due
        before the next second (``TickResult.next_due_at``), so a fire between two seconds is dispatched at
        its instant (design §4.9). Returns the tick's result, or None when not leading or it failed."""
        now = self.clock()
        if instant_ms > now:
            self.sleep((instant_ms - now) / 1000)
        if self.scheduler.watermark is None or not self.lease.held:
            return None
        now = self.clock()
        self._tokens, self._tokens_at = self._tokens_by(now) - 1, now
        return self._tick()

    def instant_tick_at(self, instant_ms: int) -> int:
        """When this loop may tick for a fire due at ``instant_ms`` (epoch ms): that instant, or later when
        the instant ticks' bucket has no token then (``INSTANT_TICKS_MAX``; design §4.9)."""
        missing = 1 - self._tokens_by(instant_ms)
        return instant_ms if missing <= 0 else instant_ms + math.ceil(missing * INSTANT_TICK_GAP_MS)

    def _tokens_by(self, at_ms: int) -> float:
        if self._tokens_at is None:
            return float(INSTANT_TICK_BURST)
        return min(float(INSTANT_TICK_BURST), self._tokens + (at_ms - self._tokens_at) / INSTANT_TICK_GAP_MS)

    def _tick(self, *, take_over: bool = False) -> TickResult | None:
        """One tick, after ``on_leadership`` when ``take_over`` (the lease was just acquired). None when the lease
        was lost, or on any other error (logged; the next step retries)."""
        try:
            if take_over:
                self.scheduler.on_leadership(self.lease)
            result = self.scheduler.tick(self.clock(), self.lease)
        except LeaseLost:
            self.scheduler.on_lost()
            return None
        except Exception as error:
            logger.exception(
                "scheduler step failed", extra={"partition": self.scheduler.partition, "error": str(error)}
            )
            return None
        self.report.ticks += 1
        self.report.enqueued += result.enqueued
        self.report.skipped += result.skipped
        self.report.aborted_ticks += int(result.aborted)
        if result.aborted:
            self.scheduler.on_lost()
        if self.tick_metrics is not None:
            self.tick_metrics.record(result)
        if self.board is not None:
            self.board.record(result.now, result.term, result.labelled_lateness, result.top_owners)
        return result

    def sleep_to_next_second(self) -> None:
        """Sleep until the next whole second of the clock (ticks run on the second boundary)."""
        now = self.clock()
        self.sleep((1000 - now % 1000) / 1000)

    def run(self, keep_going: Callable[[], bool]) -> LoopReport:
        """Step on each second boundary while ``keep_going()``, ticking in between at the instants due before
        the next second (:func:`tick_on_instants`); release the lease at the end (so the next invocation takes
        over at once) and stop the worker threads: a group of this loop alone (:meth:`SchedulerGroup.run`).
        Returns the report."""
        SchedulerGroup([self]).run(keep_going)
        return self.report

    def stop(self) -> None:
        """Release the lease if held (the next contender takes over at once) and stop the tick's threads."""
        if self.lease.held:
            self.lease.release()
        self.scheduler.on_lost()
        self.scheduler.close()


def tick_on_instants(
    stepped: Sequence[tuple[SchedulerLoop, TickResult | None]], keep_going: Callable[[], bool]
) -> int:
    """After a second's steps, tick each loop again at the instants its ticks saw due before the next whole
    second (``TickResult.next_due_at``), earliest first, as often as each loop's bucket allows
    (``SchedulerLoop.instant_tick_at``: ``INSTANT_TICKS_MAX`` a second on average). Each such tick costs the due-index queries of an idle
    tick plus the work of the fires it finds; only fires between two whole seconds cause one. Returns the
    number of ticks made."""
    pending: dict[int, tuple[SchedulerLoop, int]] = {}
    for index, (loop, result) in enumerate(stepped):
        instant = _next_instant(loop, result)
        if instant is not None:
            pending[index] = (loop, instant)
    ticks = 0
    while pending and keep_going():
        index, (loop, instant) = min(pending.items(), key=lambda item: item[1][1])
        del pending[index]
        ticks += 1
        following = _next_instant(loop, loop.tick_at(instant))
        if following is not None:
            pending[index] = (loop, following)
    return ticks


def _next_instant(loop: SchedulerLoop, result: TickResult | None) -> int | None:
    """When ``loop`` ticks next for the instant ``result``'s tick saw due (``SchedulerLoop.instant_tick_at``);
    None when that is not before the next whole second after the tick (whose step finds it), or there is
    nothing to tick for."""
    if result is None or result.aborted or result.next_due_at is None:
        return None
    instant = loop.instant_tick_at(result.next_due_at)
    return instant if instant < (result.now // 1000 + 1) * 1000 else None


def adopted_partitions(partition: int, partitions: int, high_water: int) -> list[int]:
    """The partitions that the leader of ``partition`` (of ``partitions``) also serves: those a deployment
    with more partitions (up to ``high_water``) had and this one has not, ``q`` with ``q % partitions ==
    partition``. Their jobs keep firing from there, fenced by their own leases, until each moves home at its
    next fire (``Scheduler``, re-homing)."""
    return [q for q in range(partitions, high_water) if q % partitions == partition]


class SchedulerGroup:
    """The loops one scheduler process runs: its home partition's and the adopted ones (``adopted_partitions``),
    stepped one after another on each second boundary of the first loop's clock, then ticked at the instants
    due before the next second (:func:`tick_on_instants`)."""

    def __init__(self, loops: Sequence[SchedulerLoop]) -> None:
        if not loops:
            raise ValueError("a scheduler group needs at least its home partition's loop")
        self.loops = list(loops)

    def step(self) -> list[TickResult | None]:
        """One iteration of every loop (see ``SchedulerLoop.step``)."""
        return [loop.step() for loop in self.loops]

    def run(self, keep_going: Callable[[], bool]) -> LoopReport:
        """Step every loop on each second boundary while ``keep_going()``; stop them all at the end. Returns the
        loops' reports added up."""
        try:
            while keep_going():
                results = self.step()
                if not keep_going():
                    break
                tick_on_instants(list(zip(self.loops, results, strict=True)), keep_going)
                if not keep_going():
                    break
                self.loops[0].sleep_to_next_second()
        finally:
            for loop in self.loops:
                loop.stop()
        total = LoopReport()
        for loop in self.loops:
            for name, value in loop.report.as_dict().items():
                setattr(total, name, getattr(total, name) + value)
        return total
