"""What a run costs on AWS: the measured units and requests per run priced at on-demand list prices.

Pure arithmetic (no AWS). The price table is dated; change it here when AWS changes its prices.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SECONDS_PER_MONTH = 30 * 86_400
"""A 30-day month, the period the fixed costs are given for."""


@dataclass(frozen=True)
class Prices:
    """On-demand list prices, us-east-1, USD.

    Sources (AWS pricing pages, as of ``as_of``): "Amazon DynamoDB pricing for on-demand capacity" (write and
    read request units; the on-demand prices in effect since the reduction of 2024-11-01), "Amazon SQS
    pricing" (standard queue requests beyond the free tier; every 64 KB chunk of a payload is one request),
    "AWS Lambda pricing" (requests, and duration on x86 in the first pricing tier).
    """

    as_of: str = "2024-11-01"
    dynamodb_write_per_million_units: float = 0.625
    dynamodb_read_per_million_units: float = 0.125
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
