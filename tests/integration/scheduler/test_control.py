"""ControlStore against moto: the lease and watermark conditions."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from jobsched.domain.lease import LeaseRecord
from jobsched.dynamodb.control import ControlStore


@pytest.fixture
def control(aws: Any, settings: Any) -> ControlStore:
    return ControlStore(aws.dynamodb, settings.control_table)


def test_lease_is_taken_once_renewed_by_its_holder_and_released(control: ControlStore) -> None:
    first = LeaseRecord(0, "a", 10, 5_000)
    assert control.read_lease(0) is None
    assert control.take_lease(first, previous=None, now_ms=0)
    assert not control.take_lease(LeaseRecord(0, "b", 11, 6_000), previous=None, now_ms=0)  # exists
    assert not control.take_lease(LeaseRecord(0, "b", 11, 6_000), previous=first, now_ms=4_000)  # not expired
    assert control.renew_lease(LeaseRecord(0, "a", 10, 9_000))
    assert not control.renew_lease(LeaseRecord(0, "b", 10, 9_000))  # not the holder
    assert not control.renew_lease(LeaseRecord(0, "a", 9, 9_000))  # not the term
    assert control.read_lease(0) == LeaseRecord(0, "a", 10, 9_000)
    # Taking over with a stale view of the lease (it was renewed since) is refused
    assert not control.take_lease(LeaseRecord(0, "b", 11, 16_000), previous=first, now_ms=6_000)
    assert control.release_lease(
        LeaseRecord(0, "a", 10, 4_999)
    )  # the holder gives the instant before its release
    assert control.read_lease(0) == LeaseRecord(0, "a", 10, 4_999)
    current = control.read_lease(0)
    assert control.take_lease(LeaseRecord(0, "b", 11, 16_000), previous=current, now_ms=6_000)
    assert not control.release_lease(LeaseRecord(0, "a", 10, 0))  # no longer a's
    assert control.read_lease(1) is None  # partitions are independent


def test_errors_other_than_refusals_propagate(aws: Any, settings: Any) -> None:
    control = ControlStore(aws.dynamodb, settings.control_table)
    with Stubber(aws.dynamodb) as stub:
        stub.add_client_error("update_item", service_error_code="ProvisionedThroughputExceededException")
        with pytest.raises(ClientError):
            control.renew_lease(LeaseRecord(0, "a", 1, 1))
