"""Design §10's load by simulation (10 million jobs, a million due at 00:00): the scheduler's real code on
the in-memory fakes, under a latency and capacity model of DynamoDB and SQS, on a simulated clock.

What runs for real: ``SchedulerLoop.step`` (lease renewal, then ``Scheduler.tick``: the due-index reads, the
planning, the conditional run puts, the SQS batches, the fenced moves and the watermark), once each second
boundary after the previous step ends, as ``SchedulerLoop.run`` does, for N partitions, on ``MemoryJobStore``/``MemoryRunStore``/``MemoryRunQueue``/``MemoryControlStore``. What is
modelled (:class:`Model`): each request's latency, which advances the simulated clock (never a sleep); a
budget of ``key_wcu_per_s`` write units per partition key per second of simulated time, on the keys a rush
can heat (the due index's timer keys ``p#b#s#lane``, into which every move files the job's next timer item, and the sweep index's
16 ``sweep#<shard>`` keys, which only a skipped-fire row the tick puts could enter: none do, and no scheduled
run does); a write whose key is over budget (on the table or
one of its indexes: DynamoDB throttles the base write when an index cannot take it) is throttled and the
caller backs off as botocore's standard retry mode does, then fails after ``max_attempts`` (the tick leaves
that job due for the next tick). Each item is under 1 KiB, so every write is one unit. The tick's parallel
requests run on :class:`SimExecutor`, which runs them one after another but accounts time as on
``TickLimits.threads`` parallel lanes; the scheduler's CPU (``SCHEDULER_CPU_MS_PER_RUN`` per run, at the
Lambda's share of a vCPU) is one more resource those lanes queue for, one at a time (the GIL).

Partitions hash their jobs evenly and share only the sweep keys, so by default one partition is simulated
with its full share of the rush and stands for the others (:func:`sweep_weight`). The sweep runs each
configuration for the rush's first seconds and extrapolates the time to enqueue every non-jittered run from
the drain rate (steady: each tick takes the oldest ``TickLimits.max_jobs`` due entries, whatever the backlog
behind them); the ``large`` deployment preset's configuration is then simulated through the whole rush.

Idle jobs are not materialized: a due-index query reads one ``(partition, bucket, shard)`` key up to now,
so the 9 million jobs not due in the rush cost nothing there (their entries live under other buckets); their
only cost would be storage.

``python -m bench.scale_sim`` runs the sweep and prints JSON; ``make bench`` runs :func:`measure_scale_sim`.
"""

from __future__ import annotations

import argparse
import functools
import heapq
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from infra.config import DeploymentConfig
from jobsched.aws.positions import JsonPositions
from jobsched.domain.lease import LeaderLease
from jobsched.domain.loop import SchedulerLoop
from jobsched.domain.planning import TickLimits
from jobsched.domain.registration import due_entry, partition_of
from jobsched.domain.runs import sweep_shard
from jobsched.domain.tick import Scheduler
from jobsched.memory.control import MemoryControlStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.memory.queue import MemoryRunQueue
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Priority
from jobsched.observability import logger
from jobsched.ports.jobs import DueEntry, DuePageToken, DueQuery, Move, SchedulingState, Unreadable
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.runs import SWEEP_SHARDS, RunRow
from jobsched.runtime.wiring import tick_config
from jobsched.settings import Settings, memory_settings

T = TypeVar("T")

MIDNIGHT_MS = 1_798_761_600_000
"""The rush's instant, epoch ms: 2027-01-01T00:00:00Z (any whole day would do)."""
DAY_MS = 86_400_000


