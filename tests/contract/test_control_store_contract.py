"""One contract for the CONTROL store (leases, watermarks, lateness summaries, the partitions' high-water mark), run
against the in-memory fake, the DynamoDB adapter (on moto) and the SQLite adapter of local mode."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.aws.clients import Aws
from jobsched.domain.lease import LeaseRecord
from jobsched.dynamodb.control import ControlStore
from jobsched.memory.control import MemoryControlStore
from jobsched.settings import Settings
from jobsched.sqlite.control import SqliteControlStore

from .conftest import BACKENDS, adapter_on


def _dynamodb_control(aws: Aws, settings: Settings) -> ControlStore:
    return ControlStore(aws.dynamodb, settings.control_table)


@pytest.fixture(params=BACKENDS)
def control(request: pytest.FixtureRequest) -> Any:
    return adapter_on(request, MemoryControlStore, SqliteControlStore, _dynamodb_control)


def test_a_lease_is_taken_once_and_then_only_from_the_expired_term_it_was_read_at(control: Any) -> None:
    first = LeaseRecord(0, "a", 10, 5_000)
    assert control.take_lease(first, previous=None, now_ms=0)
    assert not control.take_lease(LeaseRecord(0, "b", 11, 6_000), previous=None, now_ms=0)
    assert control.read_lease(0) == first and control.read_lease(1) is None
    assert not control.take_lease(LeaseRecord(0, "b", 11, 9_000), previous=first, now_ms=4_000)  # not expired
    stale = LeaseRecord(0, "a", 9, 5_000)
    assert not control.take_lease(LeaseRecord(0, "b", 11, 9_000), previous=stale, now_ms=6_000)  # other term
    assert control.take_lease(LeaseRecord(0, "b", 11, 16_000), previous=first, now_ms=6_000)
    assert control.read_lease(0) == LeaseRecord(0, "b", 11, 16_000)


def test_renew_and_release_need_the_same_holder_and_term(control: Any) -> None:
    held = LeaseRecord(0, "a", 10, 5_000)
    control.take_lease(held, previous=None, now_ms=0)
    assert control.renew_lease(LeaseRecord(0, "a", 10, 8_000))
    assert not control.renew_lease(LeaseRecord(0, "b", 10, 9_000))
    assert not control.release_lease(LeaseRecord(0, "a", 9, 0))
    assert control.read_lease(0) == LeaseRecord(0, "a", 10, 8_000)
    # a release stores the expiry it is given (the holder gives the instant before its release)
    assert control.release_lease(LeaseRecord(0, "a", 10, 6_999))
    assert control.read_lease(0) == LeaseRecord(0, "a", 10, 6_999)


def test_watermarks_only_advance_and_an_older_term_cannot_move_them(control: Any) -> None:
    assert control.read_watermark(0) is None
    assert control.advance_watermark(0, 100, term=5, now_ms=1)
    assert control.advance_watermark(0, 101, term=5, now_ms=2)
    assert not control.advance_watermark(0, 100, term=6, now_ms=3)  # never back
    assert not control.advance_watermark(0, 101, term=6, now_ms=3)  # nor in place
    assert not control.advance_watermark(0, 105, term=4, now_ms=4)  # an older leader
    assert control.read_watermark(0) == 101 and control.read_watermark(1) is None


def test_read_positions_are_stored_per_partition_and_an_older_term_cannot_overwrite_them(
    control: Any,
) -> None:
    assert control.read_positions(0) is None
    assert control.save_positions(0, '{"1:0:early": [5, "j", 5, 1]}', term=5)
    assert control.save_positions(0, '{"1:0:early": [6, "j", 6, 1]}', term=5)  # the same leader, again
    assert not control.save_positions(0, "{}", term=4)  # an older leader
    assert control.read_positions(0) == '{"1:0:early": [6, "j", 6, 1]}' and control.read_positions(1) is None
    assert control.save_positions(0, "{}", term=6)
    assert control.read_positions(0) == "{}"


def test_the_due_shard_high_water_mark_only_rises_apart_from_the_partitions_one(control: Any) -> None:
    assert control.raise_shard_high_water(4) == (4, True)
    assert control.raise_partition_high_water(1) == (1, True)  # a mark of its own
    assert control.raise_shard_high_water(1) == (4, False)  # lowered: still read 4
    assert control.raise_shard_high_water(8) == (8, False)
    assert control.raise_shard_high_water(8) == (8, False)


def test_the_partition_high_water_mark_only_rises_and_says_when_it_was_missing(control: Any) -> None:
    assert control.raise_partition_high_water(2) == (2, True)
    assert control.raise_partition_high_water(4) == (4, False)
    assert control.raise_partition_high_water(3) == (4, False)
    assert control.raise_partition_high_water(4) == (4, False)


def test_lateness_summaries_are_stored_per_partition_and_an_older_term_cannot_overwrite_them(
    control: Any,
) -> None:
    assert control.read_lateness(0) is None
    assert control.save_lateness(0, '{"at": 1}', term=5)
    assert control.save_lateness(0, '{"at": 2}', term=5)  # the same leader, a minute later
    assert not control.save_lateness(0, '{"at": 0}', term=4)  # an older leader
    assert control.read_lateness(0) == '{"at": 2}' and control.read_lateness(1) is None
    assert control.save_lateness(1, '{"at": 3}', term=1)  # each partition its own
    assert control.save_lateness(0, '{"at": 4}', term=6)
    assert (control.read_lateness(0), control.read_lateness(1)) == ('{"at": 4}', '{"at": 3}')
    # the read positions, kept under the same terms, are another item
    assert control.read_positions(0) is None
