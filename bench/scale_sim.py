"""The walkthrough's scale by simulation: the scheduler's real code on the in-memory fakes, under a latency and
capacity model of DynamoDB and SQS, on a simulated clock.

What runs for real: ``SchedulerLoop.step`` (lease renewal, then ``Scheduler.tick``: the due-index reads, the
planning, the conditional run puts, the SQS batches, the fenced moves and the watermark), for every one of N
partitions, on ``MemoryJobStore``/``MemoryRunStore``/``MemoryRunQueue``/``MemoryControlStore``. What is
modelled (:class:`Model`): each request's latency, which advances the simulated clock (never a sleep); a
budget of ``key_wcu_per_s`` write units per partition key per second of simulated time, on the keys a rush
can heat (the due index's ``p#b#s`` keys, which every move deletes from and puts into, and the sweep index's
16 ``sweep#<shard>`` keys, which every new run enters); a write whose key is over budget (on the table or
one of its indexes: DynamoDB throttles the base write when an index cannot take it) is throttled and the
caller backs off as botocore's standard retry mode does, then fails after ``max_attempts`` (the tick leaves
that job due for the next tick). Each item is under 1 KiB, so every write is one unit. The tick's parallel
requests run on :class:`SimExecutor`, which runs them one after another but accounts time as on
``TickLimits.threads`` parallel lanes.

Idle jobs are not materialized: a due-index query reads one ``(partition, bucket, shard)`` key up to now,
so the 9 million jobs not due in the rush cost nothing there (their entries live under other buckets); their
only cost would be storage.

``python -m bench.scale_sim`` runs the sweep and prints JSON; ``make bench`` runs :func:`measure_scale_sim`.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jobsched.domain.lease import LeaderLease
from jobsched.domain.loop import SchedulerLoop
from jobsched.domain.planning import TickLimits
from jobsched.domain.registration import due_entry, partition_of
from jobsched.domain.tick import Scheduler
from jobsched.memory.control import MemoryControlStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.memory.queue import MemoryRunQueue
from jobsched.memory.runs import MemoryRunStore
from jobsched.ports.jobs import DueEntry, DuePageToken, SchedulingState, Unreadable
from jobsched.ports.runs import RunMessage, RunRow, sweep_shard
from jobsched.settings import Settings

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

    def __init__(self, clock: SimClock, done_at: float) -> None:
        super().__init__()
        self._clock = clock
        self._done_at = done_at

    def result(self, timeout: float | None = None) -> Any:
        self._clock.now = max(self._clock.now, self._done_at)
        return super().result(timeout)


class SimExecutor(Executor):
    """A deterministic stand-in for the tick's thread pool on a :class:`SimClock`.

    Tasks submitted while none is outstanding start a batch at the caller's time; each task runs at once, on
    the lane (of ``workers``) free earliest, with the clock set to that lane's time, so the latencies it incurs
    land on its lane. The caller's clock stays put until it waits for a future, which moves it to that task's
    end: waiting for all of a batch ends at its longest lane, as with real threads.
    """

    def __init__(self, clock: SimClock, workers: int) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.clock = clock
        self.workers = workers
        self._lanes: list[float] = []
        self._caller_at = 0.0
        self._outstanding: list[_SimFuture] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        self._outstanding = [f for f in self._outstanding if f._done_at > self.clock.now]
        if not self._outstanding or not self._lanes:
            self._caller_at = self.clock.now
            self._lanes = [self._caller_at] * self.workers
        lane = min(range(self.workers), key=self._lanes.__getitem__)
        self.clock.now = max(self._lanes[lane], self._caller_at)
        future = _SimFuture(self.clock, 0.0)
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed to the waiter, as a pool would
            future.set_exception(error)
        future._done_at = self.clock.now
        self._lanes[lane] = self.clock.now
        self.clock.now = self._caller_at
        self._outstanding.append(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._outstanding = []


# --- the capacity and latency model -----------------------------------------------------------------


@dataclass(frozen=True)
class Latencies:
    """Per-request latency in ms (in-region, p50-like figures for DynamoDB and SQS; assumptions, not
    measurements): writes, consistent BatchGetItem of up to 100 items, a Query (``query_ms`` plus
    ``query_item_ms`` per item returned), SQS SendMessageBatch, and the control table's lease/watermark calls."""

    put_ms: float = 5.0
    update_ms: float = 6.0
    batch_get_ms: float = 12.0
    query_ms: float = 6.0
    query_item_ms: float = 0.02
    sqs_batch_ms: float = 15.0
    control_ms: float = 5.0


