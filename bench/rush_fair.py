"""Issue item 4's rush modelled to the start of each run (``rush_fair`` in ``bench/results.json``).

The seed's scenario: 1,000,000 daily jobs due at 00:00:00 UTC among 10 million, half jittered over 600 s; one
owner (``big``) holds 900,000 of them, 99 owners share the other 100,000; 1,000 of the small owners' jobs are
``high``. Two halves:

- **dispatch**: the scheduler's real tick (``SchedulerLoop.step`` over ``Scheduler.tick``, with its
  ``dispatch_order``: high first, then owners in turn) on the in-memory fakes under :mod:`bench.scale_sim`'s
  latency, CPU and write-capacity model, plus the jobs table's table-level write budget
  (``jobs_table_wcu_per_s``), gives each run's enqueue instant;
- **workers** (:func:`start_runs`): a fluid model of the SQS event source and the worker Lambda on those
  instants: the event source's concurrency (its start, its ramp per minute, its ceiling and the account's), a
  batch of 10 per invocation lasting its overhead plus its slowest target, a new execution environment's cold
  start, the runs table's write budget (2 units per run: claim and success) and, with ``fair_queue``, SQS fair
  queues' noisy-tenant rule. Each run's start is when its target call begins.

Every constant is a field of :class:`Workers` or :class:`Config` with its source in its docstring and in
bench/README.md ("The rush to the start of each run"). Start lateness = start minus the run's dispatch instant
(``scheduled_for`` plus the job's jitter offset).

One partition is simulated and stands for the others (jobs hash evenly), as in :mod:`bench.scale_sim`; each of
its runs stands for ``partitions * scale`` runs of the deployment in the worker model.
"""

from __future__ import annotations

import argparse
import functools
import heapq
import json
import math
import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from bench.scale_sim import (
    MIDNIGHT_MS,
    READ_CPU_MS_PER_ENTRY,
    SCHEDULER_CPU_MS_PER_RUN,
    Rush,
    SimJobStore,
    load,
    simulate,
)
from infra.config import (
    ON_DEMAND_WARM_READ_UNITS,
    ON_DEMAND_WARM_WRITE_UNITS,
    SCHEDULER_CONCURRENCY_PER_PARTITION,
    DeploymentConfig,
)
from jobsched.models import Priority
from jobsched.observability import logger
from jobsched.settings import Settings

BIG_OWNER = "big"
"""The owner of 90 % of the rush."""
SMALL_OWNERS = 99
"""Owners sharing the other 10 %: ``team-01`` .. ``team-99``."""
SMALL_EVERY = 20
"""Of each 20 consecutive jobs, the first two (one not jittered, one jittered: ``Rush.jobs`` jitters the odd
ones) are a small owner's: 10 % of the rush, half of it jittered, as the big owner's."""


