"""The run archive's resources (design §11): the runs table's stream, the filtered mapping of the archive function,
the bucket (encryption, TLS only, public access blocked, versioning, lifecycle), the Glue table with partition
projection, the Athena workgroup, the archive's alarms and the archive function's least privilege."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import ConfigError, DeploymentConfig
from infra.functions import handler_path
from jobsched.domain.archive import ARCHIVE_COLUMNS, AUDIT_COLUMNS, month_of
from jobsched.dynamodb.layout import event_item, run_item
from jobsched.dynamodb.stream import is_audit_ttl_deletion, is_ttl_deletion
from tests.infra.support import Synth, synthesize
from tests.support import archive as support
from tests.support.archive import finished_runs, stream_record, trigger_key_record, ttl_records


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The stack with the archive's settings: Standard-IA after 45 days, retention 0 (kept), 100 MB a query."""
    return synthesize(
        tmp_path_factory.mktemp("cdk-out-archive"),
        {
            "archive_retention_days": "0",
            "archive_infrequent_access_days": "45",
            "archive_scan_limit_mb": "100",
        },
    )


def only(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    [(_, resource)] = resources.items()
    return resource["Properties"]


def archive_bucket(synth: Synth) -> dict[str, Any]:
    ref = synth.raw["Outputs"]["ArchiveBucket"]["Value"]["Ref"]
    return synth.raw["Resources"][ref]


def archive_role_statements(synth: Synth, name: str = "archive") -> list[dict[str, Any]]:
    functions = synth.resources("AWS::Lambda::Function")
    (props,) = [
        f["Properties"] for f in functions.values() if f["Properties"]["Handler"] == handler_path(name)
    ]
    role = props["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_runs_and_jobs_tables_stream_old_images(default_synth: Synth) -> None:
    for output in ("RunsTable", "JobsTable"):
        table = default_synth.raw["Resources"][default_synth.logical_id_of_output(output)]
        assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "OLD_IMAGE"}, output


def stream_mapping(synth: Synth, output: str) -> dict[str, Any]:
    """The properties of the one event source mapping on the stream of the table named by stack output ``output``."""
    mappings = synth.resources("AWS::Lambda::EventSourceMapping").values()
    stream = {"Fn::GetAtt": [synth.logical_id_of_output(output), "StreamArn"]}
    [mapping] = [m["Properties"] for m in mappings if m["Properties"].get("EventSourceArn") == stream]
    return mapping


def test_only_ttl_deletions_of_runs_invoke_the_archive_function(default_synth: Synth) -> None:
    mapping = stream_mapping(default_synth, "RunsTable")
    [pattern] = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert pattern["eventName"] == ["REMOVE"]
    assert pattern["userIdentity"] == {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}
    assert mapping["BisectBatchOnFunctionError"] is True and mapping["MaximumRetryAttempts"] >= 1
    assert "OnFailure" in mapping["DestinationConfig"]
    # the code applies the same filter again: a record the filter would drop is ignored
    rows = finished_runs(1)
    assert is_ttl_deletion(ttl_records(rows)[0])
    assert not is_ttl_deletion(stream_record(run_item(rows[0]), 2, identity=None))
    assert not is_ttl_deletion(stream_record(run_item(rows[0]), 3, event="MODIFY"))
    assert not is_ttl_deletion(trigger_key_record(4))


def test_only_ttl_deletions_of_audit_events_invoke_the_archive_function_from_the_jobs_table(
    default_synth: Synth,
) -> None:
    runs, jobs = stream_mapping(default_synth, "RunsTable"), stream_mapping(default_synth, "JobsTable")
    assert jobs["FunctionName"] == runs["FunctionName"]
    [pattern] = [json.loads(f["Pattern"]) for f in jobs["FilterCriteria"]["Filters"]]
    assert pattern == {
        "eventName": ["REMOVE"],
        "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
        "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "events#"}]}}},
    }
    retries = ("BisectBatchOnFunctionError", "MaximumRetryAttempts", "DestinationConfig", "BatchSize")
    assert {name: jobs[name] for name in retries} == {name: runs[name] for name in retries}
    # the code applies the same filter again: only a TTL deletion of an audit item is one
    [event] = support.audit_events(1)
    timer = {"pk": "due#p0#b1#s0#0", "sk": "x", "expires_at": 1}
    assert is_audit_ttl_deletion(support.audit_records([event])[0])
    assert not is_audit_ttl_deletion(stream_record(event_item(event), 2, identity=None))
    assert not is_audit_ttl_deletion(stream_record(event_item(event), 3, event="MODIFY"))
    assert not is_audit_ttl_deletion(stream_record(timer, 4))
    assert not is_audit_ttl_deletion(ttl_records(finished_runs(1))[0])


def test_the_bucket_is_encrypted_private_versioned_and_tls_only(default_synth: Synth) -> None:
    bucket = archive_bucket(default_synth)
    props = bucket["Properties"]
    [rule] = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["DeletionPolicy"] == "Retain"
    ref = default_synth.raw["Outputs"]["ArchiveBucket"]["Value"]["Ref"]
    [policy] = [
        p["Properties"]
        for p in default_synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": ref}
    ]
    [deny] = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny["Action"] == "s3:*" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_lifecycle_moves_to_infrequent_access_and_expires_after_the_retention(
    default_synth: Synth, short: Synth
) -> None:
    [rule] = archive_bucket(default_synth)["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["Transitions"] == [{"StorageClass": "STANDARD_IA", "TransitionInDays": 30}]
    assert rule["ExpirationInDays"] == 2555
    [kept] = archive_bucket(short)["Properties"]["LifecycleConfiguration"]["Rules"]
    assert kept["Transitions"] == [{"StorageClass": "STANDARD_IA", "TransitionInDays": 45}]
    assert "ExpirationInDays" not in kept  # 0: kept forever


def test_a_retention_not_above_the_transition_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="archive_retention_days"):
        DeploymentConfig.from_context({"archive_retention_days": "30"})
    with pytest.raises(ConfigError, match="archive_infrequent_access_days"):
        DeploymentConfig.from_context({"archive_infrequent_access_days": "10"})


def glue_table(synth: Synth, name: str) -> dict[str, Any]:
    tables = synth.resources("AWS::Glue::Table").values()
    [table] = [t["Properties"]["TableInput"] for t in tables if t["Properties"]["TableInput"]["Name"] == name]
    return table


def test_the_glue_table_projects_its_partitions_from_the_layout(default_synth: Synth) -> None:
    table = glue_table(default_synth, "runs")
    params = table["Parameters"]
    assert params["projection.enabled"] == "true"
    assert params["projection.owner.type"] == "injected"
    assert params["projection.month.type"] == "date" and params["projection.month.format"] == "yyyy-MM"
    # a backfill may run fires from 1970 on, and TTL archives those runs too: every month they can be in is read
    assert params["projection.month.range"] == f"{month_of(0)},NOW"
    template = json.dumps(params["storage.location.template"])
    assert "/runs/owner=${owner}/month=${month}/" in template
    assert [c["Name"] for c in table["PartitionKeys"]] == ["owner", "month"]
    assert [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]] == list(ARCHIVE_COLUMNS)
    assert (
        table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"]
        == "org.openx.data.jsonserde.JsonSerDe"
    )
    assert not default_synth.resources("AWS::Glue::Crawler")


