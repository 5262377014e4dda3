"""What a run costs on AWS: the measured units and requests per run priced at list prices, in DynamoDB's
on-demand mode and in its provisioned mode (capacity kept at a utilization target by auto scaling).

Pure arithmetic (no AWS). The price table is dated; change it here when AWS changes its prices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

SECONDS_PER_MONTH = 30 * 86_400
"""A 30-day month, the period the fixed costs are given for."""

STEADY_RUNS_PER_S = 10_000_000 / 86_400
"""The design's steady load: 10 million jobs firing about once a day, 115.7 runs a second on average."""


@dataclass(frozen=True)
class Prices:
    """List prices, us-east-1, USD, free tiers not counted.

    Sources (AWS pricing pages, as of ``as_of``): "Amazon DynamoDB pricing for on-demand capacity" (write and
    read request units; the on-demand prices in effect since the reduction of 2024-11-01), "Amazon DynamoDB
    pricing for provisioned capacity" (write and read capacity unit-hours, Standard table class; that
    reduction left them unchanged), "Amazon SQS pricing" (standard queue requests beyond the free tier;
    every 64 KB chunk of a payload is one request), "AWS Lambda pricing" (requests, and duration on x86 in
    the first pricing tier).
    """

    as_of: str = "2024-11-01"
    dynamodb_write_per_million_units: float = 0.625
    dynamodb_read_per_million_units: float = 0.125
    dynamodb_write_per_unit_hour: float = 0.00065
    dynamodb_read_per_unit_hour: float = 0.00013
    sqs_per_million_requests: float = 0.40
    lambda_per_million_requests: float = 0.20
    lambda_per_gb_second: float = 0.0000166667


PRICES = Prices()


@dataclass(frozen=True)
class PerRun:
    """What one run consumes. ``write_units``/``read_units``: DynamoDB request units (scheduler + worker);
    ``sqs_requests``: SendMessageBatch share, the event source's receive and delete shares;
    ``worker_batch_size``: runs per worker invocation; ``worker_duration_ms``: one invocation's duration;
    ``worker_memory_mb``: the worker function's memory."""

    write_units: float
    read_units: float
    sqs_requests: float
    worker_batch_size: float
    worker_duration_ms: float
    worker_memory_mb: int


def cost_per_million_runs(per_run: PerRun, prices: Prices = PRICES) -> dict[str, float]:
    """USD per million runs, by item and ``total``: ``dynamodb_writes``, ``dynamodb_reads``, ``sqs``,
    ``lambda_requests`` (one worker invocation per ``worker_batch_size`` runs), ``lambda_duration`` (those
    invocations' GB-seconds)."""
    if per_run.worker_batch_size <= 0:
        raise ValueError("worker_batch_size must be positive")
    invocations = 1 / per_run.worker_batch_size
    gb_seconds = invocations * per_run.worker_duration_ms / 1000 * per_run.worker_memory_mb / 1024
    items = {
        "dynamodb_writes": per_run.write_units * prices.dynamodb_write_per_million_units,
        "dynamodb_reads": per_run.read_units * prices.dynamodb_read_per_million_units,
        "sqs": per_run.sqs_requests * prices.sqs_per_million_requests,
        "lambda_requests": invocations * prices.lambda_per_million_requests,
        "lambda_duration": gb_seconds * prices.lambda_per_gb_second * 1_000_000,
    }
    return {**items, "total": sum(items.values())}


@dataclass(frozen=True)
class Provisioning:
    """How provisioned capacity is set, as the deployment's capacity settings (``infra.config.InfraOptions``)
    set it: ``target_utilization`` (0..1, consumed / provisioned, that auto scaling keeps), ``min_read`` and
    ``min_write`` (the floor of every table and index, paid even when idle), ``runs_per_s`` (the steady load
    the capacity is sized for)."""

    target_utilization: float = 0.70
    min_read: int = 5
    min_write: int = 5
    runs_per_s: float = STEADY_RUNS_PER_S