class Throttled(Exception):
    """A request refused for want of write capacity on ``key`` after every retry (botocore's
    ``ThrottlingException`` reaching the caller)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"throttled on {key}")
        self.key = key


# --- the simulated clock and executor ---------------------------------------------------------------


class SimClock:
    """Simulated time: ``now`` in epoch ms (a float, so sub-ms latencies add up); calling it gives int ms."""

    def __init__(self, start_ms: float) -> None:
        self.now = float(start_ms)

    def __call__(self) -> int:
        return int(self.now)

    def advance(self, ms: float) -> None:
        """Move time on by ``ms`` (>= 0)."""
        self.now += ms


class _SimFuture(Future[Any]):
    """A finished task whose result, when waited for, moves the waiter's clock to the task's end."""

    def __init__(self, executor: SimExecutor) -> None:
        super().__init__()
        self._executor = executor
        self._done_at = 0.0
        self._waited = False

    def result(self, timeout: float | None = None) -> Any:
        clock = self._executor.clock
        clock.now = max(clock.now, self._done_at)
        if not self._waited:
            self._waited = True
            self._executor._pending -= 1
        return super().result(timeout)


class SimExecutor(Executor):
    """A deterministic stand-in for the tick's thread pool on a :class:`SimClock`.

    Tasks submitted while none is outstanding start a batch at the caller's time; each task runs at once, on
    the lane (of ``workers``) free earliest, with the clock set to that lane's time, so the latencies it incurs
    land on its lane. The caller's clock stays put until it waits for a future, which moves it to that task's
    end: waiting for all of a batch ends at its longest lane, as with real threads. A batch lasts until each of
    its futures was waited for (the tick always waits for all it submitted).
    """

    def __init__(self, clock: SimClock, workers: int) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.clock = clock
        self.workers = workers
        self._lanes: list[float] = []
        self._caller_at = 0.0
        self._pending = 0  # futures of the current batch not waited for yet

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._pending == 0:
            self._caller_at = self.clock.now
            self._lanes = [self._caller_at] * self.workers
        lane = min(range(self.workers), key=self._lanes.__getitem__)
        self.clock.now = max(self._lanes[lane], self._caller_at)
        future = _SimFuture(self)
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed to the waiter, as a pool would
            future.set_exception(error)
        future._done_at = self.clock.now
        self._lanes[lane] = self.clock.now
        self.clock.now = self._caller_at
        self._pending += 1
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pending = 0


# --- the capacity and latency model -----------------------------------------------------------------


@dataclass(frozen=True)
class Latencies:
    """Per-request latency in ms (in-region, p50-like figures for DynamoDB and SQS; assumptions, not
    measurements): writes, a BatchWriteItem of up to 25 items, consistent BatchGetItem of up to 100 items, a Query (``query_ms`` plus
    ``query_item_ms`` per item returned), SQS SendMessageBatch, and the control table's lease/watermark calls."""

    put_ms: float = 5.0
    update_ms: float = 6.0
    batch_write_ms: float = 10.0
    batch_get_ms: float = 12.0
    query_ms: float = 6.0
    query_item_ms: float = 0.02
    sqs_batch_ms: float = 15.0
    control_ms: float = 5.0


SCHEDULER_CPU_MS_PER_RUN = 1.5
"""The scheduler's CPU per run on one vCPU: 1.1 ms measured by ``make bench``'s ``scheduler_cpu`` with no
backend, 1.5 ms with the loop's bookkeeping (threads, logging, lease checks), as bench/README.md's projection
assumes."""
READ_CPU_MS_PER_ENTRY = 0.015
"""The scheduler's CPU per due entry a query returns, on one vCPU, charged at the query on top of the per-run
CPU: what a full tick's read-ahead (``TickLimits.read_ahead``) costs at once, reading its entries and ordering
them in fair rounds. Measured on tests/unit/scheduler's fakes (with their call recorder): a first tick reading
31,000 entries ahead took 0.47 s more process time than one reading 1,000, about 0.015 ms an entry. For a
tick's own ``max_jobs`` it counts them a second time (15 ms a tick), on the safe side."""
TABLE_KEY = "table:jobs"
"""The model's key for the jobs table as a whole (its table-level write budget, :meth:`Model.budget`)."""
LAMBDA_MB_PER_VCPU = 1769
"""Lambda gives one vCPU at 1,769 MB, CPU in proportion to memory below it."""


