"""The DynamoDB job store's timer items (design §4.1) when DynamoDB throttles a batch write: the items it
returns unprocessed are sent again after a back-off, and a batch still unprocessed is an error the tick
handles (its jobs stay due), never a silent loss."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain.registration import due_entry
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.jobs import DueQuery
from tests.support.aws import answer_unprocessed


def _entries(harness: Any, count: int) -> list[Any]:
    return [
        due_entry(
            f"j_{n:020x}",
            harness.T0 + 60_000,
            partition=0,
            shards=1,
            bucket_ms=60_000,
            now_ms=harness.T0,
            version=1,
        )
        for n in range(count)
    ]


def _throttle(store: Any, monkeypatch: pytest.MonkeyPatch, times: int) -> list[float]:
    """The store's client answers ``times`` batch writes with every item unprocessed; returns the sleeps."""
    return answer_unprocessed(store, monkeypatch, "batch_write_item", times)


def test_unprocessed_timer_items_are_sent_again_after_a_back_off(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = harness.jobs
    entries = _entries(harness, 3)
    slept = _throttle(store, monkeypatch, 2)
    store.put_timers(entries)
    assert slept == [0.05, 0.1]
    found, _ = store.query_due(DueQuery(0, entries[0].bucket, 0, harness.T0 + 60_000, lane=entries[0].lane))
    assert found == sorted(entries, key=lambda e: e.order)


def test_timer_items_still_unprocessed_after_the_back_offs_are_an_error(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = harness.jobs
    slept = _throttle(store, monkeypatch, 10)
    with pytest.raises(StoreUnavailable):
        store.put_timers(_entries(harness, 2))
    assert slept == [0.05, 0.1, 0.2]