@dataclass
class Model:
    """DynamoDB's per-key write budget and the callers' back-off, on a :class:`SimClock`.

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

    def call(self, kind: str, latency_ms: float, writes: Sequence[tuple[str, float]] = ()) -> None:
        """One request of ``kind`` taking ``latency_ms``, writing ``units`` to each ``(key, units)``. Accepted
        when every key has the units left in the current second (then charged), else throttled: the caller
        backs off and retries. Raises :class:`Throttled` after ``max_attempts`` refusals."""
        for attempt in range(1, self.max_attempts + 1):
            self.requests[kind] += 1
            self.clock.advance(latency_ms)
            second = int(self.clock.now // 1000)
            over = next(
                (k for k, u in writes if self.used[(k, second)] + u > self.key_wcu_per_s),
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

    def hottest(self) -> tuple[str, float]:
        """The key with the most units accepted in one second, and that many units (``("", 0)`` if none)."""
        if not self.used:
            return "", 0.0
        (key, _), units = max(self.used.items(), key=lambda kv: kv[1])
        return key, units


# --- the fakes under the model ----------------------------------------------------------------------


def due_key(entry: DueEntry) -> str:
    """The due index's partition key of ``entry``: ``p<partition>#b<bucket>#s<shard>``."""
    return f"p{entry.partition}#b{entry.bucket}#s{entry.shard}"


class SimJobStore(MemoryJobStore):
    """``MemoryJobStore`` with its due entries indexed by key (so a query costs what it returns, as on
    DynamoDB, not a scan of every job) and each ``DueIndex`` call charged to the :class:`Model`."""

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model
        self._keys: dict[tuple[int, int, int], dict[str, DueEntry]] = defaultdict(dict)
        self._sorted: dict[tuple[int, int, int], list[DueEntry]] = {}

    def add(self, state: SchedulingState) -> None:
        """Store a job's scheduling state directly (the rush's set-up, not a request)."""
        self.states[state.job_id] = state
        self._index(None, state.due)

    def _index(self, old: DueEntry | None, new: DueEntry | None) -> None:
        if old is not None:
            self._keys[(old.partition, old.bucket, old.shard)].pop(old.job_id, None)
        if new is not None:
            key = (new.partition, new.bucket, new.shard)
            self._keys[key][new.job_id] = new
            self._sorted.pop(key, None)

    def query_due(
        self,
        partition: int,
        bucket: int,
        shard: int,
        up_to_ms: int,
        limit: int = 500,
        after: DuePageToken | None = None,
    ) -> tuple[list[DueEntry], DuePageToken | None]:
        key = (partition, bucket, shard)
        live = self._keys.get(key, {})
        ordered = self._sorted.get(key)
        if ordered is None or len(ordered) > 2 * len(live) + 100:
            ordered = sorted(live.values(), key=lambda e: (e.due_at, e.job_id))
            self._sorted[key] = ordered
        page: list[DueEntry] = []
        more = False
        for entry in ordered:
            if entry.due_at > up_to_ms:
                break
            if live.get(entry.job_id) != entry:
                continue
            if after is not None and (entry.due_at, entry.job_id) <= after:  # type: ignore[operator]
                continue
            if len(page) == limit:
                more = True
                break
            page.append(entry)
        latencies = self.model.latencies
        self.model.call("Query", latencies.query_ms + latencies.query_item_ms * len(page))
        return page, ((page[-1].due_at, page[-1].job_id) if more else None)

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        for _ in range(math.ceil(len(job_ids) / 100)):
            self.model.call("BatchGetItem", self.model.latencies.batch_get_ms)
        return super().scheduling_states(job_ids)

    def move(
        self,
        job_id: str,
        *,
        expected_next_run_at: int,
        expected_version: int | None,
        partition: int,
        term: int,
        next_run_at: int | None,
        due: DueEntry | None,
        to_partition: int | None = None,
    ) -> None:
        stored = self.states.get(job_id)
        old = stored.due if isinstance(stored, SchedulingState) else None
        writes = [(due_key(e), 1.0) for e in (old, due) if e is not None and (old is None or old != due)]
        self.model.call("UpdateItem", self.model.latencies.update_ms, writes)
        super().move(
            job_id,
            expected_next_run_at=expected_next_run_at,
            expected_version=expected_version,
            partition=partition,
            term=term,
            next_run_at=next_run_at,
            due=due,
            to_partition=to_partition,
        )
        self._index(old, due)