def provisioned_cost_per_million_runs(
    per_run: PerRun,
    write_units_by_table: Mapping[str, float],
    read_units_by_table: Mapping[str, float],
    tables: Iterable[str],
    provisioning: Provisioning = Provisioning(),
    prices: Prices = PRICES,
) -> dict[str, float]:
    """USD per million runs with DynamoDB in provisioned mode, by item and ``total``.

    ``write_units_by_table``/``read_units_by_table``: units per run by table or index (``"Jobs"``,
    ``"Jobs/due"``, ...); ``tables``: every table and index of the deployment (each one has its own
    provisioned capacity, so each pays its floor). Each one is provisioned at
    ``max(floor, units per run x runs_per_s / target_utilization)`` units, paid by the hour; a million runs
    take ``1e6 / runs_per_s`` seconds. SQS and Lambda cost what they cost on-demand (``cost_per_million_runs``).
    Items: ``dynamodb_writes``, ``dynamodb_reads`` (capacity above the floors), ``dynamodb_floors`` (the
    floors' share that the load does not use), ``sqs``, ``lambda_requests``, ``lambda_duration``.

    Raises ``ValueError`` for a utilization outside (0, 1], a non-positive rate, or units per run on a
    table or index not in ``tables``.
    """
    if not 0 < provisioning.target_utilization <= 1:
        raise ValueError("target_utilization must be in (0, 1]")
    if provisioning.runs_per_s <= 0:
        raise ValueError("runs_per_s must be positive")
    names = list(dict.fromkeys(tables))
    unknown = (set(write_units_by_table) | set(read_units_by_table)) - set(names)
    if unknown:
        raise ValueError(f"units per run on tables not in the deployment: {sorted(unknown)}")
    hours_per_million = 1e6 / provisioning.runs_per_s / 3600
    items = {"dynamodb_writes": 0.0, "dynamodb_reads": 0.0, "dynamodb_floors": 0.0}
    for name in names:
        for kind, units, floor, price in (
            (
                "writes",
                write_units_by_table.get(name, 0.0),
                provisioning.min_write,
                prices.dynamodb_write_per_unit_hour,
            ),
            (
                "reads",
                read_units_by_table.get(name, 0.0),
                provisioning.min_read,
                prices.dynamodb_read_per_unit_hour,
            ),
        ):
            needed = units * provisioning.runs_per_s / provisioning.target_utilization
            items[f"dynamodb_{kind}"] += needed * price * hours_per_million
            items["dynamodb_floors"] += max(0.0, floor - needed) * price * hours_per_million
    on_demand = cost_per_million_runs(per_run, prices)
    for item in ("sqs", "lambda_requests", "lambda_duration"):
        items[item] = on_demand[item]
    return {**items, "total": sum(items.values())}


def units_per_run_for_target(
    target_usd: float, cost: Mapping[str, float], write_units: float, usd_per_write_unit: float
) -> float:
    """The write units per run at which ``cost`` (a cost breakdown with ``total``) would come to
    ``target_usd`` per million runs, everything else unchanged: ``write_units - (total - target) /
    usd_per_write_unit`` (``usd_per_write_unit``: dollars per million runs one more write unit per run adds).
    Negative when the other items alone exceed the target. Raises ``ValueError`` when
    ``usd_per_write_unit`` is not positive."""
    if usd_per_write_unit <= 0:
        raise ValueError("usd_per_write_unit must be positive")
    return write_units - (cost["total"] - target_usd) / usd_per_write_unit


@dataclass(frozen=True)
class PartitionIdle:
    """What one scheduler partition consumes whatever the load. ``invocation_s``: billed seconds of one
    scheduler invocation (it ticks until shortly before its timeout); ``invocations_per_month``: one a
    minute; ``ticks_per_month``: one a second; ``read_units_per_tick``/``write_units_per_tick``: an idle
    tick's DynamoDB units (due-index queries, lease renewal, the watermark write amortized)."""

    scheduler_memory_mb: int
    invocation_s: float
    read_units_per_tick: float
    write_units_per_tick: float
    invocations_per_month: float = SECONDS_PER_MONTH / 60
    ticks_per_month: float = SECONDS_PER_MONTH


def fixed_cost_per_partition_month(idle: PartitionIdle, prices: Prices = PRICES) -> dict[str, float]:
    """USD per scheduler partition per 30-day month, by item and ``total``: the scheduler Lambda's requests
    and duration, and the idle poll's DynamoDB units. Not per run: it is paid with no runs at all."""
    gb_seconds = idle.invocations_per_month * idle.invocation_s * idle.scheduler_memory_mb / 1024
    items = {
        "lambda_requests": idle.invocations_per_month * prices.lambda_per_million_requests / 1_000_000,
        "lambda_duration": gb_seconds * prices.lambda_per_gb_second,
        "dynamodb_reads": idle.ticks_per_month
        * idle.read_units_per_tick
        * prices.dynamodb_read_per_million_units
        / 1e6,
        "dynamodb_writes": idle.ticks_per_month
        * idle.write_units_per_tick
        * prices.dynamodb_write_per_million_units
        / 1e6,
    }
    return {**items, "total": sum(items.values())}


def price_table(prices: Prices = PRICES) -> dict[str, float | str]:
    """The price table as a dict (for the results file)."""
    return asdict(prices)