def test_the_audit_glue_table_projects_its_months_from_the_layout(default_synth: Synth) -> None:
    table = glue_table(default_synth, "audit")
    params = table["Parameters"]
    assert params["projection.enabled"] == "true" and "projection.owner.type" not in params
    assert params["projection.month.type"] == "date" and params["projection.month.format"] == "yyyy-MM"
    assert params["projection.month.range"] == f"{month_of(0)},NOW"
    assert "/audit/month=${month}/" in json.dumps(params["storage.location.template"])
    assert [c["Name"] for c in table["PartitionKeys"]] == ["month"]
    assert [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]] == list(AUDIT_COLUMNS)


def test_the_workgroup_enforces_its_result_location_and_scan_limit(
    default_synth: Synth, short: Synth
) -> None:
    config = only(default_synth.resources("AWS::Athena::WorkGroup"))["WorkGroupConfiguration"]
    assert config["EnforceWorkGroupConfiguration"] is True
    assert config["BytesScannedCutoffPerQuery"] == 10_240 * 1024 * 1024
    result = config["ResultConfiguration"]
    assert result["EncryptionConfiguration"] == {"EncryptionOption": "SSE_S3"}
    assert "Results" in json.dumps(result["OutputLocation"])
    limited = only(short.resources("AWS::Athena::WorkGroup"))["WorkGroupConfiguration"]
    assert limited["BytesScannedCutoffPerQuery"] == 100 * 1024 * 1024


