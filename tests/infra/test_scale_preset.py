"""The ``scale`` preset: ``-c scale=large`` deploys the configuration the rush model (bench/rush_fair.py) meets its
targets with: scheduler partitions and memory, provisioned pollers on the worker's event source, batches of 20 with
a 1-s window, and warm throughput on the jobs and runs tables (and the runs table's indexes, written per run). An explicit context value wins
over the preset's; bad combinations fail at synth naming the key."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cfnlint.api import lint

from infra.config import SCALE_PRESETS, ConfigError, DeploymentConfig, InfraOptions
from jobsched import resources
from tests.infra.support import Synth, synthesize

LARGE = SCALE_PRESETS["large"]


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out"), {"scale": "large"})


def _table(synth: Synth, definition: resources.TableDef) -> dict[str, Any]:
    logical_id = synth.logical_id_of_output(f"{definition.id}Table")
    properties: dict[str, Any] = synth.raw["Resources"][logical_id]["Properties"]
    return properties


def _worker_mapping(synth: Synth) -> dict[str, Any]:
    (mapping,) = [
        m["Properties"]
        for m in synth.resources("AWS::Lambda::EventSourceMapping").values()
        if "FunctionResponseTypes" in m["Properties"]
    ]
    return mapping


def test_the_worker_event_source_has_provisioned_pollers_and_no_maximum_concurrency(synth: Synth) -> None:
    mapping = _worker_mapping(synth)
    assert mapping["ProvisionedPollerConfig"] == {
        "MinimumPollers": LARGE["worker_min_pollers"],
        "MaximumPollers": LARGE["worker_max_pollers"],
    }
    assert "ScalingConfig" not in mapping
    assert mapping["BatchSize"] == LARGE["worker_batch_size"]
    assert mapping["MaximumBatchingWindowInSeconds"] == LARGE["worker_batching_window_s"]


def test_the_jobs_and_runs_tables_and_the_runs_indexes_are_pre_warmed(synth: Synth) -> None:
    jobs, runs = _table(synth, resources.JOBS), _table(synth, resources.RUNS)
    jobs_warm = {
        "WriteUnitsPerSecond": LARGE["jobs_warm_write_units"],
        "ReadUnitsPerSecond": LARGE["jobs_warm_read_units"],
    }
    assert jobs["WarmThroughput"] == jobs_warm
    assert all("WarmThroughput" not in index for index in jobs["GlobalSecondaryIndexes"])
    runs_warm = {"WriteUnitsPerSecond": LARGE["runs_warm_write_units"]}
    assert runs["WarmThroughput"] == runs_warm
    assert [i["WarmThroughput"] for i in runs["GlobalSecondaryIndexes"]] == [runs_warm] * len(
        resources.RUNS.indexes
    )
    assert "WarmThroughput" not in _table(synth, resources.CONTROL)


def test_the_scheduler_has_the_presets_partitions_and_memory(synth: Synth) -> None:
    (scheduler,) = [
        f["Properties"]
        for f in synth.resources("AWS::Lambda::Function").values()
        if str(f["Properties"].get("Description", "")).startswith("jobsched scheduler")
    ]
    variables = scheduler["Environment"]["Variables"]
    assert variables["SCHEDULER_PARTITIONS"] == str(LARGE["scheduler_partitions"])
    assert variables["DUE_SHARDS"] == str(LARGE["due_shards"])
    assert scheduler["MemorySize"] == LARGE["scheduler_memory_mb"]
    assert len(synth.resources("AWS::Events::Rule")) >= LARGE["scheduler_partitions"]


def test_the_large_template_passes_cfn_lint(synth: Synth) -> None:
    findings = [m for m in lint(json.dumps(synth.raw), regions=["us-east-1"]) if m.rule.id[0] == "E"]
    assert findings == []


def test_the_default_deployment_has_no_pollers_and_no_warm_throughput() -> None:
    config = DeploymentConfig.from_context({})
    assert config.infra.worker_min_pollers is None
    assert all(config.infra.warm_throughput(t.id) == (None, None) for t in resources.TABLES)
    assert config.infra == InfraOptions()


def test_an_explicit_value_wins_over_the_preset() -> None:
    config = DeploymentConfig.from_context(
        {"scale": "large", "scheduler_partitions": "8", "worker_batch_size": 10}
    )
    assert config.settings.scheduler_partitions == 8
    assert config.infra.worker_batch_size == 10
    assert config.settings.due_shards == LARGE["due_shards"]
    assert config.infra.worker_min_pollers == LARGE["worker_min_pollers"]


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"scale": "huge"}, "'scale'"),
        ({"scale": ["large"]}, "'scale'"),
        ({"scale": "large", "worker_max_concurrency": "100"}, "'worker_max_concurrency'"),
        ({"worker_min_pollers": "1"}, "'worker_min_pollers'"),
        ({"worker_min_pollers": "201"}, "'worker_min_pollers'"),
        ({"worker_min_pollers": "50", "worker_max_pollers": "20"}, "'worker_max_pollers'"),
        ({"worker_min_pollers": "2", "worker_max_pollers": "2001"}, "'worker_max_pollers'"),
        ({"worker_max_pollers": "300"}, "'worker_max_pollers'"),
        ({"jobs_warm_write_units": "0"}, "'jobs_warm_write_units'"),
        ({"runs_warm_write_units": "40001"}, "'runs_warm_write_units'"),
        # a scale that names no preset, falsy ones too (only an unset scale means the defaults)
        ({"scale": ""}, "'scale'"),
        ({"scale": False}, "'scale'"),
        ({"scale": 0}, "'scale'"),
        ({"scale": "Large"}, "'scale'"),
        # on-demand: below the warm throughput every on-demand table has (DynamoDB never lowers it)
        ({"jobs_warm_write_units": "3999"}, "'jobs_warm_write_units'.*4000"),
        ({"jobs_warm_read_units": "11999"}, "'jobs_warm_read_units'.*12000"),
        ({"runs_warm_write_units": "100"}, "'runs_warm_write_units'.*4000"),
        ({"scale": "large", "runs_warm_write_units": "1000"}, "'runs_warm_write_units'"),
        # provisioned: above what auto scaling may give the table
        ({"scale": "large", "capacity": "provisioned"}, "'jobs_warm_write_units'.*capacity_max_write"),
        (
            {"scale": "large", "capacity": "provisioned", "capacity_max_write": "40000"},
            "'jobs_warm_read_units'.*capacity_max_read",
        ),
        ({"capacity": "provisioned", "runs_warm_write_units": "5000"}, "'runs_warm_write_units'"),
    ],
)
def test_bad_scale_settings_fail_naming_the_key(context: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        DeploymentConfig.from_context(context)


def test_an_unset_worker_max_concurrency_is_no_conflict_with_the_presets_pollers() -> None:
    config = DeploymentConfig.from_context({"scale": "large", "worker_max_concurrency": None})
    assert config.infra.worker_min_pollers == LARGE["worker_min_pollers"]


def test_on_demand_warm_throughput_at_dynamodbs_own_is_accepted() -> None:
    config = DeploymentConfig.from_context(
        {"jobs_warm_write_units": "4000", "jobs_warm_read_units": "12000", "runs_warm_write_units": 4000}
    )
    assert config.infra.warm_throughput(resources.JOBS.id) == (4000, 12000)
    assert config.infra.warm_throughput(resources.RUNS.id) == (4000, None)


def test_provisioned_warm_throughput_within_auto_scalings_range_is_accepted() -> None:
    config = DeploymentConfig.from_context(
        {
            "scale": "large",
            "capacity": "provisioned",
            "capacity_max_write": 40_000,
            "capacity_max_read": 40_000,
        }
    )
    assert config.infra.warm_throughput(resources.JOBS.id) == (40_000, 40_000)
    small = DeploymentConfig.from_context({"capacity": "provisioned", "jobs_warm_write_units": "100"})
    assert small.infra.warm_throughput(resources.JOBS.id) == (100, None)
