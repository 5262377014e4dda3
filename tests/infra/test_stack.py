"""Synth assertions on the stack as deployed to an account (3 scheduler partitions, concrete env)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match

from infra.api import GATEWAY_ERRORS, ROUTES, STAGE, error_template
from infra.config import RESOURCE_ENV_VARS, RUNTIME_KNOBS, SCHEDULER_CONCURRENCY_PER_PARTITION
from infra.functions import SCHEDULER_TIMEOUT_S, handler_path
from jobsched import resources
from jobsched.api.app import app
from jobsched.api.errors import ErrorBody
from jobsched.observability import MetricName
from jobsched.settings import Settings
from tests.infra.support import Synth, synthesize

PARTITIONS = 3


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(
        tmp_path_factory.mktemp("cdk-out"),
        {
            "scheduler_partitions": str(PARTITIONS),
            "worker_max_concurrency": "20",
            "worker_batch_size": "20",
            "worker_batching_window_s": "1",
        },
        env=cdk.Environment(account="123456789012", region="eu-west-1"),
    )


def _function(synth: Synth, name: str) -> tuple[str, dict[str, Any]]:
    for logical_id, resource in synth.resources("AWS::Lambda::Function").items():
        if resource["Properties"]["Handler"] == handler_path(name):
            return logical_id, resource["Properties"]
    raise AssertionError(f"no function with handler {handler_path(name)}")


def _statements(synth: Synth, role_logical_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    actions: set[str] = set()
    for statement in statements:
        value = statement["Action"]
        actions.update([value] if isinstance(value, str) else value)
    return actions


def _role_of(synth: Synth, function: str) -> str:
    _, props = _function(synth, function)
    logical_id: str = props["Role"]["Fn::GetAtt"][0]
    return logical_id


def _sorted(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return sorted(items, key=lambda item: json.dumps(item[key], sort_keys=True))


# -- storage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("definition", resources.TABLES, ids=lambda d: d.id)
def test_tables_agree_with_the_shared_definitions(synth: Synth, definition: resources.TableDef) -> None:
    # Given the boto3 create_table arguments local mode and the tests provision from,
    expected = definition.create_table_kwargs("unused")
    # When the stack's table for the same definition is read back from the template,
    table = synth.raw["Resources"][synth.logical_id_of_output(f"{definition.id}Table")]["Properties"]
    # Then keys, attribute types and indexes (keys and projections) are the same.
    assert table["KeySchema"] == expected["KeySchema"]
    assert _sorted(table["AttributeDefinitions"], "AttributeName") == _sorted(
        expected["AttributeDefinitions"], "AttributeName"
    )
    assert table["BillingMode"] == expected["BillingMode"]
    got_indexes = {
        i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in table.get("GlobalSecondaryIndexes", [])
    }
    want_indexes = {
        i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in expected.get("GlobalSecondaryIndexes", [])
    }
    assert got_indexes == want_indexes
    ttl = table.get("TimeToLiveSpecification")
    if definition.ttl_attribute:
        assert ttl == {"AttributeName": definition.ttl_attribute, "Enabled": True}
    else:
        assert ttl is None
    pitr = table.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled", False)
    assert pitr is definition.point_in_time_recovery


def test_due_index_is_keyed_by_bucket_and_dispatch_instant(synth: Synth) -> None:
    jobs = synth.raw["Resources"][synth.logical_id_of_output("JobsTable")]["Properties"]
    (due,) = [i for i in jobs["GlobalSecondaryIndexes"] if i["IndexName"] == "due"]
    assert due["KeySchema"] == [
        {"AttributeName": "due_pk", "KeyType": "HASH"},
        {"AttributeName": "due_at", "KeyType": "RANGE"},
    ]
    assert due["Projection"]["ProjectionType"] == "INCLUDE"
    assert sorted(due["Projection"]["NonKeyAttributes"]) == sorted(resources.DUE_PROJECTION)
    types = {a["AttributeName"]: a["AttributeType"] for a in jobs["AttributeDefinitions"]}
    assert (types["due_pk"], types["due_at"]) == ("S", "N")


def test_runs_history_expires_by_ttl_and_jobs_have_pitr(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "job_id", "KeyType": "HASH"},
                {"AttributeName": "scheduled_for", "KeyType": "RANGE"},
            ],
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        },
    )
    jobs = synth.raw["Resources"][synth.logical_id_of_output("JobsTable")]
    assert jobs["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_jobs_and_runs_are_retained_the_rest_is_not(synth: Synth) -> None:
    policies = {
        name: synth.raw["Resources"][synth.logical_id_of_output(f"{name}Table")]
        for name in ("Jobs", "Runs", "Control", "Idempotency")
    }
    for name in ("Jobs", "Runs"):
        assert policies[name]["DeletionPolicy"] == "Retain"
        assert policies[name]["Properties"]["DeletionProtectionEnabled"] is True
    for name in ("Control", "Idempotency"):
        assert policies[name]["DeletionPolicy"] == "Delete"


# -- messaging -------------------------------------------------------------------------------------


def test_run_queue_redrives_into_its_dlq_after_max_receive_count(synth: Synth) -> None:
    queue = synth.raw["Resources"][synth.logical_id_of_output("RunQueueUrl")]["Properties"]
    dlq_id = synth.logical_id_of_output("RunDlqUrl")
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": resources.RUN_QUEUE.max_receive_count,
    }
    assert queue["MessageRetentionPeriod"] == resources.RUN_QUEUE.retention_s


def test_visibility_timeout_is_well_above_the_worker_timeout(synth: Synth) -> None:
    queue = synth.raw["Resources"][synth.logical_id_of_output("RunQueueUrl")]["Properties"]
    _, worker = _function(synth, "worker")
    assert worker["Timeout"] == resources.WORKER_FUNCTION_TIMEOUT_S
    assert queue["VisibilityTimeout"] == resources.RUN_QUEUE.visibility_timeout_s
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    env = worker["Environment"]["Variables"]
    assert int(env["WORKER_TIMEOUT_CAP_S"]) < worker["Timeout"]


def test_queues_are_encrypted_and_refuse_plain_http(synth: Synth) -> None:
    queues = synth.resources("AWS::SQS::Queue")
    assert len(queues) == len(resources.QUEUES) + 2  # and the archive's spill and failure queues
    assert all(q["Properties"]["SqsManagedSseEnabled"] is True for q in queues.values())
    deny_insecure = Match.object_like(
        {
            "PolicyDocument": Match.object_like(
                {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                            )
                        ]
                    )
                }
            )
        }
    )
    synth.template.resource_properties_count_is("AWS::SQS::QueuePolicy", deny_insecure, len(queues))
    synth.template.resource_properties_count_is("AWS::SNS::TopicPolicy", deny_insecure, 2)


# -- functions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["api", "scheduler", "worker", "sweeper"])
def test_each_function_runs_python_312_on_x86_64_with_its_own_role(synth: Synth, name: str) -> None:
    _, props = _function(synth, name)
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["x86_64"]
    assert props["Handler"] == f"jobsched.handlers.{name}.handler"
    assert "LogGroup" in props["LoggingConfig"]
    roles = {_role_of(synth, other) for other in ("api", "scheduler", "worker", "sweeper")}
    assert len(roles) == 4


def test_five_functions_and_their_log_groups_keep_logs_for_the_retention(synth: Synth) -> None:
    assert len(synth.resources("AWS::Lambda::Function")) == 5  # api, scheduler, worker, sweeper, archive
    groups = synth.resources("AWS::Logs::LogGroup")
    assert len(groups) == 7  # five functions, the API's access log and its execution log
    assert {g["Properties"]["RetentionInDays"] for g in groups.values()} == {30}


def test_functions_get_settings_env_vars_that_settings_accepts(synth: Synth) -> None:
    _, props = _function(synth, "scheduler")
    env = props["Environment"]["Variables"]
    assert set(RESOURCE_ENV_VARS) <= set(env)
    assert {name.upper() for name in RUNTIME_KNOBS} <= set(env)
    assert env["SCHEDULER_PARTITIONS"] == str(PARTITIONS)
    assert env["ALLOW_SHELL_TARGETS"] == "false"
    assert env["ALLOW_PRIVATE_HTTP_TARGETS"] == "false"
    # What the function will do at cold start: Settings from these names (tokens replaced by strings).
    plain = {k: v if isinstance(v, str) else f"resolved-{k}" for k, v in env.items()}
    settings = Settings.model_validate({k.lower(): v for k, v in plain.items()})
    assert settings.scheduler_partitions == PARTITIONS
    assert settings.allow_shell_targets is False
    # Every function sees the same configuration (the worker also gets the role it acts for owners with, the
    # API the archive's Athena workgroup and Glue database it reads older history through).
    for other in ("api", "worker", "sweeper"):
        other_env = dict(_function(synth, other)[1]["Environment"]["Variables"])
        if other == "worker":
            assert other_env.pop("TARGET_ROLE_ARN")
        if other == "api":
            assert other_env.pop("ARCHIVE_WORKGROUP") and other_env.pop("ARCHIVE_DATABASE")
        assert other_env == env


def test_scheduler_timeout_and_reserved_concurrency_per_partition(synth: Synth) -> None:
    _, props = _function(synth, "scheduler")
    assert props["Timeout"] == SCHEDULER_TIMEOUT_S
    assert 60 < props["Timeout"] < 120
    assert props["ReservedConcurrentExecutions"] == SCHEDULER_CONCURRENCY_PER_PARTITION * PARTITIONS
    scheduler_id, _ = _function(synth, "scheduler")
    synth.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": {"Ref": scheduler_id}, "MaximumRetryAttempts": 0},
    )


def test_worker_consumes_the_run_queue_with_partial_batch_responses(synth: Synth) -> None:
    worker_id, _ = _function(synth, "worker")
    mappings = synth.resources("AWS::Lambda::EventSourceMapping").values()
    assert [m["Properties"]["FunctionName"] for m in mappings] == [
        {"Ref": worker_id},
        {"Ref": _function(synth, "archive")[0]},  # the runs table's stream (tests/infra/test_archive.py)
        {"Ref": _function(synth, "archive")[0]},  # the jobs table's stream: audit events
    ]
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": worker_id},
            "EventSourceArn": {"Fn::GetAtt": [synth.logical_id_of_output("RunQueueUrl"), "Arn"]},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": 20,
            "MaximumBatchingWindowInSeconds": 1,
            "ScalingConfig": {"MaximumConcurrency": 20},
        },
    )


# -- IAM -------------------------------------------------------------------------------------------


def _is_wildcard(value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    return "*" in values


def test_no_statement_allows_every_action_on_every_resource(synth: Synth) -> None:
    documents = [p["Properties"]["PolicyDocument"] for p in synth.resources("AWS::IAM::Policy").values()]
    for role in synth.resources("AWS::IAM::Role").values():
        documents.extend(p["PolicyDocument"] for p in role["Properties"].get("Policies", []))
    statements = [s for d in documents for s in d["Statement"]]
    assert statements
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert not any(a == "*" or a.endswith(":*") for a in actions), statement
        if actions == ["dynamodb:ListStreams"]:
            continue  # the stream mapping's check: an action without resource-level permissions (IAM5 acknowledged)
        assert not (_is_wildcard(statement.get("Resource")) and statement["Effect"] == "Allow"), statement


def test_roles_hold_only_what_their_function_does(synth: Synth) -> None:
    api = _actions(_statements(synth, _role_of(synth, "api")))
    scheduler = _actions(_statements(synth, _role_of(synth, "scheduler")))
    worker = _actions(_statements(synth, _role_of(synth, "worker")))
    sweeper = _actions(_statements(synth, _role_of(synth, "sweeper")))
    # Only the worker calls targets (through the role it assumes for a job's owner); the worker and sweeper
    # raise dead-run alerts, the scheduler skipped-fires alerts, the API a cancelled run's (``on_cancelled``).
    assert "sts:AssumeRole" in worker
    assert "lambda:InvokeFunction" not in api | scheduler | worker | sweeper
    assert "sts:AssumeRole" not in api | scheduler | sweeper
    assert "sns:Publish" in api and "sns:Publish" in scheduler
    # Only the worker consumes the run queue; the sweeper drains the run queue's dead-letter queue, nothing else.
    assert "sqs:ReceiveMessage" in worker
    assert "sqs:ReceiveMessage" not in api | scheduler
    drained = [
        json.dumps(s["Resource"])
        for s in _statements(synth, _role_of(synth, "sweeper"))
        if "sqs:ReceiveMessage" in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    assert drained and all("RunDlq" in resource and "RunQueue" not in resource for resource in drained)
    # Nobody administers tables or IAM; only the API (jobs, idempotency records) and the worker (a job's
    # overlap lock) delete items.
    everything = api | scheduler | worker | sweeper
    assert not {a for a in everything if a.startswith(("iam:", "dynamodb:Create", "dynamodb:DeleteTable"))}
    assert "dynamodb:DeleteItem" in api & worker
    assert "dynamodb:DeleteItem" not in scheduler | sweeper
    # The only Scans: the scheduler's bootstrap of a partition without a watermark (the jobs table), and the
    # sweeper's pass moving the due GSI's entries (design, Upgrades in flight) to timer items, its
    # anti-entropy pass over the jobs table (DueRepair.refile_stuck) and its quota recount (the by_owner index).
    scans = sorted(
        (role, json.dumps(s["Resource"]))
        for role in ("api", "scheduler", "worker", "sweeper")
        for s in _statements(synth, _role_of(synth, role))
        if "dynamodb:Scan" in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    )
    assert sorted({role for role, _ in scans}) == ["scheduler", "sweeper"]
    scanned = {role: [resource for r, resource in scans if r == role] for role in ("scheduler", "sweeper")}
    assert all("StorageJobs" in r and "/index/" not in r for r in scanned["scheduler"])
    assert all("StorageJobs" in r for r in scanned["sweeper"])
    assert any('"/index/due"]]}' in r for r in scanned["sweeper"])
    assert any('"/index/by_owner"]]}' in r for r in scanned["sweeper"])
    assert any("/index/" not in r for r in scanned["sweeper"])


def _target_role(synth: Synth) -> str:
    (logical_id,) = [k for k in synth.resources("AWS::IAM::Role") if k.startswith("FunctionsTargetRole")]
    return logical_id


def test_the_worker_reaches_targets_only_through_the_target_role_tagged_with_the_owner(synth: Synth) -> None:
    worker_role, target_role = _role_of(synth, "worker"), _target_role(synth)
    # The worker itself reaches no target: it may only assume the target role, tagging the session
    worker = _statements(synth, worker_role)
    assert not {"lambda:InvokeFunction", "kms:Decrypt"} & _actions(worker)
    (assume,) = [s for s in worker if "sts:AssumeRole" in _actions([s])]
    assert set(assume["Action"]) == {"sts:AssumeRole", "sts:TagSession"}
    assert assume["Resource"] == {"Fn::GetAtt": [target_role, "Arn"]}
    _, props = _function(synth, "worker")
    assert props["Environment"]["Variables"]["TARGET_ROLE_ARN"] == {"Fn::GetAtt": [target_role, "Arn"]}
    # Only the worker role may assume it, and only with the owner as its one session tag
    trust = synth.raw["Resources"][target_role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert {json.dumps(s["Principal"]) for s in trust} == {
        json.dumps({"AWS": {"Fn::GetAtt": [worker_role, "Arn"]}})
    }
    (tag_session,) = [s for s in trust if s["Action"] == "sts:TagSession"]
    assert tag_session["Condition"] == {
        "StringLike": {"aws:RequestTag/jobsched-owner": "?*"},
        "ForAllValues:StringEquals": {"aws:TagKeys": ["jobsched-owner"]},
    }


def test_the_target_role_allows_invoke_send_and_kms_only_on_resources_tagged_with_the_owner(
    synth: Synth,
) -> None:
    statements = _statements(synth, _target_role(synth))
    by_action = {json.dumps(sorted(_actions([s]))): s for s in statements}
    assert set(by_action) == {
        '["lambda:InvokeFunction"]',
        '["sqs:SendMessage"]',
        '["kms:Decrypt", "kms:GenerateDataKey"]',
    }
    same_owner = {"aws:ResourceTag/jobsched:owner": "${aws:PrincipalTag/jobsched-owner}"}
    for statement in by_action.values():
        assert statement["Effect"] == "Allow"
        conditions = statement["Condition"]
        assert set(conditions) == {"StringEquals"}
        assert same_owner.items() <= conditions["StringEquals"].items()
    kms = by_action['["kms:Decrypt", "kms:GenerateDataKey"]']["Condition"]["StringEquals"]
    assert kms["kms:ViaService"] == {"Fn::Join": ["", ["sqs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}


def test_the_owner_tag_key_is_a_setting_and_listed_targets_keep_the_owner_rule(tmp_path: Path) -> None:
    other = synthesize(
        tmp_path,
        {
            "target_owner_tag_key": "team",
            "target_function_arns": "arn:aws:lambda:eu-west-1:210987654321:function:shared",
        },
    )
    statements = _statements(other, _target_role(other))
    (invoke,) = [s for s in statements if s["Action"] == "lambda:InvokeFunction"]
    assert "arn:aws:lambda:eu-west-1:210987654321:function:shared" in invoke["Resource"]
    assert invoke["Condition"] == {
        "StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/jobsched-owner}"}
    }
    _, props = _function(other, "worker")
    assert props["Environment"]["Variables"]["TARGET_OWNER_TAG_KEY"] == "team"


def test_the_api_may_read_target_tags_only(synth: Synth) -> None:
    api = _actions(_statements(synth, _role_of(synth, "api")))
    assert {"lambda:ListTags", "sqs:ListQueueTags"} <= api
    assert not {"lambda:InvokeFunction", "lambda:GetFunction", "sts:AssumeRole"} & api


def test_dynamo_grants_name_their_index(synth: Synth) -> None:
    text = json.dumps(synth.raw)
    assert "/index/*" not in text
    assert "/index/due" in text and "/index/sweep" in text and "/index/by_owner" in text


# -- API -------------------------------------------------------------------------------------------


def test_every_method_requires_iam_auth(synth: Synth) -> None:
    methods = synth.resources("AWS::ApiGateway::Method")
    assert len(methods) == sum(len(m) for m in ROUTES.values())
    assert {m["Properties"]["AuthorizationType"] for m in methods.values()} == {"AWS_IAM"}
    synth.template.resource_properties_count_is("AWS::ApiGateway::Method", {"AuthorizationType": "NONE"}, 0)


def _gateway_methods(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(resource path, HTTP method): method properties}`` of the synthesized REST API."""
    resources_by_id = synth.resources("AWS::ApiGateway::Resource")
    parts = {k: v["Properties"]["PathPart"] for k, v in resources_by_id.items()}
    parents = {k: v["Properties"]["ParentId"] for k, v in resources_by_id.items()}

    def path_of(logical_id: str) -> str:
        path = parts[logical_id]
        parent = parents[logical_id]
        while isinstance(parent, dict) and "Ref" in parent and parent["Ref"] in parts:
            path = f"{parts[parent['Ref']]}/{path}"
            parent = parents[parent["Ref"]]
        return "/" + path

    return {
        (path_of(m["Properties"]["ResourceId"]["Ref"]), m["Properties"]["HttpMethod"]): m["Properties"]
        for m in synth.resources("AWS::ApiGateway::Method").values()
    }