class SimRunStore(MemoryRunStore):
    """``MemoryRunStore`` whose ``put_new`` is a PutItem charged to the model: a new queued run enters the
    sweep index (``sweep#<shard>``, one unit times ``sweep_weight``)."""

    def __init__(self, model: Model, sweep_weight: float = 1.0) -> None:
        super().__init__()
        self.model = model
        self.sweep_weight = sweep_weight

    def put_new(self, row: RunRow) -> RunRow | None:
        writes = [(f"sweep#{sweep_shard(row.job_id)}", self.sweep_weight)] if row.sweep_at else []
        self.model.call("PutItem", self.model.latencies.put_ms, writes)
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
    """A rush: ``runs`` daily jobs due at ``MIDNIGHT_MS``, ``jittered_share`` of them with a jitter offset
    spread evenly over ``[0, jitter_s)`` seconds (the job's fixed offset, as ``schedules.jitter_offset_ms``
    gives), the others with none."""

    runs: int
    jitter_s: float = 600.0
    jittered_share: float = 0.5


def build(
    rush: Rush, settings: Settings, model: Model, *, partitions: Sequence[int] | None = None, sweep_weight: float = 1.0
) -> tuple[SimJobStore, SimRunStore, SimQueue, dict[str, int]]:
    """The stores holding ``rush``'s jobs (``job_id -> jitter offset ms``), only those homed in ``partitions``
    (default: all). Job ``i`` is ``j_<i>``; every ``1/jittered_share``-th... the first ``runs * share`` of a
    deterministic interleaving are jittered, with offsets ``k * jitter_s / n_jittered``."""
    jobs, runs, queue = SimJobStore(model), SimRunStore(model, sweep_weight), SimQueue(model)
    n_jittered = round(rush.runs * rush.jittered_share)
    offsets: dict[str, int] = {}
    bucket_ms = settings.due_bucket_s * 1000
    wanted = set(partitions) if partitions is not None else None
    for i in range(rush.runs):
        job_id = f"j_{i:012d}"
        home = partition_of(job_id, settings.scheduler_partitions)
        # interleave: job i is jittered when i * share crosses an integer (evenly spread over the ids)
        jittered = math.floor((i + 1) * rush.jittered_share) > math.floor(i * rush.jittered_share)
        k = math.floor(i * rush.jittered_share)
        offset = int(k * rush.jitter_s * 1000 / n_jittered) if jittered and n_jittered else 0
        if wanted is not None and home not in wanted:
            continue
        offsets[job_id] = offset
        due = due_entry(
            job_id,
            MIDNIGHT_MS + offset,
            partition=home,
            shards=settings.due_shards,
            bucket_ms=bucket_ms,
            now_ms=MIDNIGHT_MS - 3_600_000,
        )
        jobs.add(
            SchedulingState(
                job_id=job_id,
                partition=home,
                schedule="cron(0 0 * * ? *)",
                anchor_at=MIDNIGHT_MS - DAY_MS,
                jitter_offset_ms=offset,
                version=1,
                next_run_at=MIDNIGHT_MS,
                due=due,
            )
        )
    return jobs, runs, queue, offsets


