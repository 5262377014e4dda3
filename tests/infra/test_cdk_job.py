"""``jobsched.cdk.Job`` in a team's own stack (not the jobsched stack): the custom resources, the stack's one
provider, its role's policy (its log group and ``execute-api:Invoke`` on the job routes, nothing else), the
refusals at synth, and the provider's asset (what lands in it; bundling skipped in synth as elsewhere)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from jobsched.cdk import Job
from jobsched.cdk.construct import (
    ASSET_MODULES,
    HANDLER,
    RESOURCE_TYPE,
    BundlingError,
    JobProvider,
    ProviderBundler,
)
from jobsched.cdk.spec import complete_spec
from jobsched.lambda_wheels import PLATFORM, PYTHON_VERSION
from tests.infra.support import SKIP_BUNDLING, project_context

URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/v1"


def team_app() -> cdk.App:
    return cdk.App(context={**project_context(), **SKIP_BUNDLING})


@pytest.fixture(scope="module")
def team() -> dict[str, Any]:
    """A team's stack with two jobs on one API: one calling the team's function, one a command."""
    stack = cdk.Stack(team_app(), "Billing", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    function = lambda_.Function(
        stack,
        "Invoices",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
    )
    Job(
        stack,
        "NightlyInvoices",
        api_url=URL,
        schedule="0 2 * * *",
        timezone="Europe/Berlin",
        target={"type": "lambda", "function": function.function_arn},
        retry={"max_attempts": 3},
    )
    Job(
        stack,
        "Reminders",
        name="reminders",
        api_url=URL,
        schedule="@hourly",
        target={"type": "command", "name": "echo"},
    )
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


def of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def text(value: Any) -> str:
    """A template value as text: ``Fn::Join`` pieces concatenated, a ``Ref`` or ``Fn::GetAtt`` as ``<...>``."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(text(part) for part in value["Fn::Join"][1])
    if "Ref" in value:
        return f"<{value['Ref']}>"
    return f"<{'.'.join(value['Fn::GetAtt'])}>"


def test_each_job_is_a_custom_resource_of_the_stacks_one_provider(team: dict[str, Any]) -> None:
    jobs = of_type(team, RESOURCE_TYPE)
    by_name = {r["Properties"]["Name"]: r["Properties"] for r in jobs.values()}

    # two jobs, named by their id or their name, on the API, deleted with the stack
    assert sorted(by_name) == ["NightlyInvoices", "reminders"]
    assert {p["ApiUrl"] for p in by_name.values()} == {URL}
    assert {r["DeletionPolicy"] for r in jobs.values()} == {"Delete"}
    # both served by one provider framework function
    framework = {json.dumps(p["ServiceToken"]) for p in by_name.values()}
    assert len(framework) == 1
    (token,) = framework
    assert json.loads(token)["Fn::GetAtt"][0] in of_type(team, "AWS::Lambda::Function")

    # the spec: every field, as given or the API's default; the function's ARN resolved at deploy time
    assert json.loads(by_name["reminders"]["Spec"]) == complete_spec(
        {"schedule": "@hourly", "timezone": "UTC", "target": {"type": "command", "name": "echo"}}
    )
    nightly = text(by_name["NightlyInvoices"]["Spec"])
    (function_id,) = [k for k in of_type(team, "AWS::Lambda::Function") if k.startswith("Invoices")]
    spec = json.loads(
        nightly.replace(f"<{function_id}.Arn>", "arn:aws:lambda:eu-west-1:123456789012:function:f")
    )
    assert spec["target"] == {
        "type": "lambda",
        "function": "arn:aws:lambda:eu-west-1:123456789012:function:f",
    }
    assert spec["timezone"] == "Europe/Berlin" and spec["retry"] == {
        "max_attempts": 3,
        "backoff_s": 60,
        "max_backoff_s": 900,
    }


def test_the_provider_function_runs_the_handler_on_python_3_12(team: dict[str, Any]) -> None:
    handlers = [
        r["Properties"]
        for r in of_type(team, "AWS::Lambda::Function").values()
        if r["Properties"].get("Handler") == HANDLER
    ]
    assert len(handlers) == 1
    (handler,) = handlers
    assert (handler["Runtime"], handler["Architectures"]) == (f"python{PYTHON_VERSION}", ["x86_64"])