def test_the_archive_function_may_only_put_objects_under_runs_audit_and_quarantine_and_use_its_queues(
    default_synth: Synth,
) -> None:
    statements = archive_role_statements(default_synth)
    s3 = [s for s in statements if any(str(a).startswith("s3:") for a in _list(s["Action"]))]
    [put] = s3
    assert put["Action"] == "s3:PutObject"
    assert sorted(r["Fn::Join"][1][-1] for r in _list(put["Resource"])) == [
        "/audit/*",
        "/quarantine/*",
        "/runs/*",
    ]
    actions = {a for s in statements for a in _list(s["Action"])}
    assert not {a for a in actions if a.startswith("dynamodb:")} - {
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
    }
    stream_reads = [s for s in statements if "dynamodb:GetRecords" in _list(s["Action"])]
    streams = [
        {"Fn::GetAtt": [default_synth.logical_id_of_output(output), "StreamArn"]}
        for output in ("RunsTable", "JobsTable")
    ]
    resources = [r for s in stream_reads for r in _list(s["Resource"])]
    assert sorted(map(json.dumps, resources)) == sorted(map(json.dumps, streams))
    assert not {a for a in actions if a.startswith(("sns:", "lambda:", "sts:", "iam:"))}


def test_the_api_queries_the_archive_in_its_workgroup_and_reads_only_runs_and_results(
    default_synth: Synth,
) -> None:
    functions = default_synth.resources("AWS::Lambda::Function").values()
    [api] = [f["Properties"] for f in functions if f["Properties"]["Handler"] == handler_path("api")]
    variables = api["Environment"]["Variables"]
    assert {"ARCHIVE_WORKGROUP", "ARCHIVE_DATABASE"} <= set(variables)
    statements = archive_role_statements(default_synth, "api")
    athena = [s for s in statements if any(str(a).startswith("athena:") for a in _list(s["Action"]))]
    [queries] = athena
    assert set(_list(queries["Action"])) == {
        "athena:StartQueryExecution",
        "athena:GetQueryExecution",
        "athena:GetQueryResults",
    }
    assert ":workgroup/" in json.dumps(queries["Resource"])
    reads = [s for s in statements if _list(s["Action"]) == ["s3:GetObject"]]
    assert [r["Resource"]["Fn::Join"][1][-1] for r in reads] == ["/runs/*"]
    s3 = {a for s in statements for a in _list(s["Action"]) if str(a).startswith("s3:")}
    assert "s3:DeleteObject" not in s3 and "s3:PutObject" in s3  # results only: below
    puts = [s for s in statements if "s3:PutObject" in _list(s["Action"])]
    assert all("Results" in json.dumps(s["Resource"]) for s in puts)


def test_the_archive_has_alarms_on_its_errors_and_queues(default_synth: Synth) -> None:
    names = {
        json.dumps(a["Properties"]["AlarmName"])
        for a in default_synth.resources("AWS::CloudWatch::Alarm").values()
    }
    for name in ("ArchiveErrors", "ArchiveSpillDepth", "ArchiveFailuresDepth", "ArchiveQuarantined"):
        assert any(name in n for n in names), name


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_outputs_name_the_archive(default_synth: Synth) -> None:
    outputs = default_synth.raw["Outputs"]
    assert {"ArchiveBucket", "ArchiveDatabase", "ArchiveWorkGroup", "ArchiveSpillQueueUrl"} <= set(outputs)