@dataclass
class Model:
    """DynamoDB's per-key write budget and the callers' back-off, on a :class:`SimClock`.

    ``cpu``: each scheduler's CPU (one per partition, ``owner`` says whose the current request is): a
    request's ``cpu_ms`` runs on it one at a time (Python's GIL: the tick's threads share one core), at
    ``vcpu`` of a core, before the request's latency starts.

    ``key_wcu_per_s``: write units one partition key takes per second (DynamoDB's per-partition limit; no
    burst credit is modelled, so the model is conservative); a second is ``floor(ms / 1000)`` of simulated
    time. ``max_attempts``/``backoff_base_ms``: botocore's standard retry mode (3 attempts; it sleeps a random
    share of ``base * 2**(attempt-1)``, modelled by its mean, half of it). ``key_weight``: extra units per
    write on a key (the sweep keys are shared by all partitions, so a one-partition run can charge them for
    all). ``used[(key, second)]``: units accepted; ``throttles``: throttled attempts.
    """

    clock: SimClock
    latencies: Latencies = field(default_factory=Latencies)
    key_wcu_per_s: float = 1000.0
    max_attempts: int = 3
    backoff_base_ms: float = 1000.0
    used: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    throttles: int = 0
    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    vcpu: float = 1.0
    owner: int = 0
    cpu_free_at: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    cpu_busy_ms: float = 0.0
    table_wcu_per_s: float | None = None

    def budget(self, key: str) -> float:
        """Write units ``key`` takes in a second: ``table_wcu_per_s`` for a table's own key (``TABLE_KEY``, charged
        by every write to the table), else ``key_wcu_per_s``."""
        if key == TABLE_KEY:
            return math.inf if self.table_wcu_per_s is None else self.table_wcu_per_s
        return self.key_wcu_per_s

    def call(
        self, kind: str, latency_ms: float, writes: Sequence[tuple[str, float]] = (), *, cpu_ms: float = 0.0
    ) -> None:
        """One request of ``kind``: ``cpu_ms`` (at one vCPU) on the owner's CPU once it is free, then
        ``latency_ms``, writing ``units`` to each ``(key, units)``. Accepted when every key has the units left
        in the current second (then charged), else throttled: the caller backs off and retries. Raises
        :class:`Throttled` after ``max_attempts`` refusals."""
        if cpu_ms:
            start = max(self.clock.now, self.cpu_free_at[self.owner])
            busy = cpu_ms / self.vcpu
            self.cpu_free_at[self.owner] = start + busy
            self.cpu_busy_ms += busy
            self.clock.now = start + busy
        for attempt in range(1, self.max_attempts + 1):
            self.requests[kind] += 1
            self.clock.advance(latency_ms)
            second = int(self.clock.now // 1000)
            over = next(
                (k for k, u in writes if self.used[(k, second)] + u > self.budget(k)),
                None,
            )
            if over is None:
                for key, units in writes:
                    self.used[(key, second)] += units
                return
            self.throttles += 1
            if attempt == self.max_attempts:
                raise Throttled(over)
            self.clock.advance(self.backoff_base_ms * 2 ** (attempt - 1) / 2)

    def batch(
        self,
        kind: str,
        latency_ms: float,
        items: Sequence[T],
        *,
        key: Callable[[T], str],
        table_units: float = 0.0,
    ) -> tuple[list[T], list[T]]:
        """One batch write of ``items`` (a unit each on ``key(item)``) after ``latency_ms``: each key takes as many
        as it has units left in the current second, the rest come back unprocessed (DynamoDB's
        ``UnprocessedItems``; counted as a throttle); each accepted item also charges ``table_units`` to
        ``TABLE_KEY`` (the table-level budget). Returns ``(accepted, unprocessed)``."""
        self.requests[kind] += 1
        self.clock.advance(latency_ms)
        second = int(self.clock.now // 1000)
        accepted: list[T] = []
        unprocessed: list[T] = []
        for item in items:
            name = key(item)
            table_full = self.used[(TABLE_KEY, second)] + table_units > self.budget(TABLE_KEY)
            if table_full or self.used[(name, second)] + 1 > self.key_wcu_per_s:
                unprocessed.append(item)
            else:
                self.used[(name, second)] += 1
                self.used[(TABLE_KEY, second)] += table_units
                accepted.append(item)
        if unprocessed:
            self.throttles += 1
        return accepted, unprocessed

    def hottest(self) -> tuple[str, float]:
        """The partition key (not ``TABLE_KEY``) with the most units accepted in one second, and that many units
        (``("", 0)`` if none)."""
        keys = [kv for kv in self.used.items() if kv[0][0] != TABLE_KEY]
        if not keys:
            return "", 0.0
        (key, _), units = max(keys, key=lambda kv: kv[1])
        return key, units


# --- the fakes under the model ----------------------------------------------------------------------


def due_key(entry: DueEntry) -> str:
    """The partition key of ``entry``'s timer item: ``p<partition>#b<bucket>#s<shard>#<lane>``."""
    return f"p{entry.partition}#b{entry.bucket}#s{entry.shard}#{entry.lane}"


class SimJobStore(MemoryJobStore):
    """``MemoryJobStore`` (whose due index is kept by key, so a query costs what its key holds, as on
    DynamoDB) with each ``DueIndex`` call charged to the :class:`Model`; each move also costs ``cpu_ms`` of
    the scheduler's CPU (half a run's)."""

    def __init__(self, model: Model, cpu_ms: float = 0.0, entry_cpu_ms: float = 0.0) -> None:
        super().__init__()
        self.model = model
        self.cpu_ms = cpu_ms
        self.entry_cpu_ms = entry_cpu_ms
        self.table_weight = 1.0  # table units per write: the partitions this one stands for

    def add(self, state: SchedulingState) -> None:
        """Store a job's scheduling state directly (the rush's set-up, not a request)."""
        self.states[state.job_id] = state

    def query_due(self, query: DueQuery) -> tuple[list[DueEntry], DuePageToken | None]:
        """``MemoryJobStore.query_due`` charged as one Query reading its page, and ``entry_cpu_ms`` of the
        scheduler's CPU per entry returned."""
        page, token = super().query_due(query)
        latencies = self.model.latencies
        self.model.call(
            "Query",
            latencies.query_ms + latencies.query_item_ms * len(page),
            cpu_ms=self.entry_cpu_ms * len(page),
        )
        return page, token

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        for _ in range(math.ceil(len(job_ids) / 100)):
            self.model.call("BatchGetItem", self.model.latencies.batch_get_ms)
        return super().scheduling_states(job_ids)

    def put_timers(self, entries: Sequence[DueEntry]) -> None:
        """``MemoryJobStore.put_timers`` charged as BatchWriteItems (the tick files 25 at a time), each writing a
        unit to each entry's timer key: as on DynamoDB, the items a key over its budget cannot take come back
        unprocessed and are sent again after a back-off (:meth:`Model.batch`); raises :class:`Throttled` when some
        are still unprocessed after ``max_attempts`` requests (the tick then leaves their jobs due)."""
        pending = list(entries)
        for attempt in range(1, self.model.max_attempts + 1):
            accepted, pending = self.model.batch(
                "BatchWriteItem",
                self.model.latencies.batch_write_ms,
                pending,
                key=due_key,
                table_units=self.table_weight,
            )
            super().put_timers(accepted)
            if not pending:
                return
            if attempt < self.model.max_attempts:
                self.model.clock.advance(self.model.backoff_base_ms * 2 ** (attempt - 1) / 2)
        raise Throttled(due_key(pending[0]))

    def move(self, move: Move) -> None:
        """``MemoryJobStore.move`` charged to the model as one UpdateItem of the job's own scheduling item (a key
        of its own, which no rush heats)."""
        self.model.call(
            "UpdateItem", self.model.latencies.update_ms, [(TABLE_KEY, self.table_weight)], cpu_ms=self.cpu_ms
        )
        super().move(move)


class SimRunStore(MemoryRunStore):
    """``MemoryRunStore`` whose ``put_new`` is a PutItem charged to the model: a new queued run enters the
    sweep index (``sweep#<shard>``, one unit times ``sweep_weight``); each put costs ``cpu_ms`` of the
    scheduler's CPU (half a run's)."""

    def __init__(self, model: Model, sweep_weight: float = 1.0, cpu_ms: float = 0.0) -> None:
        super().__init__()
        self.model = model
        self.sweep_weight = sweep_weight
        self.cpu_ms = cpu_ms

    def put_new(self, row: RunRow) -> RunRow | None:
        writes = [(f"sweep#{sweep_shard(row.job_id)}", self.sweep_weight)] if row.sweep_at else []
        self.model.call("PutItem", self.model.latencies.put_ms, writes, cpu_ms=self.cpu_ms)
        return super().put_new(row)


class SimQueue(MemoryRunQueue):
    """``MemoryRunQueue`` whose batches take ``sqs_batch_ms``; records each message's enqueue instant."""

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model
        self.enqueued_at: list[tuple[float, RunMessage]] = []

    def send(self, messages: Sequence[RunMessage]) -> None:
        self.model.call("SendMessageBatch", self.model.latencies.sqs_batch_ms)
        super().send(messages)
        self.enqueued_at.extend((self.model.clock.now, m) for m in messages)


class SimControl(MemoryControlStore):
    """``MemoryControlStore`` whose lease and watermark calls take ``control_ms``."""

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model

    def _maybe_fail(self) -> None:
        self.model.call("Control", self.model.latencies.control_ms)
        super()._maybe_fail()


# --- the rush -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rush:
    """A rush: ``runs`` daily jobs (``cron(0 0 * * ? *)``) due at ``MIDNIGHT_MS``; ``jittered_share`` of them
    (every second job id, for one half) have a fixed jitter offset, spread evenly over ``(0, jitter_s)``
    seconds (as ``schedules.jitter_offset_ms`` spreads them), the others none."""

    runs: int
    jitter_s: float = 600.0
    jittered_share: float = 0.5

    def scaled(self, scale: float) -> Rush:
        """This rush shrunk ``scale`` times in count and in jitter window: the same arrival rates, in
        ``1/scale`` of the time."""
        return Rush(max(1, round(self.runs / scale)), self.jitter_s / scale, self.jittered_share)

    def jobs(self) -> list[tuple[str, int | None]]:
        """``(job_id, jitter offset ms or None when not jittered)`` of every job: ``j_<i>`` (12 digits)."""
        return _rush_jobs(self)


@functools.lru_cache(maxsize=1)
def _rush_jobs(rush: Rush) -> list[tuple[str, int | None]]:
    """:meth:`Rush.jobs`, cached: a sweep asks for the same million jobs many times."""
    n_jittered = math.floor(rush.runs * rush.jittered_share)
    out: list[tuple[str, int | None]] = []
    for i in range(rush.runs):
        # job i is jittered when i * share crosses an integer: the jittered ones interleave evenly
        k = math.floor(i * rush.jittered_share)
        jittered = math.floor((i + 1) * rush.jittered_share) > k
        offset = int((k + 0.5) * rush.jitter_s * 1000 / n_jittered) if jittered else None
        out.append((f"j_{i:012d}", offset))
    return out


def load(
    rush: Rush,
    settings: Settings,
    jobs: SimJobStore,
    partitions: Sequence[int],
    *,
    owned: Callable[[str, Rush], tuple[str | None, Priority]] | None = None,
) -> dict[str, int | None]:
    """Store the scheduling states of ``rush``'s jobs homed in ``partitions`` in ``jobs``, as the API would
    have registered them an hour before (due entry in their dispatch instant's bucket). ``owned(job_id, rush)``
    gives a job's owner and priority (default: none, ``normal``), kept in its state and its due entry. Returns
    ``job_id -> jitter offset ms`` (None: not jittered) of the jobs stored."""
    wanted = set(partitions)
    stored: dict[str, int | None] = {}
    for job_id, offset in rush.jobs():
        home = partition_of(job_id, settings.scheduler_partitions)
        if home not in wanted:
            continue
        stored[job_id] = offset
        jitter = offset or 0
        owner, priority = owned(job_id, rush) if owned else (None, Priority.NORMAL)
        jobs.add(
            SchedulingState(
                job_id=job_id,
                partition=home,
                schedule="cron(0 0 * * ? *)",
                anchor_at=MIDNIGHT_MS - DAY_MS,
                jitter_offset_ms=jitter,
                version=1,
                next_run_at=MIDNIGHT_MS,
                owner=owner,
                priority=priority,
                due=due_entry(
                    job_id,
                    MIDNIGHT_MS + jitter,
                    partition=home,
                    shards=settings.due_shards,
                    bucket_ms=settings.due_bucket_s * 1000,
                    now_ms=MIDNIGHT_MS - 3_600_000,
                    version=1,
                    owner=owner,
                    priority=priority,
                ),
            )
        )
    return stored


def sweep_weight(partitions: int, only_partition: int | None) -> float:
    """Units each of a simulated partition's sweep-index writes stands for. All partitions simulated: 1.
    One of ``partitions``: the partitions writing the same sweep keys. A job's partition and its sweep shard
    come from the same hash (``stable_hash(id) % partitions``, ``% SWEEP_SHARDS``), so with ``g =
    gcd(partitions, SWEEP_SHARDS)`` a partition writes only the shards congruent to it mod ``g``, and each of
    those keys is written by ``partitions / g`` partitions alike (Chinese remainder theorem, uniform hash)."""
    if only_partition is None:
        return 1.0
    return partitions / math.gcd(partitions, SWEEP_SHARDS)


def lag_samples(dispatch: dict[str, int], enqueued: dict[str, float], *, start_ms: int) -> list[float]:
    """The scheduler's lag once a second of simulated time, from ``start_ms`` until the last run is enqueued:
    at each sample ``t``, ``t`` minus the oldest dispatch instant (``dispatch``: job id -> epoch ms) of a run
    due by ``t`` and not yet enqueued (``enqueued``: job id -> first enqueue, epoch ms; a run missing from it is
    never enqueued), else 0. Ms."""
    order = sorted(dispatch, key=lambda j: (dispatch[j], j))
    end = max((enqueued.get(j, math.inf) for j in order), default=start_ms)
    if end == math.inf:
        end = max(enqueued.values(), default=start_ms)
    samples: list[float] = []
    first = 0  # runs before it (in dispatch order) were all enqueued by the current sample
    t = float(start_ms)
    while t <= end:
        while first < len(order) and enqueued.get(order[first], math.inf) <= t:
            first += 1
        oldest = dispatch[order[first]] if first < len(order) else None
        samples.append(t - oldest if oldest is not None and oldest <= t else 0.0)
        t += 1000
    return samples


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def simulate(
    rush: Rush,
    *,
    partitions: int,
    shards: int,
    scale: float = 1.0,
    only_partition: int | None = None,
    latencies: Latencies | None = None,
    limits: TickLimits | None = None,
    horizon_s: float = 7_200.0,
    worker_run_s: float = 1.0,
    key_wcu_per_s: float = 1000.0,
    scheduler_memory_mb: int | None = LAMBDA_MB_PER_VCPU,
    cpu_ms_per_run: float = SCHEDULER_CPU_MS_PER_RUN,
    jobs_table_wcu_per_s: float | None = None,
    loader: Callable[[Rush, Settings, SimJobStore, Sequence[int]], dict[str, int | None]] | None = None,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``rush`` through ``partitions`` scheduler loops (``shards`` due shards each) from 00:00 until every
    run is enqueued or ``horizon_s`` (simulated) passes.

    ``only_partition``: simulate just this partition's jobs and loop; the others behave alike (jobs hash
    evenly), so deployment-wide rates are multiplied by ``partitions`` and the sweep keys it writes are
    charged for the partitions that share them (:func:`sweep_weight`). ``scale``: simulate ``rush.scaled(scale)`` (``1/scale`` of
    the runs over ``1/scale`` of the jitter window: the same arrival rates) and report durations times
    ``scale`` (rates as measured).

    Returns (durations in seconds from 00:00 and ms, rates per second of simulated time):
    ``enqueue_non_jittered_s`` (when not all were enqueued by the horizon: extrapolated from the drain rate so
    far, ``non_jittered_drain_runs_per_s``, and ``non_jittered_extrapolated`` says so; the lag p99 is then
    None), ``enqueue_all_s`` (None when not all were enqueued by the horizon), the
    hottest key and ``hottest_key_wcu_per_s``, ``throttled_requests``, ``scheduler_lag_ms_p99`` (from the
    simulation's ground truth, :func:`lag_samples`) and ``tick_reported_lag_ms_p99`` (the ticks' own
    ``TickResult.lag_ms``, which sees only the entries a tick read), ``dispatch_lateness_ms`` p50/p99,
    ``peak_enqueue_runs_per_s`` (whole deployment, in one second: a tick's burst) and ``lambda_concurrency``
    (that peak times ``worker_run_s``: Little's law), ``lambda_concurrency_sustained`` (the same at the
    non-jittered drain rate, which the queue smooths the bursts to), the tick count, requests by kind and ``created`` run rows (simulated
    partitions only). ``key_wcu_per_s``: the per-key write budget (:class:`Model`). ``scheduler_memory_mb``:
    the scheduler Lambda's memory, which gives its share of a vCPU; each run then costs
    ``SCHEDULER_CPU_MS_PER_RUN`` of it (None: no CPU cost, I/O only); ``scheduler_cpu_busy`` is the share of
    the time until all were enqueued that the CPU was busy. ``cpu_ms_per_run``: the scheduler's CPU per run at
    one vCPU (default ``SCHEDULER_CPU_MS_PER_RUN``). ``jobs_table_wcu_per_s``: the jobs table's write units per
    second for the whole deployment (on-demand's warm throughput, or provisioned capacity; None: unlimited), each
    move and timer put charging it a unit per partition it stands for. ``loader``: stores the jobs instead of
    :func:`load` (same arguments and result). ``detail``: when given, gets ``first_enqueued_at`` (job id ->
    epoch ms, simulated partitions only) and ``offsets`` (the loader's result).
    """
    simulated_rush = rush.scaled(scale) if scale != 1.0 else rush
    clock = SimClock(MIDNIGHT_MS - 2_000)
    vcpu = min(1.0, scheduler_memory_mb / LAMBDA_MB_PER_VCPU) if scheduler_memory_mb else 1.0
    model = Model(clock, latencies or Latencies(), key_wcu_per_s=key_wcu_per_s, vcpu=vcpu)
    model.table_wcu_per_s = jobs_table_wcu_per_s
    settings = memory_settings(scheduler_partitions=partitions, due_shards=shards)
    simulated = [only_partition] if only_partition is not None else list(range(partitions))
    weight = partitions / len(simulated)
    half_run_cpu = cpu_ms_per_run / 2 if scheduler_memory_mb else 0.0
    jobs = SimJobStore(model, half_run_cpu, READ_CPU_MS_PER_ENTRY if scheduler_memory_mb else 0.0)
    jobs.table_weight = weight
    runs = SimRunStore(model, sweep_weight(partitions, only_partition), half_run_cpu)
    queue = SimQueue(model)
    offsets = (loader or load)(simulated_rush, settings, jobs, simulated)
    control = SimControl(model)
    limits = limits or TickLimits()
    loops: list[SchedulerLoop] = []
    for p in simulated:
        lease = LeaderLease(control, p, f"sim-{p}", clock=clock, ttl_ms=int(settings.lease_ttl_s * 1000))
        scheduler = Scheduler(
            partition=p,
            jobs=jobs,
            runs=runs,
            queue=queue,
            control=control,
            config=tick_config(settings),
            positions=JsonPositions(),
            clock=clock,
            limits=limits,
            executor=SimExecutor(clock, limits.threads),
        )
        loops.append(SchedulerLoop(scheduler, lease, clock=clock))
    wake: list[tuple[float, int]] = [(clock.now, i) for i in range(len(loops))]
    tick_lags: list[int] = []
    lateness: list[int] = []
    ticks = 0
    end = MIDNIGHT_MS + horizon_s * 1000 / scale
    while wake and len(queue.enqueued_at) < len(offsets):
        at, i = heapq.heappop(wake)
        if at > end:
            break
        clock.now = at
        model.owner = i
        result = loops[i].step()
        if result is not None:
            ticks += 1
            if result.now >= MIDNIGHT_MS:
                tick_lags.append(result.lag_ms)
            lateness.extend(result.dispatch_lateness_ms)
        slept: list[float] = []
        loops[i].sleep = slept.append
        loops[i].sleep_to_next_second()
        heapq.heappush(wake, (clock.now + slept[0] * 1000, i))
    for loop in loops:
        loop.scheduler.close()

    first_at: dict[str, float] = {}
    per_second: dict[int, int] = defaultdict(int)
    for at, message in queue.enqueued_at:
        first_at.setdefault(message.job_id, at)
        per_second[int(at // 1000)] += 1
    plain = [first_at.get(j) for j, offset in offsets.items() if offset is None]
    done_plain = [a for a in plain if a is not None]
    span_s = (max(done_plain, default=MIDNIGHT_MS) - MIDNIGHT_MS) / 1000 * scale
    drain_rate = len(done_plain) * weight * scale / span_s if span_s > 0 else None

    def since_midnight_s(instants: Sequence[float | None]) -> float | None:
        if any(a is None for a in instants):
            return None
        return round((max((a or 0.0) for a in instants) - MIDNIGHT_MS) / 1000 * scale, 3)

    enqueue_plain = since_midnight_s(plain)
    extrapolated = enqueue_plain is None and drain_rate is not None
    if extrapolated and drain_rate:
        # the drain is steady: each tick takes the oldest max_jobs entries, whatever the backlog behind them
        enqueue_plain = round(len(plain) * weight * scale / drain_rate, 3)
    dispatch = {j: MIDNIGHT_MS + (offset or 0) for j, offset in offsets.items()}
    lags = lag_samples(dispatch, first_at, start_ms=MIDNIGHT_MS)
    if detail is not None:
        detail["first_enqueued_at"] = first_at
        detail["offsets"] = offsets
    hot_key, hot_units = model.hottest()
    peak_rate = max(per_second.values(), default=0) * weight
    return {
        "runs": round(len(offsets) * weight * scale),
        "simulated_runs": len(offsets),
        "partitions": partitions,
        "due_shards": shards,
        "simulated_partitions": len(simulated),
        "scale": scale,
        "enqueue_non_jittered_s": enqueue_plain,
        "non_jittered_extrapolated": extrapolated,
        "non_jittered_drain_runs_per_s": None if drain_rate is None else round(drain_rate),
        "enqueue_all_s": since_midnight_s(
            list(first_at.values()) if len(first_at) == len(offsets) else [None]
        ),
        "hottest_key": hot_key,
        "hottest_key_wcu_per_s": hot_units,
        "throttled_requests": model.throttles,
        "scheduler_lag_ms_p99": None if extrapolated else round(percentile(lags, 0.99) * scale),
        "tick_reported_lag_ms_p99": round(percentile(tick_lags, 0.99) * scale),
        "dispatch_lateness_ms": {
            "p50": round(percentile(lateness, 0.5) * scale),
            "p99": round(percentile(lateness, 0.99) * scale),
        },
        "peak_enqueue_runs_per_s": round(peak_rate),
        "lambda_concurrency": math.ceil(peak_rate * worker_run_s),
        "lambda_concurrency_sustained": None if drain_rate is None else math.ceil(drain_rate * worker_run_s),
        "ticks": ticks,
        "requests": dict(model.requests),
        "created": len({(m.job_id, m.scheduled_for) for _, m in queue.enqueued_at}),
        "scheduler_memory_mb": scheduler_memory_mb,
        "scheduler_cpu_busy": round(
            model.cpu_busy_ms / len(simulated) / max(1.0, (max(first_at.values(), default=0) - MIDNIGHT_MS)),
            3,
        ),
    }


# --- the sweep and the recommendation ---------------------------------------------------------------

DESIGN_RUSH = Rush(1_000_000, jitter_s=600.0, jittered_share=0.5)
"""Design §10's rush: 1 million runs due at 00:00 among the 10 million jobs, half with 600 s of jitter."""
ENQUEUE_TARGET_S = 60.0
"""Every non-jittered run enqueued within this, seconds after 00:00 (the rush target of bench/README.md, the same
as ``rush_fair.dispatch_non_jittered_s``'s)."""
KEY_TARGET_WCU_PER_S = 1000.0
"""No partition key above DynamoDB's per-key write limit."""
DESIGN_WORKER_RUNS_PER_S = 5000
"""The rate the workers are sized for."""


def meets_targets(result: dict[str, Any]) -> bool:
    """Whether a :func:`simulate` result meets both targets, with no request throttled."""
    done = result["enqueue_non_jittered_s"]
    return (
        done is not None
        and done <= ENQUEUE_TARGET_S
        and result["hottest_key_wcu_per_s"] <= KEY_TARGET_WCU_PER_S
        and result["throttled_requests"] == 0
    )


def sweep(
    rush: Rush,
    configs: Sequence[tuple[int, int]],
    *,
    horizon_s: float,
    latency_factors: Sequence[float] = (1.0,),
) -> list[dict[str, Any]]:
    """:func:`simulate` one partition of each ``(partitions, shards)`` with its full share of ``rush`` for
    the first ``horizon_s`` seconds (the time until every non-jittered run is enqueued extrapolated from the
    drain rate), once per latency factor (every latency multiplied by it). Each result gets
    ``latency_factor`` and ``meets_targets``."""
    out: list[dict[str, Any]] = []
    base = Latencies()
    for partitions, shards in configs:
        for factor in latency_factors:
            latencies = Latencies(**{k: v * factor for k, v in base.__dict__.items()})
            result = simulate(
                rush,
                partitions=partitions,
                shards=shards,
                only_partition=0,
                latencies=latencies,
                horizon_s=horizon_s,
            )
            result["latency_factor"] = factor
            result["meets_targets"] = meets_targets(result)
            out.append(result)
    return out


KEY_HEADROOM = 0.8
"""The recommended configuration keeps its hottest key under this share of the per-key limit."""


def recommend(results: Sequence[dict[str, Any]], *, margin_factor: float = 1.5) -> tuple[int, int] | None:
    """The ``(partitions, shards)`` to recommend: the fewest partitions, then the fewest shards, that meet the
    targets at the modelled latencies and still at ``margin_factor`` times them (a slower day must not miss
    the rush), with the hottest key under ``KEY_HEADROOM`` of the limit. None when no configuration does."""
    ok: dict[tuple[int, int], set[float]] = defaultdict(set)
    for result in results:
        if result["meets_targets"] and result["hottest_key_wcu_per_s"] <= KEY_HEADROOM * KEY_TARGET_WCU_PER_S:
            ok[(result["partitions"], result["due_shards"])].add(result["latency_factor"])
    good = [config for config, factors in ok.items() if {1.0, margin_factor} <= factors]
    return min(good) if good else None


SWEEP_CONFIGS = tuple((p, s) for p in (8, 12, 16) for s in (1, 2, 4))
"""The ``(partitions, shards)`` the sweep tries: around the ``large`` preset's (:data:`HEADLINE_PRESET`)."""
HEADLINE_PRESET = "large"
"""The deployment preset (``infra.config.SCALE_PRESETS``) whose partitions, shards and scheduler memory the headline
figures are simulated with: what docs/deploy.md tells a deployment of design §10's load to use (10 million jobs,
116 runs a second on average, a million at 00:00)."""
DEFAULT_SCHEDULER_MEMORY_MB = 512
"""infra's default scheduler memory (``InfraOptions.scheduler_memory_mb``): about 0.29 vCPU."""


def measure_scale_sim(*, quick: bool = False, scale: float | None = None) -> dict[str, Any]:
    """``make bench``'s ``scale_sim`` figure: the sweep of :data:`SWEEP_CONFIGS` (at 1x and 1.5x latency, 15 s
    of the rush each) with the fewest partitions that meet the targets there (``fewest_meeting_targets``), and
    the whole rush on one partition of the :data:`HEADLINE_PRESET` deployment at ``scale`` (default 1: the full
    rush; 50 with ``quick``, a smoke run), with that preset's scheduler memory. The headline keys
    (``enqueue_non_jittered_s``, ``hottest_key_wcu_per_s``, ``partitions``, ``due_shards``, ...) are the preset's;
    ``recommended``: whether the preset meets the targets at both latencies of the sweep too;
    ``at_default_scheduler_memory`` gives its drain at infra's default 512 MB."""
    preset = DeploymentConfig.from_context({"scale": HEADLINE_PRESET})
    partitions, shards = preset.settings.scheduler_partitions, preset.settings.due_shards
    memory = preset.infra.scheduler_memory_mb
    configs = SWEEP_CONFIGS[:2] if quick else SWEEP_CONFIGS
    results = sweep(DESIGN_RUSH, configs, horizon_s=5 if quick else 15, latency_factors=(1.0, 1.5))
    chosen = recommend(results)
    headline = simulate(
        DESIGN_RUSH,
        partitions=partitions,
        shards=shards,
        scale=scale or (50.0 if quick else 1.0),
        only_partition=0,
        scheduler_memory_mb=memory,
    )
    default_memory = simulate(
        DESIGN_RUSH,
        partitions=partitions,
        shards=shards,
        only_partition=0,
        horizon_s=5 if quick else 15,
        scheduler_memory_mb=DEFAULT_SCHEDULER_MEMORY_MB,
    )
    headline["at_default_scheduler_memory"] = {
        k: default_memory[k]
        for k in ("scheduler_memory_mb", "enqueue_non_jittered_s", "non_jittered_drain_runs_per_s")
    }
    headline["meets_targets"] = meets_targets(headline)
    headline["preset"] = HEADLINE_PRESET
    headline["fewest_meeting_targets"] = list(chosen) if chosen else None
    preset_rows = [r for r in results if (r["partitions"], r["due_shards"]) == (partitions, shards)]
    headline["recommended"] = bool(preset_rows) and recommend(preset_rows) is not None
    headline["lambda_concurrency_at_design_rate"] = math.ceil(DESIGN_WORKER_RUNS_PER_S * 1.0)
    headline["sweep"] = [
        {
            k: r[k]
            for k in (
                "partitions",
                "due_shards",
                "latency_factor",
                "enqueue_non_jittered_s",
                "non_jittered_drain_runs_per_s",
                "hottest_key_wcu_per_s",
                "throttled_requests",
                "scheduler_cpu_busy",
                "meets_targets",
            )
        }
        for r in results
    ]
    return headline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_sim", description=__doc__)
    parser.add_argument("--partitions", type=int, help="simulate only this configuration (with --shards)")
    parser.add_argument("--shards", type=int, default=2, help="due shards of --partitions (default 2)")
    parser.add_argument(
        "--scale", type=float, help="simulate 1/scale of the rush in 1/scale of the time (default 1)"
    )
    parser.add_argument(
        "--memory", type=int, default=LAMBDA_MB_PER_VCPU, help="scheduler Lambda MB (default 1769)"
    )
    parser.add_argument("--all-partitions", action="store_true", help="simulate every partition, not one")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args(argv)
    logger.setLevel("ERROR")  # the tick's info lines, one per tick
    if args.partitions is None:
        out = measure_scale_sim(quick=args.quick)
    else:
        if args.partitions < 1 or args.shards < 1:
            parser.error("--partitions and --shards must be at least 1")
        scale = args.scale or (50.0 if args.quick else 1.0)
        if scale < 1:
            parser.error("--scale must be at least 1")
        out = simulate(
            DESIGN_RUSH,
            partitions=args.partitions,
            shards=args.shards,
            scale=scale,
            only_partition=None if args.all_partitions else 0,
            scheduler_memory_mb=args.memory,
        )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
