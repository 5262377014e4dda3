"""The cost formula of the benchmarks and the target checks of the results document."""

from __future__ import annotations

from typing import Any

import pytest

from bench.cost import (
    PRICES,
    STEADY_RUNS_PER_S,
    PartitionIdle,
    PerRun,
    Prices,
    Provisioning,
    cost_per_million_runs,
    fixed_cost_per_partition_month,
    provisioned_cost_per_million_runs,
    units_per_run_for_target,
)
from bench.report import PROVISIONED_TARGET_USD, TARGETS, Target, assemble, lookup, worker_duration_on_aws_ms

PER_RUN = PerRun(
    write_units=8,
    read_units=0.5,
    sqs_requests=0.3,
    worker_batch_size=10,
    worker_duration_ms=200,
    worker_memory_mb=512,
)
"""8 write units, 0.5 read units, 0.3 SQS requests per run; a full batch of 10 runs per 200 ms worker
invocation at 512 MB."""


def test_cost_per_million_runs_prices_each_unit() -> None:
    # Given 8 write units, 0.5 read units, 0.3 SQS requests per run and a full batch of 10 runs per
    # 200 ms worker invocation at 512 MB
    cost = cost_per_million_runs(PER_RUN)
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
        "rush.efficiency_vs_backend_bound",
        "cost_usd_per_million_runs.total",
        "cost_usd_per_million_runs_provisioned.total",
        "wcu_per_run.ratio_32KiB_to_1KiB",
        "steady.runs",
        "steady.lateness_ms.p99",
        "local_tick.growth_ratio_jobs",
        "local_tick.growth_ratio_history",
        "precision.dispatch_lateness_ms.p99",
        "precision.start_lateness_ms.p99",
        "precision.early_starts",
        "archive.ratio_to_dynamodb",
        "scale_sim.enqueue_non_jittered_s",
        "rush_fair.high.start_lateness_s.p99",
        "rush_fair.small_owners.start_lateness_s.p99",
        "rush_fair.big_owner_vs_without_fairness",
        "rush_fair.dispatch_non_jittered_s",
        "rush_fair.cpu_margin",
    }


# -- provisioned capacity ----------------------------------------------------------------------------

TABLES = ("Jobs", "Jobs/due", "Runs", "Control")


def test_provisioned_cost_prices_capacity_at_the_utilization_plus_the_unused_floors() -> None:
    # Given 100 runs/s held at 50 % utilization, floors of 5 units, and 6 write units per run on Runs, 2 on
    # Jobs/due, 0.5 read units per run on Jobs (Jobs' writes and Control have no load: their floors only)
    provisioning = Provisioning(target_utilization=0.5, min_read=5, min_write=5, runs_per_s=100)
    cost = provisioned_cost_per_million_runs(
        PER_RUN, {"Runs": 6, "Jobs/due": 2}, {"Jobs": 0.5}, TABLES, provisioning
    )
    hours = 1e6 / 100 / 3600  # a million runs at 100 runs/s
    # Then the load's capacity is units x rate / utilization, by the unit-hour,
    assert cost["dynamodb_writes"] == pytest.approx((6 + 2) * 100 / 0.5 * 0.00065 * hours)
    assert cost["dynamodb_reads"] == pytest.approx(0.5 * 100 / 0.5 * 0.00013 * hours)
    # the floors the load leaves unused are paid too (4 write floors minus 2 used, 4 read floors minus 1),
    assert cost["dynamodb_floors"] == pytest.approx((2 * 5 * 0.00065 + 3 * 5 * 0.00013) * hours)
    # SQS and Lambda cost what they cost on-demand,
    on_demand = cost_per_million_runs(PER_RUN)
    for item in ("sqs", "lambda_requests", "lambda_duration"):
        assert cost[item] == on_demand[item]
    assert cost["total"] == pytest.approx(sum(v for k, v in cost.items() if k != "total"))


def test_a_floor_above_the_load_is_paid_whole() -> None:
    # Given 1 write unit per run on Control at 1 run/s (1.43 units needed at 70 %), floor 5
    provisioning = Provisioning(target_utilization=0.7, min_read=5, min_write=5, runs_per_s=1)
    cost = provisioned_cost_per_million_runs(PER_RUN, {"Control": 1}, {}, ["Control"], provisioning)
    hours = 1e6 / 3600
    # Then the table pays its 5 write units and 5 read units, used or not
    assert cost["dynamodb_writes"] + cost["dynamodb_floors"] - 5 * 0.00013 * hours == pytest.approx(
        5 * 0.00065 * hours
    )