def provider_function(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The logical id and properties of the stack's one provider function."""
    (found,) = [
        (k, r["Properties"])
        for k, r in of_type(template, "AWS::Lambda::Function").items()
        if r["Properties"].get("Handler") == HANDLER
    ]
    return found


def granted(template: dict[str, Any], role: str) -> list[tuple[str, str]]:
    """The ``(action, resource)`` pairs the policies of ``role`` (a logical id) allow, resources as text."""

    def listed(value: Any) -> list[Any]:
        return value if isinstance(value, list) else [value]

    return sorted(
        (action, text(resource))
        for policy in of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Allow"
        for action in listed(statement["Action"])
        for resource in listed(statement["Resource"])
    )


def test_the_provider_role_may_call_the_job_routes_and_write_its_logs_only(team: dict[str, Any]) -> None:
    _, handler = provider_function(team)
    role = handler["Role"]["Fn::GetAtt"][0]
    assert "ManagedPolicyArns" not in team["Resources"][role]["Properties"]
    log_group = handler["LoggingConfig"]["LogGroup"]["Ref"]  # its own log group
    assert team["Resources"][log_group]["Type"] == "AWS::Logs::LogGroup"
    api = "arn:aws:execute-api:eu-west-1:123456789012:abc123/v1"
    assert granted(team, role) == [
        ("execute-api:Invoke", f"{api}/DELETE/jobs/*"),
        ("execute-api:Invoke", f"{api}/PATCH/jobs/*"),
        ("execute-api:Invoke", f"{api}/POST/jobs"),
        ("logs:CreateLogStream", f"<{log_group}.Arn>"),
        ("logs:PutLogEvents", f"<{log_group}.Arn>"),
    ]


def test_the_frameworks_role_invokes_the_handler_only(team: dict[str, Any]) -> None:
    (handler_id,) = [
        k
        for k, r in of_type(team, "AWS::Lambda::Function").items()
        if r["Properties"].get("Handler") == HANDLER
    ]
    statements = [
        statement
        for policy in of_type(team, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "lambda:InvokeFunction" in statement["Action"]
    ]
    assert len(statements) == 1
    assert {text(r).split(":*")[0] for r in statements[0]["Resource"]} == {f"<{handler_id}.Arn>"}


def test_jobs_on_two_apis_grant_both_and_a_custom_domain_needs_the_apis_arn() -> None:
    stack = cdk.Stack(team_app(), "Ops")
    Job(stack, "A", api_url=URL, schedule="@daily", target={"type": "command", "name": "echo"})
    Job(
        stack,
        "B",
        api_url="https://jobs.example.com/",
        execute_api_arn="arn:aws:execute-api:eu-central-1:210987654321:xyz789/prod",
        schedule="@daily",
        target={"type": "command", "name": "echo"},
    )
    with pytest.raises(
        ValueError, match=r"api_url 'https://jobs.example.com/' is not an API Gateway URL .*execute_api_arn"
    ):
        Job(
            stack,
            "C",
            api_url="https://jobs.example.com/",
            schedule="@daily",
            target={"type": "command", "name": "echo"},
        )
    assert stack.node.try_find_child("C") is None

    template = Template.from_stack(stack).to_json()
    assert len(of_type(template, RESOURCE_TYPE)) == 2
    _, handler = provider_function(template)
    invoke = {r for a, r in granted(template, handler["Role"]["Fn::GetAtt"][0]) if a == "execute-api:Invoke"}
    apis = (
        "arn:<AWS::Partition>:execute-api:eu-west-1:<AWS::AccountId>:abc123/v1",
        "arn:aws:execute-api:eu-central-1:210987654321:xyz789/prod",
    )
    assert invoke == {
        f"{api}/{route}" for api in apis for route in ("POST/jobs", "PATCH/jobs/*", "DELETE/jobs/*")
    }
    assert isinstance(stack.node.find_child(JobProvider.ID), JobProvider)


def test_an_unknown_field_is_refused_at_synth_naming_it() -> None:
    stack = cdk.Stack(team_app(), "Typo")
    with pytest.raises(
        TypeError, match=r"Job 'Nightly': unknown job field\(s\) retries; the fields are .*retry"
    ):
        Job(
            stack,
            "Nightly",
            api_url=URL,
            schedule="@daily",
            target={"type": "command", "name": "echo"},
            retries=3,
        )


class FakePip:
    """Stands in for ``subprocess.run``: records the command and answers ``returncode``."""

    def __init__(self, returncode: int = 0) -> None:
        self.returncode = returncode
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        return subprocess.CompletedProcess(
            command, self.returncode, "", "ERROR: no network" if self.returncode else ""
        )


def test_the_asset_holds_the_handler_its_client_and_httpx_for_the_lambda_runtime(tmp_path: Path) -> None:
    pip = FakePip()
    assert ProviderBundler(run=pip).try_bundle(str(tmp_path))

    # pip installs the httpx installed here, as wheels for the Lambda's Python and platform
    (command,) = pip.commands
    assert command[:3] == [sys.executable, "-m", "pip"]
    assert command[command.index("--python-version") + 1] == PYTHON_VERSION
    assert command[command.index("--platform") + 1] == PLATFORM
    assert command[command.index("--target") + 1] == str(tmp_path)
    assert command[-1] == f"httpx=={metadata.version('httpx')}"
    # and every jobsched module the handler reaches is in the asset
    shipped = {str(p.relative_to(tmp_path / "jobsched")) for p in (tmp_path / "jobsched").rglob("*.py")}
    assert shipped == set(ASSET_MODULES)
    reached = {
        node.module
        for module in ASSET_MODULES
        for node in ast.walk(ast.parse((tmp_path / "jobsched" / module).read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jobsched")
    }
    assert reached == {
        "jobsched.client",
        "jobsched.archived_rows",
        "jobsched.cdk.construct",
    }  # the construct: imported on first use only
    module, entry = HANDLER.rsplit(".", 1)
    assert f"def {entry}(" in (tmp_path / (module.replace(".", "/") + ".py")).read_text()


def test_a_failed_pip_fails_the_synth_with_its_output(tmp_path: Path) -> None:
    with pytest.raises(
        BundlingError, match=r"(?s)pip exit status 1\)\.\ncommand: .* httpx==.*ERROR: no network"
    ):
        ProviderBundler(run=FakePip(returncode=1)).try_bundle(str(tmp_path))
