"""The stack as ``make synth`` builds it offline (no account, no region, default context) passes cdk-nag
(AwsSolutions) and cfn-lint."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from cfnlint.api import lint

from tests.infra.support import Synth, nag_violations


@pytest.fixture(scope="module")
def synth(default_synth: Synth) -> Synth:
    # The synth itself runs cdk-nag as a policy-validation plugin: an unacknowledged error raises there.
    return default_synth


def test_cdk_nag_reports_nothing_unacknowledged(synth: Synth) -> None:
    violations = nag_violations(synth.stack)
    assert [v for v in violations if v["severity"] == "error"] == []
    # Warnings were reviewed too (each acknowledged with a reason): none is left.
    assert violations == []


def test_the_nag_check_does_see_a_violation() -> None:
    # Given a stack with a queue that has no dead-letter queue and accepts plain HTTP,
    stack = cdk.Stack(cdk.App(), "Probe")
    sqs.Queue(stack, "Bare", encryption=sqs.QueueEncryption.UNENCRYPTED)
    # When the same checks run on it, then they report errors (so an empty report above means something).
    rules = {v["rule"] for v in nag_violations(stack) if v["severity"] == "error"}
    assert {"AwsSolutions-SQS2", "AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= rules


def test_every_acknowledgment_is_written_with_a_reason(synth: Synth) -> None:
    acknowledged = [
        rule
        for resource in synth.raw["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert acknowledged
    assert all(len(rule["reason"]) > 40 for rule in acknowledged), acknowledged
    # IAM wildcards are acknowledged finding by finding, never as a whole rule.
    assert "AwsSolutions-IAM5" not in {rule["id"] for rule in acknowledged}


def test_cfn_lint_finds_no_error(synth: Synth) -> None:
    matches = lint(json.dumps(synth.raw), regions=["us-east-1"])
    errors = [
        f"{m.rule.id} {m.message} at {'/'.join(str(p) for p in m.path)}"
        for m in matches
        if m.rule.id.startswith("E")
    ]
    assert errors == []


def test_offline_synth_is_environment_agnostic(synth: Synth) -> None:
    # No credentials: no account or region is baked into the template.
    assert synth.stack.account == cdk.Aws.ACCOUNT_ID
    text = json.dumps(synth.raw)
    assert "123456789012" not in text
    assert '"AWS::Region"' in text