def test_spec_paths_are_routed_to_the_api_function(synth: Synth) -> None:
    routed = _gateway_methods(synth)

    assert set(routed) == {(path, method) for path, methods in ROUTES.items() for method in methods}
    api_id, _ = _function(synth, "api")
    for method in routed.values():
        integration = method["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        assert api_id in json.dumps(integration["Uri"])


def test_every_route_the_handler_serves_is_on_api_gateway(synth: Synth) -> None:
    # Given: the operations of the handler's own OpenAPI document (generated from its route decorators),
    # and GET /openapi.json, which serves that document and is not in it
    document = app.openapi_document()
    served = {
        (path, method.upper()) for path, operations in document["paths"].items() for method in operations
    }
    served.add(("/openapi.json", "GET"))

    routed = _gateway_methods(synth)

    # Then: API Gateway declares each of them (it refuses an undeclared one before it reaches the function)
    assert served <= set(routed)
    assert set(routed) <= served
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            declared = routed[(path, method.upper())].get("RequestParameters", {})
            query = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            assert {
                k.removeprefix("method.request.querystring.") for k in declared if "querystring" in k
            } == query
            for parameter in (p for p in operation.get("parameters", []) if p["in"] == "path"):
                assert declared[f"method.request.path.{parameter['name']}"] is True


def test_stage_has_access_logs_throttling_and_error_shape(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": STAGE,
            "AccessLogSetting": Match.object_like({"DestinationArn": Match.any_value()}),
            "MethodSettings": [
                Match.object_like(
                    {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100, "LoggingLevel": "ERROR"}
                )
            ],
        },
    )
    synth.template.has_resource_properties(
        "AWS::ApiGateway::GatewayResponse",
        {
            "ResponseType": "REQUEST_TOO_LARGE",
            "StatusCode": "413",
            "ResponseTemplates": {"application/json": Match.string_like_regexp('"payload_too_large"')},
        },
    )
    synth.template.has_resource_properties(
        "AWS::ApiGateway::RequestValidator", {"ValidateRequestParameters": True}
    )


