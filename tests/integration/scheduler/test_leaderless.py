"""The sweeper's count of scheduler partitions without a leader (``sweeper_runtime.check_leaders``): what the
``SchedulerPartitionWithoutLeader`` alarm watches, since a partition whose clock stopped reports no lag."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.aws.clients import Aws
from jobsched.clock import FakeClock
from jobsched.domain.lease import LeaseRecord
from jobsched.observability import MetricName, metrics
from jobsched.runtime.sweeper import check_leaders
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings
from tests.support.aws import published

NOW = 1_800_000_000_000


@pytest.fixture
def components(settings: Settings, aws: Aws) -> Components:
    three = settings.model_copy(update={"scheduler_partitions": 3})
    clock = FakeClock(NOW)
    return Components(three, aws, clock=clock, sleep=clock.sleep)


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_partitions_with_an_expired_released_or_missing_lease_are_counted(
    components: Components, capsys: Any
) -> None:
    # Given partition 0 led (its lease valid), partition 1's lease released by its last leader (no invocation
    # took over), and partition 2 never led (no lease record: its rule never fired)
    control = components.control()
    assert control.take_lease(LeaseRecord(0, "a", 1, NOW + 10_000), previous=None, now_ms=NOW)
    released = LeaseRecord(1, "b", 1, NOW + 10_000)
    assert control.take_lease(released, previous=None, now_ms=NOW)
    assert control.release_lease(LeaseRecord(1, "b", 1, NOW - 1))  # released the instant before now
    metrics.clear_metrics()
    capsys.readouterr()
    # When the sweeper counts them
    leaderless = check_leaders(components)
    # Then partitions 1 and 2 are without a leader, and their count is published
    assert leaderless == [1, 2]
    assert published(capsys, MetricName.PARTITIONS_WITHOUT_LEADER) == [2.0]
    # and once partition 0's lease expires by the clock, it is counted too
    components.clock.advance(10_000)  # type: ignore[attr-defined]
    assert check_leaders(components) == [0, 1, 2]


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_leases_that_cannot_be_read_publish_no_count(
    components: Components, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobsched.dynamodb.control import ControlStore

    def unavailable(self: Any, partition: int) -> None:
        raise RuntimeError("ThrottlingException")

    monkeypatch.setattr(ControlStore, "read_lease", unavailable)
    metrics.clear_metrics()
    capsys.readouterr()
    # no count: the alarm sees a missing minute (breaching), not "0 without a leader"
    assert check_leaders(components) is None
    assert published(capsys, MetricName.PARTITIONS_WITHOUT_LEADER) == []


def test_a_hand_over_caught_between_two_holders_does_not_count() -> None:
    # Given partition 1 caught mid-hand-over (released by the leaving invocation, taken by the next a second
    # later) and partition 2 whose clock stopped (no holder when read, nor 3 s later)
    from jobsched.domain.lease import LEADERLESS_RECHECK_S, partitions_without_leader

    clock = FakeClock(NOW)
    taken_at = NOW + 1_000

    class Leases:
        def read_lease(self, partition: int) -> LeaseRecord | None:
            if partition == 0:
                return LeaseRecord(0, "a", 3, NOW + 10_000)
            if partition == 1:
                return (
                    LeaseRecord(1, "b", 5, NOW + 10_000) if clock() >= taken_at else LeaseRecord(1, "a", 4, 0)
                )
            return LeaseRecord(2, "c", 2, NOW - 60_000)

    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        clock.sleep(seconds)

    # When the sweeper counts them
    leaderless = partitions_without_leader(Leases(), 3, clock, wait)  # type: ignore[arg-type]
    # Then only the stopped partition counts: the hand-over was over when read again
    assert leaderless == [2] and waits == [LEADERLESS_RECHECK_S]