@dataclass(frozen=True)
class FairRush:
    """The scenario on top of :class:`~bench.scale_sim.Rush`: ``high`` of the small owners' jobs are ``high``
    (every ``k``-th pair of small jobs, so half of them jittered)."""

    rush: Rush = field(default_factory=lambda: Rush(1_000_000, jitter_s=600.0, jittered_share=0.5))
    high: int = 1_000

    def owner(self, index: int) -> str:
        """The owner of job ``j_<index>``."""
        if index % SMALL_EVERY < 2:
            return f"team-{(index // SMALL_EVERY) % SMALL_OWNERS + 1:02d}"
        return BIG_OWNER

    def priority(self, index: int, runs: int) -> Priority:
        """The priority of job ``j_<index>`` of a rush of ``runs`` (this one possibly scaled down)."""
        pairs = runs // SMALL_EVERY
        high_pairs = max(1, round(self.high * runs / self.rush.runs / 2))
        every = max(1, pairs // high_pairs)
        if index % SMALL_EVERY < 2 and (index // SMALL_EVERY) % every == 0:
            return Priority.HIGH
        return Priority.NORMAL


def job_index(job_id: str) -> int:
    """The index ``i`` of a rush job id ``j_<i>`` (12 digits)."""
    return int(job_id[2:])


Loader = Callable[[Rush, Settings, SimJobStore, Sequence[int]], dict[str, int | None]]
"""What :func:`bench.scale_sim.simulate` takes as its ``loader``."""


def fair_loader(scenario: FairRush, *, owners: bool) -> Loader:
    """A :func:`bench.scale_sim.simulate` loader storing the scenario's jobs with their priority and, with
    ``owners``, their owner (without, every entry has none: the tick's fair rounds see one owner)."""

    def owned(job_id: str, rush: Rush) -> tuple[str | None, Priority]:
        index = job_index(job_id)
        return (scenario.owner(index) if owners else None), scenario.priority(index, rush.runs)

    return functools.partial(load, owned=owned)


# --- the worker side -------------------------------------------------------------------------------


STANDARD_START = 5
"""Concurrent invocations a standard-mode SQS event source starts with when messages appear (Lambda developer
guide, "Configuring scaling behavior for SQS event source mappings")."""
STANDARD_RAMP_PER_MINUTE = 300.0
"""Concurrent invocations a standard-mode SQS event source adds a minute (same page)."""
STANDARD_CEILING = 1_250
"""The most concurrent invocations a standard-mode SQS event source reaches (same page)."""
PROVISIONED_RAMP_PER_MINUTE = 1_000.0
"""Concurrent invocations a provisioned-mode SQS event source adds a minute (AWS News Blog, "AWS Lambda enhances
event processing with provisioned mode for SQS event-source mapping", 2025-11-14: "up to 1000 ... per minute")."""
PROVISIONED_CEILING = 20_000
"""The most concurrent invocations a provisioned-mode SQS event source reaches (same post: "up to 20,000")."""
INVOCATIONS_PER_POLLER = 10
"""Concurrent invocations one provisioned event poller carries at most (Lambda developer guide, "Lambda parameters
for Amazon SQS event source mappings"); the model starts each minimum poller at one (:data:`POLLER_INVOCATIONS`
sweeps more)."""
NEW_TABLE_WCU_PER_S = ON_DEMAND_WARM_WRITE_UNITS
"""Write units a second a new on-demand DynamoDB table takes at once without warm throughput (DynamoDB developer
guide, "Understanding DynamoDB warm throughput"; ``infra.config.ON_DEMAND_WARM_WRITE_UNITS``)."""
NEW_TABLE_RCU_PER_S = ON_DEMAND_WARM_READ_UNITS
"""Read units a second a new on-demand table takes at once without warm throughput (same page;
``infra.config.ON_DEMAND_WARM_READ_UNITS``)."""


@dataclass(frozen=True)
class Workers:
    """The SQS event source and worker Lambda (sources: bench/README.md's table of constants).

    ``mode``: ``standard`` (Lambda's default scaling: ``initial_concurrency`` 5 concurrent invocations when
    messages appear, ``ramp_per_minute`` up to 300 more a minute, at most ``mode_ceiling`` 1,250) or
    ``provisioned`` (provisioned pollers: about 1,000 more a minute, at most 20,000; it starts at
    ``initial_concurrency``, the minimum pollers' worth, assumed one invocation each). ``maximum_concurrency``:
    the event source's ``MaximumConcurrency`` (2-1,000; standard mode only; None: unset).
    ``account_concurrency``: the region's concurrent executions (1,000 by default), less ``reserved_elsewhere``
    (the scheduler's reserved concurrency). ``batch_size``: runs per invocation (10). An invocation lasts
    ``overhead_s`` plus its slowest target (``target_s``, every target alike); a run's target starts
    ``before_target_s`` after its batch is received (the poll's hand-off, the claim and the spec read); an
    invocation on an execution environment never used before waits ``cold_start_s`` first.
    ``runs_table_wcu_per_s``: the runs table's writes a second (2 per run: the claim at start, the success at
    the end; None: unlimited). ``batching_window_s``: the event source's ``MaximumBatchingWindowInSeconds``
    (Lambda requires at least 1 for a batch above 10): until the oldest waiting message is that old, only full
    batches are handed over. ``fair_queue``: SQS fair queues (run messages carry the owner as
    ``MessageGroupId``): an owner with more than ``noisy_share`` of the messages in flight and at least
    ``noisy_min`` of its own is noisy, and quiet owners' messages are received first (among noisy ones, the
    owner with the fewest in flight first); an owner stays noisy until its backlog is drained (SQS also
    clears it after 5 minutes without a message sent, which a rush never reaches); without it the queue is FIFO by enqueue instant (a standard queue is
    only roughly so)."""

    mode: Literal["standard", "provisioned"] = "standard"
    maximum_concurrency: int | None = 50
    account_concurrency: int = 1_000
    reserved_elsewhere: int = 2
    initial_concurrency: int = STANDARD_START
    ramp_per_minute: float = STANDARD_RAMP_PER_MINUTE
    mode_ceiling: int = STANDARD_CEILING
    batch_size: int = 10
    overhead_s: float = 0.2
    before_target_s: float = 0.1
    target_s: float = 1.0
    cold_start_s: float = 0.5
    runs_table_wcu_per_s: float | None = float(NEW_TABLE_WCU_PER_S)
    batching_window_s: float = 0.0
    fair_queue: bool = True
    noisy_share: float = 0.10
    noisy_min: int = 30

    @property
    def ceiling(self) -> int:
        """The most concurrent invocations the event source reaches."""
        limits = [self.mode_ceiling, self.account_concurrency - self.reserved_elsewhere]
        if self.maximum_concurrency is not None:
            limits.append(self.maximum_concurrency)
        return max(1, min(limits))


@dataclass
class _Batch:
    at: float  # when its slot frees (s since midnight)
    invocations: float
    by_owner: dict[str, float]


def start_runs(
    runs: Sequence[tuple[float, float, str, bool, float]], workers: Workers, *, dt_s: float = 0.05
) -> list[tuple[float, float]]:
    """Each run's start, fluid: ``runs`` are ``(enqueued_s, due_s, owner, high, weight)`` (seconds since
    midnight; ``weight`` runs alike); returns, per run in the same order, ``(weighted mean start_s, weight)`` —
    a record split across steps starts at the weighted mean of its pieces' starts. Time advances ``dt_s`` a
    step; each step frees the slots of finished invocations, grows the concurrency by the ramp while messages
    wait, then hands the free slots' batches to the waiting messages in the queue's order."""
    order = sorted(range(len(runs)), key=lambda i: (runs[i][0], i))
    queues: dict[str, deque[list[float]]] = defaultdict(deque)  # owner -> [index, remaining]
    started_sum = [0.0] * len(runs)
    inflight: dict[str, float] = defaultdict(float)
    busy: deque[_Batch] = deque()
    busy_invocations = 0.0
    environments = 0.0  # execution environments made so far
    concurrency = float(min(workers.initial_concurrency, workers.ceiling))
    ramp = workers.ramp_per_minute / 60 * dt_s
    table_budget = math.inf if workers.runs_table_wcu_per_s is None else workers.runs_table_wcu_per_s / 2
    table_used: dict[int, float] = defaultdict(float)
    waiting = 0.0
    noisy: set[str] = set()  # noisy until its backlog is drained (SQS fair queues)
    arrived = 0
    t = 0.0 if not runs else min(0.0, runs[order[0]][0])
    duration = workers.overhead_s + workers.target_s
    remaining_total = sum(r[4] for r in runs)
    while remaining_total > 1e-9:
        while busy and busy[0].at <= t + 1e-12:
            done = busy.popleft()
            busy_invocations -= done.invocations
            for owner, n in done.by_owner.items():
                inflight[owner] -= n
        while arrived < len(order) and runs[order[arrived]][0] <= t + 1e-12:
            i = order[arrived]
            queues[runs[i][2]].append([float(i), runs[i][4]])
            waiting += runs[i][4]
            arrived += 1
        if waiting > 1e-9:
            concurrency = min(float(workers.ceiling), concurrency + ramp)
        free = math.floor(concurrency + 1e-9) - busy_invocations
        second = math.floor(t)
        capacity = min(free * workers.batch_size, table_budget - table_used[second], waiting)
        if workers.batching_window_s and capacity > 1e-9:
            oldest = min((runs[int(q[0][0])][0] for q in queues.values() if q), default=t)
            if t - oldest < workers.batching_window_s - 1e-9:
                # within the window only full batches go; a short one waits it out
                whole = math.floor(waiting / workers.batch_size + 1e-9) * workers.batch_size
                capacity = min(capacity, float(whole))
        if capacity > 1e-9:
            taken: dict[str, float] = defaultdict(float)
            cold = max(0.0, busy_invocations + capacity / workers.batch_size - environments)
            start = t + workers.before_target_s + (workers.cold_start_s if cold > 1e-9 else 0.0)
            heads = [
                ((o in noisy, inflight[o] if o in noisy else 0.0, runs[int(q[0][0])][0], o), o)
                for o, q in queues.items()
                if q
            ]
            heapq.heapify(heads)
            left = capacity
            while left > 1e-9 and heads:
                _, owner = heapq.heappop(heads)
                q = queues[owner]
                head = q[0]
                n = min(left, head[1])
                started_sum[int(head[0])] += n * start
                head[1] -= n
                left -= n
                taken[owner] += n
                if head[1] <= 1e-9:
                    q.popleft()
                if not q:
                    noisy.discard(owner)
                if q:
                    key = (owner in noisy, inflight[owner] if owner in noisy else 0.0, runs[int(q[0][0])][0])
                    heapq.heappush(heads, ((*key, owner), owner))
            used = capacity - left
            invocations = used / workers.batch_size
            for owner, n in taken.items():
                inflight[owner] += n
            if workers.fair_queue:
                total_inflight = sum(inflight.values())
                noisy |= {
                    o
                    for o, n in inflight.items()
                    if n >= workers.noisy_min and n > workers.noisy_share * total_inflight and queues[o]
                }
            busy.append(_Batch(start + duration - workers.before_target_s, invocations, dict(taken)))
            busy_invocations += invocations
            environments = max(environments, busy_invocations)
            table_used[second] += used
            waiting -= used
            remaining_total -= used
        t = round(t + dt_s, 9)
        if arrived == len(order) and waiting <= 1e-9:
            break
    return [(started_sum[i] / runs[i][4] if runs[i][4] else 0.0, runs[i][4]) for i in range(len(runs))]


def weighted_percentile(values: Sequence[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile (0 < q <= 1) of ``(value, weight)`` pairs (None when empty): the least value whose
    cumulative weight reaches ``q`` of the total."""
    if not values:
        return None
    ordered = sorted(values)
    total = sum(w for _, w in ordered)
    acc = 0.0
    for value, weight in ordered:
        acc += weight
        if acc >= q * total - 1e-9:
            return value
    return ordered[-1][0]


# --- a configuration, end to end -------------------------------------------------------------------


POLLER_INVOCATIONS = (1, 2, 3, 5, 10)
"""Concurrent invocations each minimum poller carries at the start, swept by :func:`worker_sensitivity`: the
model's ``initial_concurrency`` assumes 1; the Lambda developer guide ("Lambda parameters for Amazon SQS event
source mappings") documents each poller as handling up to 10 concurrent invokes."""
WIDER_BATCH = 20
"""The wider batch :func:`worker_sensitivity` tries (a batch above 10 needs a batching window of at least 1 s:
Lambda's ``MaximumBatchingWindowInSeconds``; a lone message then waits up to that window)."""


@dataclass(frozen=True)
class Config:
    """A deployment: ``partitions`` scheduler partitions of ``shards`` due shards, the scheduler Lambda's
    ``scheduler_memory_mb``, the jobs table's table-level ``jobs_table_wcu_per_s`` and ``jobs_table_rcu_per_s``
    (a new on-demand table's 4,000 and 12,000 without pre-warming; its warm throughput when pre-warmed) and the
    ``workers``."""

    name: str
    partitions: int
    shards: int
    scheduler_memory_mb: int
    jobs_table_wcu_per_s: float | None
    workers: Workers
    jobs_table_rcu_per_s: float = NEW_TABLE_RCU_PER_S


def deployed(name: str, scale: str, *, account_concurrency: int) -> Config:
    """The :class:`Config` a stack deployed with ``-c scale=<scale>`` (``infra.config.SCALE_PRESETS``) runs, read
    from the stack's own configuration (``DeploymentConfig``): its partitions and shards, scheduler memory, the
    worker's event source (provisioned pollers when the preset sets ``worker_min_pollers``: they start with one
    invocation each, grow by about 1,000 a minute to ``INVOCATIONS_PER_POLLER`` a poller, at most 20,000; else
    standard mode under ``worker_max_concurrency``), batch and window, the scheduler's reserved concurrency, and
    the tables' warm throughput (a new on-demand table's 4,000 write and 12,000 read units a second where unset).
    ``account_concurrency``: the account's concurrent executions, a Service Quotas value no stack sets."""
    config = DeploymentConfig.from_context({"scale": scale})
    infra, settings = config.infra, config.settings
    pollers = infra.worker_min_pollers
    reserved = SCHEDULER_CONCURRENCY_PER_PARTITION * settings.scheduler_partitions
    workers = Workers(
        mode="standard" if pollers is None else "provisioned",
        maximum_concurrency=infra.worker_max_concurrency if pollers is None else None,
        ramp_per_minute=STANDARD_RAMP_PER_MINUTE if pollers is None else PROVISIONED_RAMP_PER_MINUTE,
        mode_ceiling=STANDARD_CEILING
        if pollers is None
        else min(PROVISIONED_CEILING, infra.worker_max_pollers * INVOCATIONS_PER_POLLER),
        initial_concurrency=STANDARD_START if pollers is None else pollers,
        account_concurrency=account_concurrency,
        reserved_elsewhere=reserved if infra.reserve_scheduler_concurrency else 0,
        runs_table_wcu_per_s=float(infra.runs_warm_write_units or NEW_TABLE_WCU_PER_S),
        batch_size=infra.worker_batch_size,
        batching_window_s=float(infra.worker_batching_window_s),
    )
    return Config(
        name,
        partitions=settings.scheduler_partitions,
        shards=settings.due_shards,
        scheduler_memory_mb=infra.scheduler_memory_mb,
        jobs_table_wcu_per_s=float(infra.jobs_warm_write_units or NEW_TABLE_WCU_PER_S),
        jobs_table_rcu_per_s=float(infra.jobs_warm_read_units or NEW_TABLE_RCU_PER_S),
        workers=workers,
    )


DEFAULTS = deployed("defaults", "default", account_concurrency=Workers.account_concurrency)
"""The stack's defaults: ``Settings`` (1 partition, 4 due shards), ``InfraOptions`` (scheduler 512 MB, worker
``MaximumConcurrency`` 50, batch 10, on-demand tables with no warm throughput: a new table's 4,000 WCU/s), the
account's default 1,000 concurrent executions."""

LARGE_ACCOUNT_CONCURRENCY = 10_000
"""The account's concurrent executions ``RECOMMENDED`` assumes: a Service Quotas raise from the default 1,000
(free; docs/deploy.md, "Presets")."""

RECOMMENDED = deployed("recommended", "large", account_concurrency=LARGE_ACCOUNT_CONCURRENCY)
"""The ``-c scale=large`` preset (``infra.config.SCALE_PRESETS``): 16 partitions x 2 due shards at 1,769 MB (one
vCPU each); the jobs table pre-warmed to 40,000 WCU/s and 40,000 RCU/s (DynamoDB's default table-level quota), the
runs table to 20,000 WCU/s; the worker's event source in provisioned mode with 200 minimum pollers (up to 2,000)
and batches of 20 (so a batching window of 1 s); and an account concurrency quota of 10,000."""

SCHEDULER_READ_UNITS_PER_RUN = 1.37
"""Jobs-table read units a run costs the scheduler (``rcu_per_run.input_1KiB.scheduler`` of
``bench/results.sample.json``); the worker's spec read adds ``WORKER_READ_UNITS_PER_RUN``."""
WORKER_READ_UNITS_PER_RUN = 0.5


def dispatch_rush(config: Config, scenario: FairRush, *, fair: bool, **options: Any) -> dict[str, Any]:
    """:func:`bench.scale_sim.simulate` of ``scenario`` on ``config``'s partition 0 (its scheduler memory and jobs
    table budget), the jobs stored by :func:`fair_loader` (``fair``: with their owners); ``options`` go to
    ``simulate`` (``scale``, ``horizon_s``, ``cpu_ms_per_run``, ``detail``)."""
    return simulate(
        scenario.rush,
        partitions=config.partitions,
        shards=config.shards,
        only_partition=0,
        scheduler_memory_mb=config.scheduler_memory_mb,
        jobs_table_wcu_per_s=config.jobs_table_wcu_per_s,
        loader=fair_loader(scenario, owners=fair),
        **options,
    )


def _lateness(
    starts: Sequence[tuple[float, float]],
    records: Sequence[tuple[float, float, str, bool, float]],
    groups: Sequence[tuple[bool, bool, bool]],
) -> dict[str, list[tuple[float, float]]]:
    """``(start lateness s, weight)`` per group (``high``, ``small_owners``, ``big_owner``, ``all``) of
    :func:`start_runs`' ``starts`` of ``records`` (``groups``: each record's ``(high, small, big)``)."""
    lateness: dict[str, list[tuple[float, float]]] = {
        "high": [],
        "small_owners": [],
        "big_owner": [],
        "all": [],
    }
    for (start, w), record, (high, small, big) in zip(starts, records, groups, strict=True):
        late = (start - record[1], w)
        lateness["all"].append(late)
        if high:
            lateness["high"].append(late)
        if small:
            lateness["small_owners"].append(late)
        if big:
            lateness["big_owner"].append(late)
    return lateness


def worker_sensitivity(
    records: Sequence[tuple[float, float, str, bool, float]],
    groups: Sequence[tuple[bool, bool, bool]],
    workers: Workers,
) -> dict[str, dict[str, float | None]]:
    """The worker side's start lateness p99 (s) per group on the same enqueue instants (``records``, as
    :func:`run_config` builds them) for each assumption of :data:`POLLER_INVOCATIONS` (``workers``'
    ``initial_concurrency`` times it, provisioned mode), each with batches of 10 and of :data:`WIDER_BATCH`:
    which start of the event source, and which batch, the small owners' target needs."""
    out: dict[str, dict[str, float | None]] = {}
    base = workers
    for per_poller in POLLER_INVOCATIONS:
        for batch in (10, WIDER_BATCH):
            variant = replace(
                workers,
                initial_concurrency=base.initial_concurrency * per_poller,
                batch_size=batch,
                batching_window_s=0.0 if batch <= 10 else max(1.0, workers.batching_window_s),
            )
            lateness = _lateness(start_runs(records, variant), records, groups)
            out[f"x{per_poller}_batch{batch}"] = {
                "initial_concurrency": variant.initial_concurrency,
                **{name: _round(weighted_percentile(values, 0.99)) for name, values in lateness.items()},
            }
    return out


def run_config(
    config: Config,
    scenario: FairRush,
    *,
    fair: bool,
    scale: float,
    horizon_s: float = 7_200.0,
    sensitivity: bool = False,
) -> dict[str, Any]:
    """Dispatch ``scenario`` through ``config``'s tick (one partition, ``scale``: see :func:`simulate`) and start
    its runs on ``config.workers`` (with ``fair``: owners in the tick's entries and SQS fair queues; without:
    neither). Returns the dispatch figures and start lateness p50/p99 (s) of ``high``, ``small_owners``
    (non-jittered, ``normal``), ``big_owner`` and ``all``, and ``small_owners_if_dispatch_instant`` (the worker
    side alone: every run enqueued at its dispatch instant)."""
    detail: dict[str, Any] = {}
    dispatch = dispatch_rush(config, scenario, fair=fair, scale=scale, horizon_s=horizon_s, detail=detail)
    first_at: dict[str, float] = detail["first_enqueued_at"]
    offsets: dict[str, int | None] = detail["offsets"]
    runs_scaled = dispatch["simulated_runs"]
    weight = config.partitions * scale
    records: list[tuple[float, float, str, bool, float]] = []
    groups: list[tuple[bool, bool, bool]] = []  # (high, small non-jittered normal, big)
    scaled_runs = scenario.rush.scaled(scale).runs if scale != 1.0 else scenario.rush.runs
    missing = 0
    for job_id, offset in offsets.items():
        at = first_at.get(job_id)
        if at is None:
            missing += 1
            continue
        index = job_index(job_id)
        owner = scenario.owner(index)
        high = scenario.priority(index, scaled_runs) is Priority.HIGH
        due_s = (offset or 0) / 1000 * scale
        records.append(((at - MIDNIGHT_MS) / 1000 * scale, due_s, owner, high, weight))
        groups.append((high, owner != BIG_OWNER and not high and offset is None, owner == BIG_OWNER))
    workers = replace(config.workers, fair_queue=fair)
    starts = start_runs(records, workers)
    # the worker side alone: every run enqueued at its dispatch instant
    instant = start_runs([(r[1], *r[1:]) for r in records], workers)
    instant_small = [(s - r[1], w) for (s, w), r, g in zip(instant, records, groups, strict=True) if g[1]]
    lateness = _lateness(starts, records, groups)
    dispatch_rate = dispatch["non_jittered_drain_runs_per_s"] or 0
    return {
        "partitions": config.partitions,
        "due_shards": config.shards,
        "scheduler_memory_mb": config.scheduler_memory_mb,
        "jobs_table_wcu_per_s": config.jobs_table_wcu_per_s,
        "workers": {**asdict(workers), "ceiling": workers.ceiling},
        "scale": scale,
        "simulated_runs": runs_scaled,
        "not_enqueued": missing,
        "dispatch_non_jittered_s": dispatch["enqueue_non_jittered_s"],
        "dispatch_extrapolated": dispatch["non_jittered_extrapolated"],
        "enqueue_all_s": dispatch["enqueue_all_s"],
        "non_jittered_drain_runs_per_s": dispatch_rate,
        "throttled_requests": dispatch["throttled_requests"],
        "hottest_key_wcu_per_s": dispatch["hottest_key_wcu_per_s"],
        "jobs_table_read_units_per_s_at_drain": round(dispatch_rate * SCHEDULER_READ_UNITS_PER_RUN),
        "jobs_table_read_limit": config.jobs_table_rcu_per_s,
        **({"worker_sensitivity": worker_sensitivity(records, groups, workers)} if sensitivity else {}),
        "small_owners_if_dispatch_instant": {
            "start_lateness_s": {"p99": _round(weighted_percentile(instant_small, 0.99))}
        },
        **{
            name: {
                "start_lateness_s": {
                    "p50": _round(weighted_percentile(values, 0.5)),
                    "p99": _round(weighted_percentile(values, 0.99)),
                    "max": _round(max((v for v, _ in values), default=None)),
                },
                "runs": round(sum(w for _, w in values)),
            }
            for name, values in lateness.items()
        },
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def cpu_cliff_ms(
    config: Config, scenario: FairRush, *, target_s: float, horizon_s: float, low: float, high: float
) -> float:
    """The scheduler CPU per run (ms at one vCPU) at which ``config`` dispatches the non-jittered runs in just
    ``target_s``: bisection over :func:`simulate`'s ``cpu_ms_per_run`` (``horizon_s`` of the rush each,
    extrapolated from the drain rate as the sweep does), between ``low`` (must meet it) and ``high``; 0.05 ms
    precision. Returns ``low`` when ``low`` misses already."""

    def dispatch_s(cpu: float) -> float:
        result = dispatch_rush(config, scenario, fair=True, horizon_s=horizon_s, cpu_ms_per_run=cpu)
        return float(result["enqueue_non_jittered_s"] or math.inf)

    if dispatch_s(low) > target_s:
        return low
    while high - low > 0.05:
        mid = (low + high) / 2
        if dispatch_s(mid) <= target_s:
            low = mid
        else:
            high = mid
    return round(low, 2)


DISPATCH_TARGET_S = 60.0


def measure_rush_fair(*, quick: bool = False) -> dict[str, Any]:
    """``make bench``'s ``rush_fair``: the recommended configuration with and without fairness (full rush, one
    partition of 16), the defaults (one partition: the rush at ``scale`` 10), and the CPU cliff of the
    recommended one. With ``quick``: the same at small scale (a smoke run, not the figures)."""
    logger.setLevel("ERROR")
    started = time.process_time()
    scenario = FairRush()
    rec_scale, def_scale = (50.0, 200.0) if quick else (1.0, 10.0)
    fair = run_config(RECOMMENDED, scenario, fair=True, scale=rec_scale, sensitivity=True)
    cpu_s = time.process_time() - started
    unfair = run_config(RECOMMENDED, scenario, fair=False, scale=rec_scale)
    defaults = run_config(DEFAULTS, scenario, fair=True, scale=def_scale)
    cliff = cpu_cliff_ms(
        RECOMMENDED,
        scenario,
        target_s=DISPATCH_TARGET_S,
        horizon_s=5.0 if quick else 15.0,
        low=SCHEDULER_CPU_MS_PER_RUN,
        high=6 * SCHEDULER_CPU_MS_PER_RUN,
    )
    return {
        "scenario": {
            "runs": scenario.rush.runs,
            "jitter_s": scenario.rush.jitter_s,
            "jittered_share": scenario.rush.jittered_share,
            "big_owner_share": 1 - 2 / SMALL_EVERY,
            "small_owners": SMALL_OWNERS,
            "high": scenario.high,
        },
        "high": fair["high"],
        "small_owners": fair["small_owners"],
        "big_owner": fair["big_owner"],
        "all": fair["all"],
        "dispatch_non_jittered_s": fair["dispatch_non_jittered_s"],
        "cpu_ms_per_run": SCHEDULER_CPU_MS_PER_RUN,
        "read_cpu_ms_per_entry": READ_CPU_MS_PER_ENTRY,
        "cpu_cliff_ms_per_run": cliff,
        "cpu_margin": round(cliff / SCHEDULER_CPU_MS_PER_RUN, 2),
        "recommended": fair,
        "without_fairness": unfair,
        "big_owner_vs_without_fairness": _ratio(
            fair["big_owner"]["start_lateness_s"]["p99"], unfair["big_owner"]["start_lateness_s"]["p99"]
        ),
        "defaults": defaults,
        "model_cpu_s_one_config": round(cpu_s, 1),
        "quick": quick,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rush_fair", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args(argv)
    print(json.dumps(measure_rush_fair(quick=args.quick), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