@pytest.mark.parametrize("response_type", sorted(GATEWAY_ERRORS))
def test_gateway_errors_have_the_api_error_shape(response_type: str) -> None:
    # Given API Gateway's substitution of its message (a quoted JSON string),
    body = error_template(response_type).replace(
        "$context.error.messageString", json.dumps('Missing "token"')
    )
    # Then the body parses as the API's own error body.
    parsed = ErrorBody.model_validate_json(body)
    assert parsed.error.code == GATEWAY_ERRORS[response_type][1]
    assert parsed.error.message == 'Missing "token"'


def test_gateway_errors_are_deployed_with_their_status(synth: Synth) -> None:
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in synth.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    assert set(responses) == set(GATEWAY_ERRORS)
    assert responses["MISSING_AUTHENTICATION_TOKEN"]["StatusCode"] == "401"
    assert responses["THROTTLED"]["StatusCode"] == "429"
    assert "StatusCode" not in responses["DEFAULT_5XX"]


# -- schedules and monitoring ----------------------------------------------------------------------


def test_one_minute_rule_per_partition_with_its_input(synth: Synth) -> None:
    scheduler_id, _ = _function(synth, "scheduler")
    sweeper_id, _ = _function(synth, "sweeper")
    inputs = []
    sweeper_rules = 0
    for rule in synth.resources("AWS::Events::Rule").values():
        props = rule["Properties"]
        assert props["ScheduleExpression"] == "rate(1 minute)"
        (target,) = props["Targets"]
        if target["Arn"] == {"Fn::GetAtt": [scheduler_id, "Arn"]}:
            inputs.append(json.loads(target["Input"]))
        elif target["Arn"] == {"Fn::GetAtt": [sweeper_id, "Arn"]}:
            sweeper_rules += 1
    assert sorted(inputs, key=lambda i: i["partition"]) == [{"partition": n} for n in range(PARTITIONS)]
    assert sweeper_rules == 1
    synth.template.resource_count_is("AWS::Events::Rule", PARTITIONS + 1)


