"""Deployment settings the stack accepts must deploy: a value AWS would refuse at deploy time (or that would
break the worker's protocol once deployed) fails ``cdk synth`` with a ``ConfigError`` naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.config import MAX_STACK_PARTITIONS, ConfigError, DeploymentConfig
from infra.stack import build_app
from tests.infra.support import SKIP_BUNDLING, project_context

SQS_MAX_VISIBILITY_S = 43_200
"""The longest visibility timeout SQS accepts (ChangeMessageVisibility), 12 hours (SQS developer guide)."""


def test_the_largest_documented_partition_count_synthesizes_or_is_refused_naming_it(tmp_path: Path) -> None:
    # docs/deploy.md and Settings allow scheduler_partitions up to 256; each partition adds an EventBridge rule
    # and a Lambda permission, and a CloudFormation stack holds at most 500 resources.
    context = {**project_context(), **SKIP_BUNDLING, "scheduler_partitions": "256"}
    try:
        app, _ = build_app(context, outdir=str(tmp_path))
        app.synth()
    except ConfigError as error:
        assert "scheduler_partitions" in str(error)


def test_a_heartbeat_interval_not_shorter_than_the_staleness_is_refused_naming_it() -> None:
    # A running run whose beats come no more often than heartbeat_stale_s looks lost between two beats (another
    # delivery takes it over while it runs), and the worker abandons every try at its first beat
    # (give up after heartbeat_stale_s - heartbeat_interval_s <= 0).
    with pytest.raises(ConfigError, match="heartbeat_interval_s"):
        DeploymentConfig.from_context({"heartbeat_interval_s": "120", "heartbeat_stale_s": "120"})


def test_a_heartbeat_visibility_above_what_sqs_accepts_is_refused_naming_it() -> None:
    # Each heartbeat sets its message's visibility to heartbeat_stale_s + heartbeat_interval_s, which SQS
    # refuses above 12 hours: every heartbeat's visibility change would fail.
    with pytest.raises(ConfigError, match="heartbeat_stale_s"):
        DeploymentConfig.from_context({"heartbeat_stale_s": str(SQS_MAX_VISIBILITY_S)})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("target_function_arns", "billing-close"),
        ("target_queue_arns", "https://sqs.eu-west-1.amazonaws.com/123456789012/billing-inbox"),
    ],
)
def test_an_extra_target_that_is_not_an_arn_is_refused_naming_it(key: str, value: str) -> None:
    # The value becomes the Resource of the target role's policy, which IAM refuses at deploy time unless it is
    # an ARN (a function name or a queue URL is the likely mistake).
    with pytest.raises(ConfigError, match=key):
        DeploymentConfig.from_context({key: value})


def test_a_stack_name_cloudformation_refuses_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="stack_name"):
        build_app({**SKIP_BUNDLING, "stack_name": "billing_prod"}, outdir=str(tmp_path))


def test_the_most_partitions_a_deployment_accepts_synthesize(tmp_path: Path) -> None:
    context = {**project_context(), **SKIP_BUNDLING, "scheduler_partitions": str(MAX_STACK_PARTITIONS)}
    app, stack = build_app(context, outdir=str(tmp_path))
    app.synth()
    assert len(stack.triggers.scheduler_rules) == MAX_STACK_PARTITIONS


def test_alarm_emails_are_subscribed_to_the_operations_topic(tmp_path: Path) -> None:
    from tests.infra.support import synthesize

    synth = synthesize(tmp_path, {"alarm_emails": "ops@example.com, pager@example.org"})

    (topic_id,) = [k for k, v in synth.resources("AWS::SNS::Topic").items() if "AlarmTopic" in k]
    subscribed = sorted(
        (s["Properties"]["Protocol"], s["Properties"]["Endpoint"])
        for s in synth.resources("AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": topic_id}
    )
    assert subscribed == [("email", "ops@example.com"), ("email", "pager@example.org")]


@pytest.mark.parametrize("value", ["ops", "ops@example", "ops @example.com", "a@b@example.com"])
def test_an_alarm_email_that_is_no_address_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ConfigError, match="alarm_emails"):
        DeploymentConfig.from_context({"alarm_emails": value})
