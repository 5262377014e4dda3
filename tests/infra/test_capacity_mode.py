"""The ``capacity`` setting: on-demand by default; ``provisioned`` gives every table and every index read and
write capacity with target-tracking auto scaling, keeps the shared key schema, and passes cdk-nag and cfn-lint."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cfnlint.api import lint

from infra.config import ConfigError
from infra.stack import build_app
from jobsched import resources
from tests.infra.support import SKIP_BUNDLING, Synth, nag_violations, project_context, synthesize

# Non-default values, so the template shows they come from the settings.
SETTINGS = {
    "capacity": "provisioned",
    "capacity_min_read": "3",
    "capacity_max_read": "300",
    "capacity_min_write": "7",
    "capacity_max_write": "700",
    "capacity_target_utilization": "60",
}


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out"), SETTINGS)


def _table(synth: Synth, definition: resources.TableDef) -> tuple[str, dict[str, Any]]:
    logical_id = synth.logical_id_of_output(f"{definition.id}Table")
    properties: dict[str, Any] = synth.raw["Resources"][logical_id]["Properties"]
    return logical_id, properties


def _resource_id(target: dict[str, Any]) -> tuple[str, str]:
    """``(table logical id, "" or "/index/<name>")`` of a scalable target's ``table/<Ref>[/index/<name>]``."""
    parts = target["Properties"]["ResourceId"]["Fn::Join"][1]
    assert parts[0] == "table/", parts
    return parts[1]["Ref"], "".join(parts[2:])


def _scaling(synth: Synth) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``(table logical id, index suffix, dimension) -> {"min", "max", "policies"}`` from the template."""
    targets = synth.resources("AWS::ApplicationAutoScaling::ScalableTarget")
    policies = synth.resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for logical_id, target in targets.items():
        table_id, index = _resource_id(target)
        props = target["Properties"]
        assert props["ServiceNamespace"] == "dynamodb"
        key = (table_id, index, props["ScalableDimension"])
        assert key not in out, key
        out[key] = {
            "min": props["MinCapacity"],
            "max": props["MaxCapacity"],
            "policies": [
                p["Properties"]
                for p in policies.values()
                if p["Properties"]["ScalingTargetId"] == {"Ref": logical_id}
            ],
        }
    return out


def _expected_dimensions(synth: Synth) -> set[tuple[str, str, str]]:
    expected: set[tuple[str, str, str]] = set()
    for definition in resources.TABLES:
        table_id, _ = _table(synth, definition)
        for kind in ("Read", "Write"):
            expected.add((table_id, "", f"dynamodb:table:{kind}CapacityUnits"))
            for index in definition.indexes:
                expected.add((table_id, f"/index/{index.name}", f"dynamodb:index:{kind}CapacityUnits"))
    return expected


@pytest.mark.parametrize("definition", resources.TABLES, ids=lambda d: d.id)
def test_every_table_and_index_is_provisioned_at_the_floor(
    synth: Synth, definition: resources.TableDef
) -> None:
    _, table = _table(synth, definition)
    # PROVISIONED is CloudFormation's default billing mode: either absent or said explicitly.
    assert table.get("BillingMode", "PROVISIONED") == "PROVISIONED"
    floor = {"ReadCapacityUnits": 3, "WriteCapacityUnits": 7}
    assert table["ProvisionedThroughput"] == floor
    indexes = {i["IndexName"]: i for i in table.get("GlobalSecondaryIndexes", [])}
    assert set(indexes) == {i.name for i in definition.indexes}
    for index in indexes.values():
        assert index["ProvisionedThroughput"] == floor, index["IndexName"]


@pytest.mark.parametrize("definition", resources.TABLES, ids=lambda d: d.id)
def test_provisioned_tables_keep_the_shared_key_schema(synth: Synth, definition: resources.TableDef) -> None:
    # The one definition of each table: only the billing differs from what local mode creates.
    expected = definition.create_table_kwargs("unused")
    _, table = _table(synth, definition)
    assert table["KeySchema"] == expected["KeySchema"]
    got = {i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in table.get("GlobalSecondaryIndexes", [])}
    want = {
        i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in expected.get("GlobalSecondaryIndexes", [])
    }
    assert got == want


def test_every_table_and_index_scales_reads_and_writes_by_target_tracking(synth: Synth) -> None:
    scaling = _scaling(synth)
    # One scalable target per table or index and per dimension, no more, no fewer (4 tables, 3 indexes).
    assert set(scaling) == _expected_dimensions(synth)
    assert len(scaling) == 2 * (len(resources.TABLES) + sum(len(t.indexes) for t in resources.TABLES))
    for (table_id, index, dimension), target in scaling.items():
        reads = dimension.endswith("ReadCapacityUnits")
        assert (target["min"], target["max"]) == ((3, 300) if reads else (7, 700)), (table_id, index)
        (policy,) = target["policies"]
        assert policy["PolicyType"] == "TargetTrackingScaling"
        config = policy["TargetTrackingScalingPolicyConfiguration"]
        assert config["TargetValue"] == 60
        metric = "DynamoDBReadCapacityUtilization" if reads else "DynamoDBWriteCapacityUtilization"
        assert config["PredefinedMetricSpecification"] == {"PredefinedMetricType": metric}


def test_provisioned_mode_passes_cdk_nag_and_cfn_lint(synth: Synth) -> None:
    # The synth itself failed on an unacknowledged cdk-nag error; warnings are none either.
    assert nag_violations(synth.stack) == []
    errors = [
        f"{m.rule.id} {m.message}"
        for m in lint(json.dumps(synth.raw), regions=["us-east-1"])
        if m.rule.id[0] == "E"
    ]
    assert errors == []


def test_on_demand_is_the_default_with_no_capacity_and_no_scaling(default_synth: Synth) -> None:
    # Given no capacity setting, when the stack is synthesized
    default = default_synth
    # Then every table and index is on-demand (as local mode creates them) and nothing scales.
    for definition in resources.TABLES:
        _, table = _table(default, definition)
        assert table["BillingMode"] == "PAY_PER_REQUEST"
        assert "ProvisionedThroughput" not in table
        assert all("ProvisionedThroughput" not in i for i in table.get("GlobalSecondaryIndexes", []))
    assert default.resources("AWS::ApplicationAutoScaling::ScalableTarget") == {}
    assert default.resources("AWS::ApplicationAutoScaling::ScalingPolicy") == {}


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"capacity": "reserved"}, "capacity"),
        ({"capacity": "Provisioned"}, "capacity"),
        ({"capacity_target_utilization": "95"}, "capacity_target_utilization"),
        ({"capacity_target_utilization": "10"}, "capacity_target_utilization"),
        ({"capacity_min_read": "0"}, "capacity_min_read"),
        ({"capacity_max_write": "40001"}, "capacity_max_write"),
        ({"capacity_min_read": "50", "capacity_max_read": "40"}, "capacity_min_read"),
        ({"capacity_min_write": "50", "capacity_max_write": "40"}, "capacity_min_write"),
    ],
)
def test_a_bad_capacity_setting_is_refused_naming_it(context: dict[str, str], key: str) -> None:
    # The app refuses to build (cdk synth/deploy fail) with the setting's name in the message.
    with pytest.raises(ConfigError, match=rf"'{key}'"):
        build_app({**project_context(), **SKIP_BUNDLING, **context})