def test_alarms_cover_lag_dead_letters_and_errors(synth: Synth) -> None:
    alarms = synth.resources("AWS::CloudWatch::Alarm")
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for alarm in alarms.values():
        by_metric.setdefault(alarm["Properties"]["MetricName"], []).append(alarm["Properties"])
    (lag,) = by_metric[MetricName.SCHEDULER_LAG]
    assert lag["Namespace"] == "jobsched"
    assert lag["Dimensions"] == [{"Name": "service", "Value": "jobsched"}]
    depth = by_metric["ApproximateNumberOfMessagesVisible"]
    watched = {json.dumps(a["Dimensions"][0]["Value"]) for a in depth}
    for output in ("RunDlqUrl", "DeadRunQueueUrl"):
        assert json.dumps({"Fn::GetAtt": [synth.logical_id_of_output(output), "QueueName"]}) in watched
    worker_id, _ = _function(synth, "worker")
    assert any(
        a["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": worker_id}}]
        for a in by_metric["Errors"]
    )
    # A partition whose clock stopped (no leader, as the sweeper counts each minute) pages someone, and so does
    # a sweeper that stopped counting
    (leaderless,) = by_metric[MetricName.PARTITIONS_WITHOUT_LEADER]
    assert leaderless["Dimensions"] == [{"Name": "service", "Value": "jobsched"}]
    assert (leaderless["ComparisonOperator"], leaderless["Threshold"], leaderless["TreatMissingData"]) == (
        "GreaterThanOrEqualToThreshold",
        1,
        "breaching",
    )
    assert (leaderless["EvaluationPeriods"], leaderless["DatapointsToAlarm"], leaderless["Period"]) == (
        3,
        2,
        60,
    )
    # and so does a job found stuck by the anti-entropy pass (its timer item lost: a fault, though now repaired)
    (refiled,) = by_metric[MetricName.JOBS_REFILED]
    assert (refiled["Statistic"], refiled["Threshold"], refiled["TreatMissingData"]) == (
        "Sum",
        1,
        "notBreaching",
    )
    # Every alarm pages someone.
    assert all(a["Properties"]["AlarmActions"] for a in alarms.values())
    synth.template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    synth.template.has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardName": "jobsched"})