def sim_settings(partitions: int, shards: int) -> Settings:
    """Deployment settings for the simulation: the defaults, with ``partitions`` and ``shards`` (the
    resource names are placeholders: nothing is called)."""
    return Settings(
        jobs_table="sim-jobs",
        runs_table="sim-runs",
        control_table="sim-control",
        idempotency_table="sim-keys",
        run_queue_url="sim://runs",
        dead_run_queue_url="sim://dead",
        alerts_topic_arn="arn:aws:sns:us-east-1:000000000000:sim",
        scheduler_partitions=partitions,
        due_shards=shards,
    )


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def simulate(
    rush: Rush,
    *,
    partitions: int,
    shards: int,
    latencies: Latencies | None = None,
    limits: TickLimits | None = None,
    horizon_s: float = 3_600.0,
    only_partitions: Sequence[int] | None = None,
    worker_run_s: float = 1.0,
) -> dict[str, Any]:
    """Run the rush through ``partitions`` scheduler loops (``shards`` due shards each) from 00:00 until every
    run is enqueued or ``horizon_s`` passes. ``only_partitions``: simulate just these partitions (the others
    are identical by the hash's symmetry); the sweep keys, shared by all, are then charged for all.

    Returns seconds from 00:00 until every non-jittered run was enqueued (``enqueue_non_jittered_s``) and
    until all were (``enqueue_all_s``), the hottest key and its units in one second, throttled attempts, the
    scheduler lag p99 (``TickResult.lag_ms`` of every tick), dispatch lateness p50/p99 of the runs, peak
    enqueue rate in one second, and the Lambda concurrency that peak needs at ``worker_run_s`` per run."""
    clock = SimClock(MIDNIGHT_MS - 2_000)
    model = Model(clock, latencies or Latencies())
    settings = sim_settings(partitions, shards)
    simulated = list(only_partitions) if only_partitions is not None else list(range(partitions))
    weight = partitions / len(simulated)
    jobs, runs, queue, offsets = build(rush, settings, model, partitions=simulated, sweep_weight=weight)
    control = SimControl(model)
    limits = limits or TickLimits()
    loops: list[SchedulerLoop] = []
    for p in simulated:
        lease = LeaderLease(control, p, f"sim-{p}", clock=clock, ttl_ms=settings.lease_ttl_s * 1000)
        scheduler = Scheduler(
            partition=p,
            jobs=jobs,
            runs=runs,
            queue=queue,
            control=control,
            settings=settings,
            clock=clock,
            limits=limits,
            executor=SimExecutor(clock, limits.threads),
        )
        loops.append(SchedulerLoop(scheduler, lease, clock=clock))
    wake: list[tuple[float, int]] = [(clock.now, i) for i in range(len(loops))]
    heapq.heapify(wake)
    lags: list[int] = []
    lateness: list[int] = []
    ticks = 0
    end = MIDNIGHT_MS + horizon_s * 1000
    total = len(offsets)
    while wake and len(queue.enqueued_at) < total:
        at, i = heapq.heappop(wake)
        if at > end:
            break
        clock.now = at
        result = loops[i].step()
        if result is not None:
            ticks += 1
            if result.now >= MIDNIGHT_MS:
                lags.append(result.lag_ms)
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
    plain = [first_at.get(j) for j, off in offsets.items() if off == 0]
    done_plain = None if any(a is None for a in plain) else max((a or 0) for a in plain)
    done_all = None if len(first_at) < total else max(first_at.values())
    hot_key, hot_units = model.hottest()
    peak_rate = max(per_second.values(), default=0)
    return {
        "runs": total,
        "non_jittered": len(plain),
        "partitions": partitions,
        "due_shards": shards,
        "simulated_partitions": len(simulated),
        "enqueue_non_jittered_s": None if done_plain is None else round((done_plain - MIDNIGHT_MS) / 1000, 2),
        "enqueue_all_s": None if done_all is None else round((done_all - MIDNIGHT_MS) / 1000, 2),
        "hottest_key": hot_key,
        "hottest_key_wcu_per_s": hot_units,
        "throttled_requests": model.throttles,
        "scheduler_lag_ms_p99": _percentile(lags, 0.99),
        "dispatch_lateness_ms": {"p50": _percentile(lateness, 0.5), "p99": _percentile(lateness, 0.99)},
        "peak_enqueue_runs_per_s": peak_rate * weight,
        "lambda_concurrency_at_peak": math.ceil(peak_rate * weight * worker_run_s),
        "ticks": ticks,
        "requests": dict(model.requests),
    }
