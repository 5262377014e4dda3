"""Roles grant what their function's code calls and not much more (the other direction, every request allowed,
is checked on moto in tests/integration/*/test_role_grants.py)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.functions import handler_path
from jobsched.resources import RUN_QUEUE_DLQ
from tests.infra.support import Synth, nag_violations, synthesize
from tests.support.grants import granted


def test_only_the_sweeper_may_read_the_run_queues_dead_letter_queue() -> None:
    # The sweeper drains the DLQ (jobsched.domain.sweeper, wiring.Components.sweeper); the worker never reads it.
    def on_dlq(function: str) -> set[str]:
        return {action for action, resource, _ in granted(function) if resource == RUN_QUEUE_DLQ.env_var}

    assert on_dlq("sweeper") == {"sqs:ReceiveMessage", "sqs:DeleteMessage"}
    assert on_dlq("worker") == on_dlq("api") == on_dlq("scheduler") == set()


def _iam_statements(synth: Synth, function: str) -> list[tuple[str, str]]:
    """The ``(action, resource)`` pairs on IAM (``iam:*`` actions) of ``function``'s role, resources resolved
    to text (``arn:<AWS::Partition>:iam::<AWS::AccountId>:role/*``)."""

    def text(resource: Any) -> str:
        if isinstance(resource, dict) and "Fn::Join" in resource:
            return "".join(
                part if isinstance(part, str) else f"<{part['Ref']}>" for part in resource["Fn::Join"][1]
            )
        return str(resource)

    functions = synth.resources("AWS::Lambda::Function")
    (props,) = [
        r["Properties"] for r in functions.values() if r["Properties"]["Handler"] == handler_path(function)
    ]
    role = props["Role"]["Fn::GetAtt"][0]
    pairs: list[tuple[str, str]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = (
                statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            )
            pairs += [(a, text(r)) for a in actions if a.startswith("iam:") for r in resources]
    return sorted(pairs)


FUNCTIONS = ("api", "scheduler", "worker", "sweeper")


def test_with_arn_owners_no_function_reads_iam(default_synth: Synth) -> None:
    # owner_from=arn (the default) takes the owner from the caller's ARN: nothing reads IAM
    assert {f: _iam_statements(default_synth, f) for f in FUNCTIONS} == {f: [] for f in FUNCTIONS}


@pytest.fixture(scope="module")
def tag_owners_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The stack with owner_from=tag:team (cdk-nag runs inside the synth: an unacknowledged finding raises)."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-tag-owners"), {"owner_from": "tag:team"})


def test_with_tag_owners_only_the_api_reads_principal_tags(tag_owners_synth: Synth) -> None:
    # jobsched.aws.principals.IamPrincipalTags calls ListRoleTags/ListUserTags, on this account's principals
    assert _iam_statements(tag_owners_synth, "api") == [
        ("iam:ListRoleTags", "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/*"),
        ("iam:ListUserTags", "arn:<AWS::Partition>:iam::<AWS::AccountId>:user/*"),
    ]
    assert {f: _iam_statements(tag_owners_synth, f) for f in FUNCTIONS[1:]} == {f: [] for f in FUNCTIONS[1:]}


def test_with_tag_owners_cdk_nag_reports_nothing_unacknowledged(tag_owners_synth: Synth) -> None:
    assert nag_violations(tag_owners_synth.stack) == []


def test_with_tag_owners_the_api_gets_the_setting(tag_owners_synth: Synth) -> None:
    functions = tag_owners_synth.resources("AWS::Lambda::Function").values()
    api = [r for r in functions if r["Properties"]["Handler"] == handler_path("api")]
    assert api[0]["Properties"]["Environment"]["Variables"]["OWNER_FROM"] == "tag:team"