def test_outputs_name_the_url_tables_queues_and_topic(synth: Synth) -> None:
    outputs = set(synth.raw["Outputs"])
    assert {
        "ApiUrl",
        "AlertsTopicArn",
        "JobsTable",
        "RunsTable",
        "RunQueueUrl",
        "DeadRunQueueUrl",
        "RunDlqUrl",
    } <= outputs


def test_template_is_written_to_the_assembly(synth: Synth) -> None:
    assert (Path(synth.outdir) / "manifest.json").is_file()


def test_scheduler_reservation_and_log_expiry_can_be_turned_off(tmp_path: Path) -> None:
    # Given an account still at Lambda's starting quota, and logs kept forever,
    other = synthesize(tmp_path, {"reserve_scheduler_concurrency": "false", "log_retention_days": "0"})
    # Then no function reserves concurrency and no log group expires.
    functions = other.resources("AWS::Lambda::Function").values()
    assert all("ReservedConcurrentExecutions" not in f["Properties"] for f in functions)
    groups = other.resources("AWS::Logs::LogGroup").values()
    assert groups and all("RetentionInDays" not in g["Properties"] for g in groups)


# -- deploy readiness: alarms reach someone, one stack's names are its own --------------------------


def _topic_policies(synth: Synth, topic_logical_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synth.resources("AWS::SNS::TopicPolicy").values()
        if {"Ref": topic_logical_id} in policy["Properties"]["Topics"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _lets_cloudwatch_publish(statement: dict[str, Any], topic_logical_id: str) -> bool:
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    return (
        statement["Effect"] == "Allow"
        and statement.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
        and "sns:Publish" in actions
        and statement["Resource"] == {"Ref": topic_logical_id}
    )


def test_every_alarm_actions_topic_lets_cloudwatch_publish_for_this_accounts_alarms(synth: Synth) -> None:
    alarms = synth.resources("AWS::CloudWatch::Alarm").values()
    topics = {
        action["Ref"]
        for alarm in alarms
        for key in ("AlarmActions", "OKActions")
        for action in alarm["Properties"].get(key, [])
    }
    assert topics  # every alarm notifies (checked above): there are topics to check
    for topic in topics:
        statements = _topic_policies(synth, topic)
        (allow,) = [s for s in statements if _lets_cloudwatch_publish(s, topic)]
        # Scoped: only alarms of this account, named after this stack, may publish (no confused deputy).
        assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
        (source_arn,) = allow["Condition"]["ArnLike"].values()
        assert source_arn == "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:jobsched-*"
        # The only Deny is the TLS one, which CloudWatch (calling over TLS) never meets.
        denies = [s for s in statements if s["Effect"] == "Deny"]
        assert [d["Condition"] for d in denies] == [{"Bool": {"aws:SecureTransport": "false"}}]
    for alarm in alarms:
        assert alarm["Properties"]["AlarmName"].startswith("jobsched-")


def test_the_run_queue_age_alarm_uses_its_setting(tmp_path: Path) -> None:
    other = synthesize(tmp_path, {"run_queue_age_alarm_s": "450"})
    run_queue = other.logical_id_of_output("RunQueueUrl")
    other.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ApproximateAgeOfOldestMessage",
            "Namespace": "AWS/SQS",
            "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [run_queue, "QueueName"]}}],
            "Threshold": 450,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "AlarmActions": Match.any_value(),
        },
    )


