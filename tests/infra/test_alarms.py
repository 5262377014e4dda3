"""Alarm arithmetic: each alarm fires on the failure it is documented to catch, whatever the settings."""

from __future__ import annotations

import pytest

from tests.infra.support import Synth, synthesize

PARTITIONS = 8


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out-alarms"), {"scheduler_partitions": str(PARTITIONS)})


def test_a_partition_whose_scheduler_is_no_longer_invoked_raises_an_alarm(synth: Synth) -> None:
    # docs/deploy.md: SchedulerNotRunning fires on "fewer than 4 scheduler invocations per partition in 5
    # minutes". Given 8 partitions, each started once a minute by its own rule, and one rule that stopped
    # starting its partition (disabled, its permission removed...): its jobs never fire again, and a partition
    # that is not invoked reports no lag and no error.
    invocations_in_5_minutes = 5 * (PARTITIONS - 1)
    # Then an alarm on the scheduler's invocations is in ALARM.
    not_running = [
        alarm["Properties"]
        for alarm in synth.resources("AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("MetricName") == "Invocations"
    ]
    assert not_running
    assert any(
        alarm["ComparisonOperator"] == "LessThanThreshold" and invocations_in_5_minutes < alarm["Threshold"]
        for alarm in not_running
    ), [(a["ComparisonOperator"], a["Threshold"]) for a in not_running]
