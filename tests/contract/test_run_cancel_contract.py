"""The cancel of a run (design §5.8) on every run store (the fake, DynamoDB on moto, SQLite): the cancel write and
its races with the claim, the heartbeat (``renew``, which answers the cancelled row), an outcome and a retry,
the record of a stopped try, a cancelled run in the listings and outside the failures index."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain.cancels import cancel_run
from jobsched.domain.runs import new_run
from jobsched.dynamodb.runs import RunStore
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import RunStatus
from jobsched.ports.runs import (
    ClaimRequest,
    DeadTransition,
    Owned,
    RetryTransition,
    RunFilter,
    RunKey,
    RunRow,
)
from jobsched.ports.tries import TryRecord
from jobsched.sqlite.runs import SqliteRunStore

from .conftest import BACKENDS, adapter_on, on_table

T0 = 1_767_578_400_000  # 2026-01-05T02:00Z, epoch ms
NOW = T0 + 1_500
KEY = RunKey("j_a", T0)
W1 = Owned("j_a", T0, 1, "w1")


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    """The run store under test: the fake, the DynamoDB adapter on the moto runs table, or the SQLite one."""
    return adapter_on(request, MemoryRunStore, SqliteRunStore, on_table(RunStore, "runs_table"))


def _queued(store: Any) -> RunRow:
    row = new_run("j_a", T0, now_ms=NOW, retention_days=90, sweep_after_ms=120_000, owner="team-a")
    assert store.put_new(row) is None
    return row


def _claim(store: Any, worker: str = "w1", now: int = NOW) -> Any:
    return store.claim(
        ClaimRequest(KEY, worker=worker, now_ms=now, stale_before_ms=now - 120_000, retry_due_by_ms=now)
    )


def test_a_queued_run_is_cancelled_once_and_never_claimed(store: Any) -> None:
    _queued(store)

    first = cancel_run(store, KEY, now_ms=NOW + 10, by="alice", reason="wrong input")
    second = cancel_run(store, KEY, now_ms=NOW + 20, by="carol")

    assert first.done and not second.done
    assert first.row == second.row == store.get("j_a", T0)  # the derived row is the stored one
    row = store.get("j_a", T0)
    assert row.status is RunStatus.CANCELLED and row.cancelled_from is RunStatus.QUEUED
    assert (row.cancelled_by, row.cancel_reason, row.finished_at) == ("alice", "wrong input", NOW + 10)
    assert row.sweep_at is None
    assert not _claim(store).claimed


def test_a_cancel_without_a_reason_stores_none(store: Any) -> None:
    _queued(store)
    assert cancel_run(store, KEY, now_ms=NOW, by="alice").done
    assert store.get("j_a", T0).cancel_reason is None


def test_a_missing_run_is_not_cancelled_and_none_is_made(store: Any) -> None:
    result = cancel_run(store, KEY, now_ms=NOW, by="alice")
    assert not result.done and result.row is None
    assert store.get("j_a", T0) is None


@pytest.mark.parametrize("finish", ["succeed", "dead", "skip"])
def test_a_finished_run_is_not_cancelled(store: Any, finish: str) -> None:
    _queued(store)
    assert _claim(store).claimed
    if finish == "succeed":
        assert store.succeed(W1, now_ms=NOW + 5)
    elif finish == "skip":
        assert store.skip(W1, now_ms=NOW + 5, reason="overlap")
    else:
        assert store.dead(W1, DeadTransition(error="boom", now_ms=NOW + 5, final_attempt=1, notify_at_ms=NOW))
    before = store.get("j_a", T0)

    result = cancel_run(store, KEY, now_ms=NOW + 10, by="alice")

    assert not result.done and result.row == before == store.get("j_a", T0)


def test_a_running_try_learns_of_the_cancel_from_its_heartbeat_and_records_its_try(store: Any) -> None:
    _queued(store)
    assert _claim(store).claimed
    assert store.renew(W1, now_ms=NOW + 30_000).renewed

    assert cancel_run(store, KEY, now_ms=NOW + 40_000, by="alice", reason="stop").done
    renewal = store.renew(W1, now_ms=NOW + 60_000)

    assert not renewal.renewed
    assert renewal.row is not None and renewal.row.status is RunStatus.CANCELLED
    assert (renewal.row.attempt, renewal.row.worker) == (1, "w1")
    # every outcome of the try is refused: cancelled stays
    assert not store.succeed(W1, now_ms=NOW + 61_000)
    assert not store.retry(W1, RetryTransition(error="boom", retry_at_ms=NOW, sweep_at_ms=NOW))
    assert not store.skip(W1, now_ms=NOW + 61_000, reason="x")
    # the stopped try is recorded, only by its own claim
    tried = (TryRecord(1, NOW, NOW + 60_000, "w1", "attempt 1 stopped"),)
    assert not store.stopped(Owned("j_a", T0, 1, "w2"), tries=tried)
    assert store.stopped(W1, tries=tried)
    row = store.get("j_a", T0)
    assert row.status is RunStatus.CANCELLED and row.tries == tried and row.finished_at == NOW + 40_000


def test_a_retrying_run_cancelled_is_never_claimed_for_its_retry(store: Any) -> None:
    _queued(store)
    assert _claim(store).claimed
    assert store.retry(W1, RetryTransition(error="boom", retry_at_ms=NOW + 10, sweep_at_ms=NOW + 100))

    assert cancel_run(store, KEY, now_ms=NOW + 20, by="alice").done

    assert not _claim(store, "w2", now=NOW + 1_000_000).claimed
    row = store.get("j_a", T0)
    assert row.status is RunStatus.CANCELLED and row.retry_at is None and row.sweep_at is None
    assert row.error == "boom"  # the failed try's error stays in the history


def test_a_lost_workers_running_run_cancelled_is_not_taken_over(store: Any) -> None:
    _queued(store)
    assert _claim(store).claimed
    assert cancel_run(store, KEY, now_ms=NOW + 20, by="alice").done

    assert not _claim(store, "w2", now=NOW + 10_000_000).claimed  # its heartbeat is long stale


def test_a_cancelled_run_is_listed_by_its_status_and_not_among_failures(store: Any) -> None:
    _queued(store)
    assert _claim(store).claimed
    owned = Owned("j_a", T0, 1, "w1", owner="team-a")
    assert store.retry(owned, RetryTransition(error="boom", retry_at_ms=NOW, sweep_at_ms=NOW + 100))
    assert [r.key for r in store.list_failed("team-a", 10)[0]] == [KEY]

    assert cancel_run(store, KEY, now_ms=NOW + 20, by="alice").done

    rows, _ = store.list_for_job("j_a", 10, RunFilter(status=RunStatus.CANCELLED))
    assert [r.status for r in rows] == [RunStatus.CANCELLED]
    assert store.list_failed("team-a", 10)[0] == []