def test_default_stack_uses_the_jobsched_namespace_and_api_name(synth: Synth) -> None:
    synth.template.has_resource_properties("AWS::ApiGateway::RestApi", {"Name": "jobsched"})
    _, props = _function(synth, "worker")
    assert props["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == "jobsched"


def test_a_second_stack_names_its_namespace_api_alarms_and_dashboard_after_itself(tmp_path: Path) -> None:
    # Given a second deployment in the same account
    other = synthesize(tmp_path, {"stack_name": "jobsched-staging"})
    # Then its API, metric namespace, alarms and dashboard do not mix with the first one's
    other.template.has_resource_properties("AWS::ApiGateway::RestApi", {"Name": "jobsched-staging"})
    functions = other.resources("AWS::Lambda::Function").values()
    assert {
        f["Properties"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] for f in functions
    } == {"jobsched-staging"}
    alarms = [a["Properties"] for a in other.resources("AWS::CloudWatch::Alarm").values()]
    (lag,) = [a for a in alarms if a["MetricName"] == MetricName.SCHEDULER_LAG]
    assert lag["Namespace"] == "jobsched-staging"
    assert all(a["AlarmName"].startswith("jobsched-staging-") for a in alarms)
    other.template.has_resource_properties(
        "AWS::CloudWatch::Dashboard",
        {"DashboardName": "jobsched-staging", "DashboardBody": Match.any_value()},
    )
    body = json.dumps(other.resources("AWS::CloudWatch::Dashboard"))
    # Each graphed metric is [namespace, name, dimension, value, ...] in the body
    assert '[\\"jobsched-staging\\",' in body and '[\\"jobsched\\",' not in body


def test_the_stack_owns_the_api_execution_log_group(synth: Synth) -> None:
    (rest_api,) = synth.resources("AWS::ApiGateway::RestApi")
    groups = synth.resources("AWS::Logs::LogGroup")
    (logical_id,) = [
        k
        for k, g in groups.items()
        if g["Properties"].get("LogGroupName")
        == {"Fn::Join": ["", ["API-Gateway-Execution-Logs_", {"Ref": rest_api}, f"/{STAGE}"]]}
    ]
    group = groups[logical_id]
    assert group["Properties"]["RetentionInDays"] == 30
    assert group["DeletionPolicy"] == "Delete"
    # Created before the stage, so API Gateway never creates (and orphans) it first.
    (stage,) = synth.resources("AWS::ApiGateway::Stage").values()
    assert logical_id in stage["DependsOn"]


def test_the_api_may_read_the_run_a_retried_idempotent_trigger_names(synth: Synth) -> None:
    # JobService._keyed_run -> RunStore.get (GetItem on the runs table) answers a retried keyed trigger.
    runs_table = [k for k in synth.resources("AWS::DynamoDB::Table") if "Runs" in k]
    granted = [
        s
        for s in _statements(synth, _role_of(synth, "api"))
        if "dynamodb:GetItem" in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    assert any(any(t in json.dumps(s["Resource"]) for t in runs_table) for s in granted), runs_table


def test_the_dashboard_graphs_start_lateness_by_priority_and_lateness_by_top_owner(synth: Synth) -> None:
    body = json.dumps(synth.resources("AWS::CloudWatch::Dashboard"))
    # p99 of RunLatenessMs per priority over every owner ([service, priority] dimension set)
    for priority in ("high", "normal", "low"):
        assert f'\\"RunLatenessMs\\",\\"priority\\",\\"{priority}\\",\\"service\\",\\"jobsched\\"' in body
    # and every (priority, owner) series of the start and dispatch lateness, found by a SEARCH
    for name in (MetricName.RUN_LATENESS, MetricName.DISPATCH_LATENESS):
        assert (
            f"SEARCH('{{jobsched,owner,priority,service}} MetricName=\\\\\\\"{name}\\\\\\\"', 'p99', 60)"
            in body
        )