def test_above_the_floors_the_cost_per_run_does_not_depend_on_the_rate_and_follows_the_units() -> None:
    def writes(units: float, rate: float) -> float:
        provisioning = Provisioning(runs_per_s=rate)
        return provisioned_cost_per_million_runs(PER_RUN, {"Runs": units}, {}, ["Runs"], provisioning)[
            "dynamodb_writes"
        ]

    assert writes(3, STEADY_RUNS_PER_S) == pytest.approx(writes(3, 2 * STEADY_RUNS_PER_S))
    # One write unit per run less saves its unit-hours at the utilization: 0.00065 x 1e6 / 3600 / 0.7
    assert writes(3, STEADY_RUNS_PER_S) - writes(2, STEADY_RUNS_PER_S) == pytest.approx(
        0.00065 * 1e6 / 3600 / 0.7
    )


def test_provisioned_is_cheaper_than_on_demand_at_the_steady_load() -> None:
    units = {"Runs": 5.0, "Jobs/due": 2.0, "Jobs": 1.0}
    provisioned = provisioned_cost_per_million_runs(PER_RUN, units, {"Jobs": 0.5}, TABLES)
    assert provisioned["total"] < cost_per_million_runs(PER_RUN)["total"]


@pytest.mark.parametrize(
    ("provisioning", "writes", "message"),
    [
        (Provisioning(target_utilization=0), {}, "target_utilization"),
        (Provisioning(target_utilization=1.2), {}, "target_utilization"),
        (Provisioning(runs_per_s=0), {}, "runs_per_s"),
        (Provisioning(), {"Nowhere": 1.0}, "Nowhere"),
    ],
)
def test_provisioned_cost_rejects_bad_inputs(
    provisioning: Provisioning, writes: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        provisioned_cost_per_million_runs(PER_RUN, writes, {}, TABLES, provisioning)


def test_units_per_run_for_target_gives_the_cost_of_the_target() -> None:
    # Given today's on-demand cost, when the write units per run move to the figure for a $3.50 target
    cost = cost_per_million_runs(PER_RUN)
    units = units_per_run_for_target(3.5, cost, PER_RUN.write_units, PRICES.dynamodb_write_per_million_units)
    # Then the cost at those units is the target
    at_target = PerRun(units, 0.5, 0.3, 10, 200, 512)
    assert cost_per_million_runs(at_target)["total"] == pytest.approx(3.5)
    with pytest.raises(ValueError):
        units_per_run_for_target(3.5, cost, 8, 0)


DEPLOYMENT = {
    "worker_memory_mb": 512,
    "worker_batch_size": 10,
    "scheduler_memory_mb": 512,
    "scheduler_invocation_s": 67,
    "capacity_target_utilization": 70,
    "capacity_min_read": 5,
    "capacity_min_write": 5,
}


def _paths(writes_by_path: dict[str, dict[str, float]]) -> dict[str, Any]:
    """A measurement of the bench's paths (bench.paths.measure_paths' shape) with the given write units."""
    totals = {path: sum(units.values()) for path, units in writes_by_path.items()}
    return {
        "input_bytes": 1024,
        "runs": 1200,
        "runs_per_tick": 100.0,
        "requests_per_run": {"scheduler": 2.2, "worker": 3.2, "worker_handler": 3.0, "event_source": 0.2},
        "operations": {
            "worker": {
                "dynamodb.GetItem": 1200,
                "dynamodb.UpdateItem": 2400,
                "sqs.ChangeMessageVisibilityBatch": 120,
            }
        },
        "wcu_per_run": {**totals, "total": sum(totals.values())},
        "wcu_detail_per_run": writes_by_path,
        "rcu_per_run": {"scheduler": 0.06, "worker": 0.5, "total": 0.56},
        "sqs_requests_per_run": {"scheduler": 0.1, "worker": 0.0, "event_source": 0.2},
        "worker": {
            "invocations": 120,
            "records_per_invocation": 10.0,
            "duration_ms_avg": 200.0,
            "cpu_ms_avg": 40.0,
        },
    }


def test_the_workers_duration_on_aws_is_its_own_cpu_at_the_lambdas_share_plus_the_requests_wait() -> None:
    # 40 ms of the worker's own CPU per invocation of 10 runs, at 512 MB's share of a vCPU (512 / 1769), plus the
    # critical path's waits: the batch's visibility change (an SQS request, 15 ms) and one record's GetItem and
    # two UpdateItems (3 x 6 ms; the records run concurrently)
    projected = worker_duration_on_aws_ms(_paths({}), 512)
    assert projected["cpu_ms"] == pytest.approx(40 * 1769 / 512)
    assert projected["wait_ms"] == pytest.approx(15 + 3 * 6)
    assert projected["duration_ms"] == pytest.approx(40 * 1769 / 512 + 33)
    # and the cost takes it, while the moto wall time (200 ms) gives the other figure
    results = assemble({"paths_1KiB": _paths({"worker": {"Runs": 2.0}})}, DEPLOYMENT)[
        "cost_usd_per_million_runs"
    ]
    invocations = 1_000_000 / 10
    assert results["lambda_duration"] == pytest.approx(
        invocations * projected["duration_ms"] / 1000 * 0.5 * 0.0000166667, rel=1e-4
    )
    moto_wall = invocations * 200 / 1000 * 0.5 * 0.0000166667
    assert results["total_with_moto_wall_duration"] == pytest.approx(
        results["total"] - results["lambda_duration"] + moto_wall, rel=1e-4
    )


def test_a_batch_level_read_waits_once_for_the_whole_invocation() -> None:
    # the batch's jobs read with one BatchGetItem before its records run: on the critical path once (6 ms), not
    # a tenth of it as a record's own request would be
    paths = _paths({})
    paths["operations"]["worker"] = {
        "dynamodb.BatchGetItem": 120,
        "dynamodb.UpdateItem": 2400,
        "sqs.ChangeMessageVisibilityBatch": 120,
    }
    assert worker_duration_on_aws_ms(paths, 512)["wait_ms"] == pytest.approx(15 + 6 + 2 * 6)


def test_the_results_carry_both_modes_computed_from_the_measured_units_by_table() -> None:
    today = {
        "scheduler": {"Control": 0.01, "Jobs/due": 2.0, "Jobs": 1.0, "Runs/sweep": 1.0, "Runs": 1.0},
        "worker": {"Runs/sweep": 1.0, "Runs": 2.0},
    }
    results = assemble({"paths_1KiB": _paths(today)}, DEPLOYMENT)
    on_demand = results["cost_usd_per_million_runs"]["total"]
    provisioned = results["cost_usd_per_million_runs_provisioned"]
    assert provisioned["units_per_run_by_table"]["write"] == pytest.approx(
        {"Control": 0.01, "Jobs/due": 2.0, "Jobs": 1.0, "Runs/sweep": 2.0, "Runs": 3.0}
    )
    assert provisioned["units_per_run_by_table"]["read"] == pytest.approx({"Jobs": 0.56})
    assert provisioned["total"] < on_demand
    assert "70%" in provisioned["assumptions"]["utilization"]
    assert PRICES.as_of in provisioned["assumptions"]["prices"]
    checked = {t["key"]: t for t in results["targets"]}
    assert checked["cost_usd_per_million_runs_provisioned.total"]["value"] == provisioned["total"]
    # When the write units per run drop (the sweep index gone, say), both figures follow,
    fewer = {"scheduler": {**today["scheduler"], "Runs/sweep": 0.0}, "worker": {"Runs": 2.0}}
    lower = assemble({"paths_1KiB": _paths(fewer)}, DEPLOYMENT)
    assert lower["cost_usd_per_million_runs"]["total"] == pytest.approx(on_demand - 2 * 0.625)
    assert lower["cost_usd_per_million_runs_provisioned"]["total"] < provisioned["total"]
    # and at the units per run the report names for the provisioned target, the target is met.
    needed = provisioned["write_units_per_run_for_target"]["write_units_per_run"]
    scale = needed / results["wcu_per_run"]["input_1KiB"]["total"]
    scaled = {path: {k: v * scale for k, v in units.items()} for path, units in today.items()}
    at_target = assemble({"paths_1KiB": _paths(scaled)}, DEPLOYMENT)["cost_usd_per_million_runs_provisioned"]
    # (the floors of the tables whose load falls below them make it a few tenths of a cent more)
    assert at_target["total"] == pytest.approx(PROVISIONED_TARGET_USD, abs=0.01)


def test_both_modes_report_their_floor_the_cost_with_an_instant_worker() -> None:
    # The floor of an item layout is what its measured units and requests cost with no worker time at all:
    # above the target, no faster worker meets it.
    five_units = {"scheduler": {"Jobs/due": 2.0, "Jobs": 1.0}, "worker": {"Runs": 2.0}}
    results = assemble({"paths_1KiB": _paths(five_units)}, DEPLOYMENT)
    for key in ("cost_usd_per_million_runs", "cost_usd_per_million_runs_provisioned"):
        cost = results[key]
        assert cost["lambda_duration"] > 0
        assert cost["total_without_worker_duration"] == pytest.approx(cost["total"] - cost["lambda_duration"])
    on_demand = results["cost_usd_per_million_runs"]
    # 5 write units, 0.56 read units, 0.3 SQS requests and 0.1 invocation per run
    assert on_demand["total_without_worker_duration"] == pytest.approx(
        5 * 0.625 + 0.56 * 0.125 + 0.3 * 0.40 + 0.1 * 0.20
    )
