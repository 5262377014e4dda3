"""The cost formula of the benchmarks and the target checks of the results document."""

from __future__ import annotations

import pytest

from bench.cost import (
    PRICES,
    PartitionIdle,
    PerRun,
    Prices,
    cost_per_million_runs,
    fixed_cost_per_partition_month,
)
from bench.report import TARGETS, Target, lookup


def test_cost_per_million_runs_prices_each_unit() -> None:
    # Given 8 write units, 0.5 read units, 0.3 SQS requests per run and a full batch of 10 runs per
    # 200 ms worker invocation at 512 MB
    per_run = PerRun(
        write_units=8,
        read_units=0.5,
        sqs_requests=0.3,
        worker_batch_size=10,
        worker_duration_ms=200,
        worker_memory_mb=512,
    )
    cost = cost_per_million_runs(per_run)
    # Then each item is units x price per million units
    assert cost["dynamodb_writes"] == pytest.approx(8 * 0.625)
    assert cost["dynamodb_reads"] == pytest.approx(0.5 * 0.125)
    assert cost["sqs"] == pytest.approx(0.3 * 0.40)
    assert cost["lambda_requests"] == pytest.approx(0.1 * 0.20)
    # 100,000 invocations x 0.2 s x 0.5 GB = 10,000 GB-s
    assert cost["lambda_duration"] == pytest.approx(10_000 * 0.0000166667)
    assert cost["total"] == pytest.approx(sum(v for k, v in cost.items() if k != "total"))


def test_cost_follows_the_price_table() -> None:
    per_run = PerRun(1, 1, 1, 1, 0, 128)
    doubled = Prices(
        dynamodb_write_per_million_units=2 * PRICES.dynamodb_write_per_million_units,
        dynamodb_read_per_million_units=2 * PRICES.dynamodb_read_per_million_units,
        sqs_per_million_requests=2 * PRICES.sqs_per_million_requests,
        lambda_per_million_requests=2 * PRICES.lambda_per_million_requests,
        lambda_per_gb_second=2 * PRICES.lambda_per_gb_second,
    )
    assert cost_per_million_runs(per_run, doubled)["total"] == pytest.approx(
        2 * cost_per_million_runs(per_run)["total"]
    )


def test_cost_rejects_an_empty_batch() -> None:
    with pytest.raises(ValueError):
        cost_per_million_runs(PerRun(1, 1, 1, 0, 100, 512))


def test_fixed_cost_of_a_partition() -> None:
    # Given a 512 MB scheduler billed 67 s each minute, and an idle tick of 3 read units and 1 write unit
    idle = PartitionIdle(
        scheduler_memory_mb=512, invocation_s=67, read_units_per_tick=3, write_units_per_tick=1
    )
    cost = fixed_cost_per_partition_month(idle)
    # Then: 43,200 invocations a month, 43,200 x 67 s x 0.5 GB of duration, 2,592,000 ticks of units
    assert cost["lambda_requests"] == pytest.approx(43_200 * 0.20 / 1e6)
    assert cost["lambda_duration"] == pytest.approx(43_200 * 67 * 0.5 * 0.0000166667)
    assert cost["dynamodb_reads"] == pytest.approx(2_592_000 * 3 * 0.125 / 1e6)
    assert cost["dynamodb_writes"] == pytest.approx(2_592_000 * 1 * 0.625 / 1e6)
    assert cost["total"] == pytest.approx(sum(v for k, v in cost.items() if k != "total"))


def test_targets_pass_miss_and_missing() -> None:
    results = {"a": {"b": 2.0}}
    assert lookup(results, "a.b") == 2.0
    assert lookup(results, "a.c") is None
    assert Target("t", "a.b", "<=", 2.0).check(results)["pass"] is True
    assert Target("t", "a.b", "<=", 1.9).check(results)["pass"] is False
    assert Target("t", "a.b", ">=", 2.5).check(results)["pass"] is False
    assert Target("t", "a.x", ">=", 1).check(results)["pass"] is None


def test_every_issue_target_is_checked() -> None:
    keys = {t.key for t in TARGETS}
    assert keys == {
        "requests_per_run.scheduler",
        "requests_per_run.worker",
        "idle_poll.growth_ratio",
        "rush.efficiency_vs_raw",
        "cost_usd_per_million_runs.total",
        "wcu_per_run.ratio_32KiB_to_1KiB",
    }
