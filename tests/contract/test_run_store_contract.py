"""The run store's contract: the same cases against the in-memory fake (``jobsched.memory.runs``) and the
DynamoDB adapter (``jobsched.dynamodb.runs``) on moto. Conditional inserts, claims, fencing of every transition on
the claim ``(attempt, worker)``, give-back, paging of a job's history, the sweep index, and the cancel of a run
(design §5.8) with its races against the claim, the heartbeat, an outcome and a retry."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from jobsched.domain.cancels import cancel_run
from jobsched.domain.runs import new_run, rerun_request, sweep_shard
from jobsched.dynamodb.runs import RunStore
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import RunKind, RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.runs import (
    ClaimRequest,
    DeadTransition,
    Owned,
    Rerun,
    RetryTransition,
    RunFilter,
    RunKey,
    RunRow,
    SweepDeferral,
)
from jobsched.ports.tries import TryRecord
from jobsched.sqlite.runs import SqliteRunStore

from .conftest import BACKENDS, adapter_on, on_table

T0 = 1_767_578_400_000  # 2026-01-05T02:00Z, epoch ms
NOW = T0 + 1_500
SWEEP_AFTER_MS = 120_000
FIRST = RunKey("j_a", T0)
W1 = Owned("j_a", T0, 1, "w1")  # the first claim of the first run


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    """The run store under test: the fake, the DynamoDB adapter on the moto runs table, or the SQLite one."""
    return adapter_on(request, MemoryRunStore, SqliteRunStore, on_table(RunStore, "runs_table"))


def _run(job_id: str = "j_a", scheduled_for: int = T0, now: int = NOW, **kwargs: Any) -> RunRow:
    return new_run(
        job_id, scheduled_for, now_ms=now, retention_days=90, sweep_after_ms=SWEEP_AFTER_MS, **kwargs
    )


def _claim(
    store: Any, worker: str = "w1", now: int = NOW, *, key: RunKey = FIRST, create: RunRow | None = None
) -> Any:
    """``worker``'s claim of the run ``key`` at ``now`` (epoch ms) as a worker makes it: a heartbeat over 120 s
    old is lost, a retry due by now is taken; ``create``: the row to make when the run has none."""
    return store.claim(
        ClaimRequest(
            key, worker=worker, now_ms=now, stale_before_ms=now - 120_000, retry_due_by_ms=now, create=create
        )
    )


# --- inserts and reads ----------------------------------------------------------------------------------


def test_a_run_is_inserted_once_and_reads_back_as_written(store: Any) -> None:
    row = _run(
        owner="team-a", kind=RunKind.MANUAL, term=7, dispatch_at_ms=T0 + 300, error="note", skipped_count=None
    )
    assert store.put_new(row) is None
    assert store.get("j_a", T0) == row
    # a second insert of the same (job_id, scheduled_for) is refused with the row as stored
    existing = store.put_new(_run(term=8))
    assert existing == row and existing.term == 7
    assert store.get("j_a", T0 + 1) is None


def test_a_skipped_summary_row_is_finished_and_outside_the_sweep_index(store: Any) -> None:
    row = _run(status=RunStatus.SKIPPED, skipped_count=5, skipped_through=T0 + 4_000, error="missed")
    assert store.put_new(row) is None
    stored = store.get("j_a", T0)
    assert stored == row and stored.finished_at == NOW and stored.sweep_at is None
    assert store.sweep_due(sweep_shard("j_a"), NOW + 10**9, 10).keys == []


def test_a_keyed_insert_binds_the_key_to_its_run(store: Any) -> None:
    first = store.put_new_keyed(_run(scheduled_for=T0), owner="team-a", idempotency_key="k1")
    assert first.created
    # the same key again names the first run, whatever slot it asks for; nothing is written
    again = store.put_new_keyed(_run(scheduled_for=T0 + 1), owner="team-a", idempotency_key="k1")
    assert (again.created, again.key_used, again.key_run_at) == (False, True, T0)
    assert store.get("j_a", T0 + 1) is None
    # another key on a taken slot reports the run holding it
    taken = store.put_new_keyed(_run(scheduled_for=T0), owner="team-a", idempotency_key="k2")
    assert (taken.created, taken.key_used) == (False, False) and taken.existing == store.get("j_a", T0)
    # the key is per owner
    other = store.put_new_keyed(_run(scheduled_for=T0 + 2), owner="team-b", idempotency_key="k1")
    assert other.created


def test_a_jobs_history_pages_newest_first(store: Any) -> None:
    for k in range(5):
        status = RunStatus.SKIPPED if k % 2 else RunStatus.QUEUED
        assert store.put_new(_run(scheduled_for=T0 + k, status=status)) is None
    assert store.put_new(_run("j_b")) is None
    rows, cursor = store.list_for_job("j_a", 2)
    assert [r.scheduled_for for r in rows] == [T0 + 4, T0 + 3] and cursor == T0 + 3
    rows, cursor = store.list_for_job("j_a", 2, before_ms=cursor)
    assert [r.scheduled_for for r in rows] == [T0 + 2, T0 + 1] and cursor == T0 + 1
    rows, cursor = store.list_for_job("j_a", 2, before_ms=cursor)
    assert [r.scheduled_for for r in rows] == [T0] and cursor is None
    rows, cursor = store.list_for_job("j_a", 10, RunFilter(status=RunStatus.SKIPPED))
    assert [r.scheduled_for for r in rows] == [T0 + 3, T0 + 1] and cursor is None
    rows, cursor = store.list_for_job("j_a", 1, RunFilter(status=RunStatus.QUEUED))
    assert [r.scheduled_for for r in rows] == [T0 + 4] and cursor == T0 + 4


def test_rows_between_are_oldest_first_within_the_range(store: Any) -> None:
    for k in range(6):
        store.put_new(_run(scheduled_for=T0 + k * 1000))
    rows = store.rows_between("j_a", T0 + 1000, T0 + 4000, limit=10)
    assert [r.scheduled_for for r in rows] == [T0 + 1000, T0 + 2000, T0 + 3000, T0 + 4000]
    assert [r.scheduled_for for r in store.rows_between("j_a", T0, T0 + 5000, limit=2)] == [T0, T0 + 1000]


# --- claims ---------------------------------------------------------------------------------------------


def test_a_claim_takes_a_queued_run_once(store: Any) -> None:
    store.put_new(_run())
    claim = _claim(store, now=NOW + 500)
    assert claim.claimed and claim.before == _run()
    row = store.get("j_a", T0)
    assert (row.status, row.attempt, row.worker) == (RunStatus.RUNNING, 1, "w1")
    assert row.started_at == row.heartbeat_at == NOW + 500 and row.lateness_ms == NOW + 500 - T0
    assert row.sweep_at == NOW + SWEEP_AFTER_MS  # claims leave the sweep index alone
    refused = _claim(store, "w2", now=NOW + 600)
    assert not refused.claimed and refused.before == row
    assert _claim(store, key=RunKey("j_a", T0 + 1)).before is None


def _created(now: int = NOW, **kwargs: Any) -> RunRow:
    """The row a worker's claim creates for a scheduled run from its message: out of the sweep index."""
    return new_run("j_a", T0, now_ms=now, retention_days=90, sweep_after_ms=None, **kwargs)


def test_a_claim_creates_the_row_of_a_run_that_has_none_once(store: Any) -> None:
    create = _created(dispatch_at_ms=T0 + 300, term=7)
    claim = _claim(store, "w1", NOW + 500, create=create)
    assert claim.claimed and claim.before == create
    row = store.get("j_a", T0)
    assert row == replace(
        create,
        status=RunStatus.RUNNING,
        attempt=1,
        worker="w1",
        started_at=NOW + 500,
        heartbeat_at=NOW + 500,
        lateness_ms=NOW + 500 - T0,
    )
    assert row.sweep_at is None and store.sweep_due(sweep_shard("j_a"), NOW + 10**9, 10).keys == []
    # a copy of the message (while it runs, or after it finished) is refused with the row as stored
    refused = _claim(store, "w2", NOW + 600, create=create)
    assert not refused.claimed and refused.before == row
    assert store.succeed(Owned("j_a", T0, 1, "w1"), now_ms=NOW + 700)
    again = _claim(store, "w3", NOW + 10**9, create=_created(now=NOW + 10**9))
    assert not again.claimed and again.before is not None and again.before.status is RunStatus.SUCCEEDED
    assert store.get("j_a", T0).attempt == 1


@pytest.mark.parametrize("dead", [False, True], ids=["retrying", "dead"])
def test_a_created_row_enters_the_sweep_index_when_its_try_fails(store: Any, dead: bool) -> None:
    # Given a scheduled run whose row its claim made (out of the sweep index, as the happy path wants)
    assert _claim(store, create=_created()).claimed
    owned = Owned("j_a", T0, 1, "w1", owner="team-a")
    # When its try fails: retrying (the sweeper re-enqueues it if the retry message never comes), or dead (the
    # sweeper sends its notifications if the worker could not)
    if dead:
        change = DeadTransition(now_ms=NOW, error="boom", final_attempt=1, notify_at_ms=NOW + 60_000)
        assert store.dead(owned, change)
    else:
        assert store.retry(
            owned, RetryTransition(error="boom", retry_at_ms=NOW + 1, sweep_at_ms=NOW + 60_000)
        )
    # Then the sweep index lists it once its sweep_at is due
    assert store.get("j_a", T0).sweep_at == NOW + 60_000
    assert store.sweep_due(sweep_shard("j_a"), NOW + 60_000, 10).keys == [FIRST]


def test_a_running_row_is_watched_once_and_only_under_its_claim(store: Any) -> None:
    # Given a scheduled run whose row its claim made (out of the sweep index) and is running under w1
    assert _claim(store, create=_created()).claimed
    # When a duplicate delivery asks the store to watch it: not under another claim, then under its own
    assert not store.watch(Owned("j_a", T0, 1, "w2"), sweep_at_ms=NOW + 120_000)
    assert store.watch(Owned("j_a", T0, 1, "w1"), sweep_at_ms=NOW + 120_000)
    # Then it is in the sweep index from then on, and a second watch changes nothing
    assert not store.watch(Owned("j_a", T0, 1, "w1"), sweep_at_ms=NOW + 999_000)
    assert store.get("j_a", T0).sweep_at == NOW + 120_000
    assert store.sweep_due(sweep_shard("j_a"), NOW + 120_000, 10).keys == [FIRST]


def test_a_claim_with_create_takes_an_existing_queued_row_as_it_is(store: Any) -> None:
    # a row saved before the claim (a manual run; a scheduled run saved queued: design, Upgrades in flight) keeps its
    # fields: create only fills what a new row needs
    saved = _run(term=3, owner="team-a", kind=RunKind.MANUAL)
    store.put_new(saved)
    claim = _claim(store, "w1", NOW + 500, create=_created(now=NOW + 400, term=9))
    assert claim.claimed and claim.before == saved
    row = store.get("j_a", T0)
    assert (row.term, row.owner, row.kind, row.enqueued_at, row.sweep_at) == (
        3,
        "team-a",
        RunKind.MANUAL,
        NOW,
        NOW + SWEEP_AFTER_MS,
    )


def test_a_claim_for_a_round_takes_no_row_queued_after_it(store: Any) -> None:
    # Given a run queued at NOW (a re-run's or a backfill's round)
    store.put_new(_run())

    def claim(queued_by: int, create: RunRow | None = None) -> Any:
        return store.claim(
            ClaimRequest(
                FIRST,
                worker="sweeper",
                now_ms=NOW + 500,
                stale_before_ms=NOW - 120_000,
                retry_due_by_ms=NOW + 500,
                create=create,
                queued_by_ms=queued_by,
            )
        )

    # When a claim asks for it on behalf of a message sent before that round (with or without create)
    refused = claim(NOW - 1, create=_created(now=NOW - 1))
    # Then it is refused with the row as stored, which stays queued
    assert not refused.claimed and refused.before == _run()
    assert not claim(NOW - 1).claimed and store.get("j_a", T0) == _run()
    # And a message sent at or after the round's start claims it
    assert claim(NOW).claimed and store.get("j_a", T0).status is RunStatus.RUNNING
    # And with no row, the claim creates one whatever the message's instant
    other = RunKey("j_a", T0 + 1)
    created = new_run("j_a", T0 + 1, now_ms=NOW - 5, retention_days=90, sweep_after_ms=None)
    assert store.claim(
        ClaimRequest(
            other,
            worker="sweeper",
            now_ms=NOW,
            stale_before_ms=0,
            retry_due_by_ms=NOW,
            create=created,
            queued_by_ms=NOW - 5,
        )
    ).claimed


def test_a_retrying_run_is_claimable_once_due_and_a_stale_running_one_is_taken_over(store: Any) -> None:
    store.put_new(_run())
    _claim(store)
    assert store.retry(W1, RetryTransition(error="boom", retry_at_ms=NOW + 10_000, sweep_at_ms=NOW + 130_000))
    assert not _claim(store, "w2", now=NOW + 9_000).claimed  # not yet due
    second = _claim(store, "w2", now=NOW + 10_000)
    assert (
        second.claimed
        and second.before.status is RunStatus.RETRYING
        and second.before.retry_at == NOW + 10_000
    )
    row = store.get("j_a", T0)
    assert (row.attempt, row.worker, row.retry_at, row.lateness_ms) == (2, "w2", None, NOW - T0)
    # a running run is taken over only once its heartbeat is stale
    assert not _claim(store, "w3", now=NOW + 10_000 + 120_000).claimed
    third = _claim(store, "w3", now=NOW + 10_000 + 120_001)
    assert third.claimed and store.get("j_a", T0).attempt == 3


# --- fencing of transitions ------------------------------------------------------------------------------


@pytest.mark.parametrize("stranger", [Owned("j_a", T0, 2, "w1"), Owned("j_a", T0, 1, "w2")])
def test_every_transition_is_fenced_on_the_claim(store: Any, stranger: Owned) -> None:
    store.put_new(_run())
    _claim(store)
    before = store.get("j_a", T0)
    assert not store.heartbeat(stranger, now_ms=NOW + 1)
    assert not store.succeed(stranger, now_ms=NOW + 1)
    assert not store.retry(stranger, RetryTransition(error="e", retry_at_ms=NOW, sweep_at_ms=NOW))
    assert not store.dead(stranger, DeadTransition(now_ms=NOW, error="e", final_attempt=1, notify_at_ms=NOW))
    assert not store.skip(stranger, now_ms=NOW, reason="r")
    assert not store.give_back(stranger, before=_run())
    assert store.get("j_a", T0) == before
    # an absent run refuses too
    assert not store.heartbeat(Owned("j_a", T0 + 1, 1, "w1"), now_ms=NOW)


def test_a_sweepers_transition_loses_to_a_beat_since_it_read(store: Any) -> None:
    store.put_new(_run())
    _claim(store)
    assert store.heartbeat(W1, now_ms=NOW + 30_000)
    assert not store.retry(
        replace(W1, heartbeat_at=NOW), RetryTransition(error="lost", retry_at_ms=NOW, sweep_at_ms=NOW)
    )
    assert store.get("j_a", T0).heartbeat_at == NOW + 30_000
    assert store.skip(replace(W1, heartbeat_at=NOW + 30_000), now_ms=NOW + 40_000, reason="gone")


def test_success_clears_the_error_and_leaves_the_sweep_index(store: Any) -> None:
    store.put_new(_run())
    _claim(store)
    store.retry(W1, RetryTransition(error="boom", retry_at_ms=NOW, sweep_at_ms=NOW + 1))
    _claim(store, "w2", now=NOW + 5)
    assert store.succeed(Owned("j_a", T0, 2, "w2"), now_ms=NOW + 9)
    row = store.get("j_a", T0)
    assert (row.status, row.finished_at, row.error, row.sweep_at, row.retry_at) == (
        RunStatus.SUCCEEDED,
        NOW + 9,
        None,
        None,
        None,
    )
    assert store.sweep_due(sweep_shard("j_a"), NOW + 10**9, 10).keys == []


def test_a_success_with_downstream_jobs_stays_in_the_sweep_index_until_cleared(store: Any) -> None:
    # design §2.1: the run of a job with downstream jobs is swept until their runs are made
    store.put_new(_run())
    _claim(store)
    assert store.succeed(W1, now_ms=NOW + 9, chain_sweep_at_ms=NOW + SWEEP_AFTER_MS)
    row = store.get("j_a", T0)
    assert (row.status, row.sweep_at) == (RunStatus.SUCCEEDED, NOW + SWEEP_AFTER_MS)
    assert store.sweep_due(sweep_shard("j_a"), NOW + SWEEP_AFTER_MS, 10).keys == [FIRST]
    assert store.clear_sweep("j_a", T0)
    assert store.sweep_due(sweep_shard("j_a"), NOW + 10**9, 10).keys == []


def test_a_chained_run_is_inserted_once_with_its_upstream_run(store: Any) -> None:
    chained = replace(_run("j_b", kind=RunKind.CHAINED), upstream_run_id=f"j_a@{T0}")
    assert store.put_new(chained) is None
    again = replace(chained, enqueued_at=NOW + 60_000, upstream_run_id=f"j_c@{T0}")
    assert store.put_new(again) == chained  # refused: the existing row, as first written
    assert store.get("j_b", T0) == chained
    (listed,), _ = store.list_for_job("j_b", 10)
    assert (listed.kind, listed.upstream_run_id) == (RunKind.CHAINED, f"j_a@{T0}")


def test_a_dead_run_stays_in_the_sweep_index_until_notified(store: Any) -> None:
    store.put_new(_run())
    _claim(store)
    assert store.dead(
        W1, DeadTransition(now_ms=NOW + 5, error="out", final_attempt=1, notify_at_ms=NOW + 60_000)
    )
    row = store.get("j_a", T0)
    assert (row.status, row.notify_pending, row.sweep_at, row.finished_at) == (
        RunStatus.DEAD,
        True,
        NOW + 60_000,
        NOW + 5,
    )
    assert not store.clear_sweep("j_a", T0)  # still owes its alert
    assert store.sweep_due(sweep_shard("j_a"), NOW + 60_000, 10).keys == [RunKey("j_a", T0)]
    assert store.notified("j_a", T0)
    row = store.get("j_a", T0)
    assert not row.notify_pending and row.sweep_at is None


def test_a_give_back_restores_the_row_as_the_claim_found_it(store: Any) -> None:
    store.put_new(_run())
    _claim(store)
    store.retry(W1, RetryTransition(error="e", retry_at_ms=NOW + 7, sweep_at_ms=NOW + 9))
    found = store.get("j_a", T0)
    claim = _claim(store, "w2", now=NOW + 7)
    assert store.give_back(Owned("j_a", T0, 2, "w2"), before=claim.before)
    assert store.get("j_a", T0) == found
    # a first claim given back leaves no trace of it either
    store.put_new(_run(scheduled_for=T0 + 1))
    first = _claim(store, key=RunKey("j_a", T0 + 1))
    assert store.give_back(Owned("j_a", T0 + 1, 1, "w1"), before=first.before)
    assert store.get("j_a", T0 + 1) == _run(scheduled_for=T0 + 1)


# --- the sweep index -----------------------------------------------------------------------------------


def test_the_sweep_index_pages_due_keys_of_one_shard_oldest_first(store: Any) -> None:
    for k in range(3):
        store.put_new(_run(scheduled_for=T0 + k, now=NOW + 1000 * (2 - k)))
    store.put_new(_run(scheduled_for=T0 + 9, now=NOW + 10**6))  # not yet due
    shard = sweep_shard("j_a")
    due_by = NOW + SWEEP_AFTER_MS + 2000
    page = store.sweep_due(shard, due_by, 2)
    assert page.keys == [RunKey("j_a", T0 + 2), RunKey("j_a", T0 + 1)] and page.cursor is not None
    rest = store.sweep_due(shard, due_by, 2, cursor=page.cursor)
    assert rest.keys == [RunKey("j_a", T0)] and not rest.cursor
    other = next(s for s in range(16) if s != shard)
    assert store.sweep_due(other, due_by, 10).keys == []
    rows = store.get_many([*page.keys, RunKey("j_a", T0 + 2), RunKey("j_a", T0 + 77)])
    assert sorted(r.scheduled_for for r in rows) == [T0 + 1, T0 + 2]


def test_a_sweep_deferral_is_conditioned_on_what_the_sweeper_saw(store: Any) -> None:
    store.put_new(_run())
    seen = NOW + SWEEP_AFTER_MS
    assert not store.defer_sweep(
        SweepDeferral(
            RunKey("j_a", T0), status=RunStatus.QUEUED, seen_sweep_at=seen - 1, sweep_at_ms=seen + 5
        )
    )
    assert not store.defer_sweep(
        SweepDeferral(RunKey("j_a", T0), status=RunStatus.RUNNING, seen_sweep_at=seen, sweep_at_ms=seen + 5)
    )
    assert store.defer_sweep(
        SweepDeferral(
            RunKey("j_a", T0), status=RunStatus.QUEUED, seen_sweep_at=seen, sweep_at_ms=seen + 5, sweeps=2
        )
    )
    row = store.get("j_a", T0)
    assert (row.sweep_at, row.sweeps) == (seen + 5, 2)
    assert not store.clear_sweep("j_a", T0)  # unfinished runs keep their keys
    _claim(store)
    store.skip(W1, now_ms=NOW, reason="r")
    assert store.clear_sweep("j_a", T0)  # nothing left to clear is fine for a finished run


# --- transient failures (the adapter only: the fake never fails by itself) --------------------------------


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "InternalServerError"])
def test_a_transient_dynamodb_failure_is_store_unavailable(aws: Any, settings: Any, code: str) -> None:
    store = RunStore(aws.table(settings.runs_table))
    with Stubber(store.table.meta.client) as stubber:
        stubber.add_client_error("update_item", code, http_status_code=400)
        with pytest.raises(StoreUnavailable) as raised:
            _claim(store)
    assert isinstance(raised.value.__cause__, ClientError)
    assert raised.value.__cause__.response["Error"]["Code"] == code


# --- an owner's failed runs (the sparse failures index) -------------------------------------------------


def _fail(store: Any, key: RunKey, owner: str, *, dead: bool) -> None:
    """Claim the queued run ``key`` and fail its try under ``owner``: dead, or retrying."""
    assert _claim(store, key=key).claimed
    owned = Owned(key.job_id, key.scheduled_for, 1, "w1", owner=owner)
    if dead:
        assert store.dead(owned, DeadTransition(now_ms=NOW, error="boom", final_attempt=1, notify_at_ms=NOW))
    else:
        assert store.retry(
            owned, RetryTransition(error="boom", retry_at_ms=NOW + 60_000, sweep_at_ms=NOW + 120_000)
        )


def test_an_owners_failed_runs_are_listed_across_jobs_newest_first(store: Any) -> None:
    keys = [RunKey("j_a", T0), RunKey("j_b", T0), RunKey("j_a", T0 + 60_000), RunKey("j_c", T0 + 30_000)]
    for key in keys:
        assert store.put_new(_run(key.job_id, key.scheduled_for)) is None
    _fail(store, keys[0], "team-a", dead=True)
    _fail(store, keys[1], "team-a", dead=False)
    _fail(store, keys[2], "team-a", dead=True)
    _fail(store, keys[3], "team-b", dead=True)  # another owner's
    skipped = _run("j_d", T0 + 10_000, status=RunStatus.SKIPPED, owner="team-a", error="missed")
    assert store.put_new(skipped) is None
    assert store.put_new(_run("j_e", T0 + 20_000, status=RunStatus.SKIPPED, error="no owner")) is None

    page, cursor = store.list_failed("team-a", 2)
    rest, end = store.list_failed("team-a", 10, before=cursor)
    dead, _ = store.list_failed("team-a", 10, RunFilter(status=RunStatus.DEAD))
    recent, _ = store.list_failed("team-a", 10, RunFilter(since_ms=T0 + 1))
    older, _ = store.list_failed("team-a", 10, RunFilter(until_ms=T0 + 10_000))

    assert [r.key for r in page] == [keys[2], RunKey("j_d", T0 + 10_000)] and cursor == (T0 + 10_000, "j_d")
    assert [r.key for r in rest] == [keys[1], keys[0]] and end is None
    assert [r.key for r in dead] == [keys[2], keys[0]]
    assert [r.key for r in recent] == [keys[2], RunKey("j_d", T0 + 10_000)]
    assert [r.key for r in older] == [keys[1], keys[0]]
    assert store.list_failed("team-a", 10, RunFilter(kind=RunKind.MANUAL)) == ([], None)


def test_a_run_leaves_the_failed_list_when_its_next_try_is_claimed_or_succeeds(store: Any) -> None:
    assert store.put_new(_run()) is None
    _fail(store, FIRST, "team-a", dead=False)
    assert [r.status for r in store.list_failed("team-a", 10)[0]] == [RunStatus.RETRYING]

    claimed = store.claim(
        ClaimRequest(
            RunKey("j_a", T0),
            worker="w2",
            now_ms=NOW + 60_000,
            stale_before_ms=0,
            retry_due_by_ms=NOW + 60_000,
        )
    )
    assert claimed.claimed
    assert store.list_failed("team-a", 10) == ([], None)
    assert store.succeed(Owned("j_a", T0, 2, "w2"), now_ms=NOW + 61_000)
    assert store.list_failed("team-a", 10) == ([], None)
    assert store.get("j_a", T0).owner == "team-a"


def test_a_retrying_run_whose_claim_is_given_back_is_still_among_its_owners_failed_runs(store: Any) -> None:
    # Given a retrying run of team-a's (listed among its failed runs), claimed by its retry's delivery
    assert store.put_new(_run()) is None
    _fail(store, FIRST, "team-a", dead=False)
    claim = _claim(store, "w2", now=NOW + 60_000)
    assert claim.claimed and store.list_failed("team-a", 10) == ([], None)
    # When that claim is given back (a storage error before the target started: the try does not count)
    assert store.give_back(Owned("j_a", T0, 2, "w2"), before=claim.before)
    # Then the run is retrying again as the claim found it, and listed among team-a's failed runs again
    row = store.get("j_a", T0)
    assert row.status is RunStatus.RETRYING and row.attempt == 1
    assert [r.key for r in store.list_failed("team-a", 10)[0]] == [FIRST]
    assert [r.key for r in store.list_failed("team-a", 10, RunFilter(status=RunStatus.RETRYING))[0]] == [
        FIRST
    ]


def test_a_jobs_history_filters_by_kind_and_since(store: Any) -> None:
    for offset, kind in ((0, RunKind.SCHEDULED), (1_000, RunKind.MANUAL), (2_000, RunKind.SCHEDULED)):
        assert store.put_new(_run(scheduled_for=T0 + offset, kind=kind)) is None

    manual, _ = store.list_for_job("j_a", 10, RunFilter(kind=RunKind.MANUAL))
    recent, cursor = store.list_for_job("j_a", 1, RunFilter(since_ms=T0 + 1))
    older, end = store.list_for_job("j_a", 10, RunFilter(since_ms=T0 + 1), cursor)

    assert [r.scheduled_for for r in manual] == [T0 + 1_000]
    assert [r.scheduled_for for r in recent] == [T0 + 2_000] and cursor == T0 + 2_000
    assert [r.scheduled_for for r in older] == [T0 + 1_000] and end is None


# --- tries and re-runs (design §5.7) ------------------------------------------------------------------------


def test_each_transition_writes_the_tries_it_is_given(store: Any) -> None:
    store.put_new(_run())
    _claim(store)
    first = (TryRecord(1, NOW, NOW + 5, "w1", "HTTP 500 from POST https://x/", "HTTP 500\nü" * 3),)
    assert store.retry(
        W1,
        RetryTransition(error="HTTP 500", retry_at_ms=NOW + 60_000, sweep_at_ms=NOW + 180_000, tries=first),
    )
    assert store.get("j_a", T0).tries == first
    _claim(store, "w2", NOW + 60_000)
    second = (*first, TryRecord(2, NOW + 60_000, NOW + 60_010, "w2", None, '{"rows": 42}'))
    assert store.succeed(Owned("j_a", T0, 2, "w2"), now_ms=NOW + 60_010, tries=second)
    row = store.get("j_a", T0)
    assert row.tries == second and row.status is RunStatus.SUCCEEDED
    # a transition given no tries leaves them as stored
    store.put_new(_run(scheduled_for=T0 + 1))
    _claim(store, key=RunKey("j_a", T0 + 1))
    dead = (TryRecord(1, NOW, NOW + 1, "w1", "boom", None, round=2),)
    assert store.dead(
        Owned("j_a", T0 + 1, 1, "w1"),
        DeadTransition(now_ms=NOW, error="e", final_attempt=1, notify_at_ms=NOW, tries=dead),
    )
    assert store.get("j_a", T0 + 1).tries == dead


def _dead(store: Any, scheduled_for: int = T0, *, notified: bool = True) -> None:
    store.put_new(_run(scheduled_for=scheduled_for))
    _claim(store, key=RunKey("j_a", scheduled_for))
    tries = (TryRecord(1, NOW, NOW + 1, "w1", "boom", "out"),)
    owned = Owned("j_a", scheduled_for, 1, "w1")
    assert store.dead(
        owned,
        DeadTransition(now_ms=NOW + 1, error="boom", final_attempt=1, notify_at_ms=NOW + 60_000, tries=tries),
    )
    if notified:
        assert store.notified("j_a", scheduled_for)


def test_a_rerun_queues_a_dead_run_again_with_a_fresh_set_of_attempts(store: Any) -> None:
    _dead(store)
    later = NOW + 3_600_000
    result = store.rerun(
        rerun_request(
            RunKey("j_a", T0),
            now_ms=later,
            sweep_at_ms=later + SWEEP_AFTER_MS,
            retention_days=90,
            key_digest="abc",
        )
    )
    assert result.done
    row = store.get("j_a", T0)
    assert result.row == row
    assert (row.status, row.attempt, row.reruns, row.rerun_key) == (RunStatus.QUEUED, 0, 1, "abc")
    assert (row.enqueued_at, row.sweep_at) == (later, later + SWEEP_AFTER_MS)
    assert row.expires_at_s == later // 1000 + 90 * 86400  # kept the retention from the re-run
    assert row.worker is row.started_at is row.heartbeat_at is row.finished_at is row.error is None
    assert row.lateness_ms == 1_500 and row.tries == (TryRecord(1, NOW, NOW + 1, "w1", "boom", "out"),)
    # it is in the sweep index, so the sweeper enqueues it if its message never comes
    page = store.sweep_due(sweep_shard("j_a"), later + SWEEP_AFTER_MS, 10)
    assert RunKey("j_a", T0) in page.keys
    # the worker claims it as its first try of the new round
    claim = _claim(store, "w9", later + 1)
    assert claim.claimed and store.get("j_a", T0).attempt == 1
    # a second re-run of the same run, without a key, is refused while it is not dead or skipped
    refused = store.rerun(
        rerun_request(RunKey("j_a", T0), now_ms=later + 2, sweep_at_ms=later + 3, retention_days=90)
    )
    assert not refused.done and refused.row.status is RunStatus.RUNNING and refused.row.rerun_key == "abc"


def test_a_rerun_is_refused_unless_dead_and_notified_or_one_skipped_fire(store: Any) -> None:
    assert store.rerun(
        rerun_request(RunKey("j_a", T0), now_ms=NOW, sweep_at_ms=NOW, retention_days=90)
    ) == Rerun(False, None)  # no such run
    _dead(store, T0, notified=False)
    owing = store.rerun(rerun_request(RunKey("j_a", T0), now_ms=NOW, sweep_at_ms=NOW, retention_days=90))
    assert not owing.done and owing.row.status is RunStatus.DEAD and owing.row.notify_pending
    store.put_new(_run(scheduled_for=T0 + 1))  # queued
    assert not store.rerun(
        rerun_request(RunKey("j_a", T0 + 1), now_ms=NOW, sweep_at_ms=NOW, retention_days=90)
    ).done
    summary = _run(scheduled_for=T0 + 2, status=RunStatus.SKIPPED, skipped_count=3, skipped_through=T0 + 4)
    store.put_new(summary)
    assert not store.rerun(
        rerun_request(RunKey("j_a", T0 + 2), now_ms=NOW, sweep_at_ms=NOW, retention_days=90)
    ).done
    store.put_new(_run(scheduled_for=T0 + 5, status=RunStatus.SKIPPED, error="missed: skip"))
    skipped = store.rerun(
        rerun_request(RunKey("j_a", T0 + 5), now_ms=NOW, sweep_at_ms=NOW + 1, retention_days=90)
    )
    assert skipped.done and skipped.row.status is RunStatus.QUEUED and skipped.row.error is None
    assert skipped.row.rerun_key is None and skipped.row.reruns == 1


def test_a_summary_rerun_queues_its_first_fire_alone(store: Any) -> None:
    summary = _run(status=RunStatus.SKIPPED, skipped_count=3, skipped_through=T0 + 4, error="missed")
    store.put_new(summary)

    result = store.rerun(
        rerun_request(RunKey("j_a", T0), now_ms=NOW + 1, sweep_at_ms=NOW + 2, retention_days=90, summary=True)
    )

    assert result.done and result.row == store.get("j_a", T0)
    row = result.row
    assert (row.status, row.attempt, row.reruns, row.sweep_at) == (RunStatus.QUEUED, 0, 1, NOW + 2)
    assert (row.skipped_count, row.skipped_through, row.error, row.finished_at) == (None, None, None, None)
    # a queued row is not re-run, summary or not
    assert not store.rerun(
        rerun_request(RunKey("j_a", T0), now_ms=NOW + 3, sweep_at_ms=NOW + 4, retention_days=90, summary=True)
    ).done


def test_an_empty_window_lists_nothing(store: Any) -> None:
    assert store.put_new(_run(scheduled_for=T0)) is None
    queries: list[Any] = []
    if isinstance(
        store, RunStore
    ):  # DynamoDB refuses a BETWEEN with reversed bounds (moto does not): no query
        query = store.table.query
        store.table.query = lambda **kwargs: queries.append(kwargs) or query(**kwargs)

    assert store.list_for_job("j_a", 10, RunFilter(until_ms=0)) == ([], None)
    assert store.list_for_job("j_a", 10, RunFilter(since_ms=T0 + 1, until_ms=T0)) == ([], None)
    assert store.list_failed("team-a", 10, RunFilter(until_ms=0)) == ([], None)
    assert queries == []


# --- the cancel of a run (design §5.8) -------------------------------------------------------------------


def _queued(store: Any) -> RunRow:
    row = _run(owner="team-a")
    assert store.put_new(row) is None
    return row


def test_a_queued_run_is_cancelled_once_and_never_claimed(store: Any) -> None:
    _queued(store)

    first = cancel_run(store, FIRST, now_ms=NOW + 10, by="alice", reason="wrong input")
    second = cancel_run(store, FIRST, now_ms=NOW + 20, by="carol")

    assert first.done and not second.done
    assert first.row == second.row == store.get("j_a", T0)  # the derived row is the stored one
    row = store.get("j_a", T0)
    assert row.status is RunStatus.CANCELLED and row.cancelled_from is RunStatus.QUEUED
    assert (row.cancelled_by, row.cancel_reason, row.finished_at) == ("alice", "wrong input", NOW + 10)
    assert row.sweep_at is None
    assert not _claim(store).claimed


def test_a_fire_with_no_row_cancelled_through_the_row_its_claim_would_make_is_never_claimed(
    store: Any,
) -> None:
    # the API's cancel of a fire listed queued (no row yet): the row its claim would make, then the cancel
    made = new_run("j_a", T0, now_ms=NOW - 5, retention_days=90, sweep_after_ms=None, owner="team-a")
    assert store.put_new(made) is None
    assert cancel_run(store, FIRST, now_ms=NOW, by="alice").done
    # its message's claim, which would make the row, finds it cancelled: refused, nothing changed
    create = new_run("j_a", T0, now_ms=NOW + 10, retention_days=90, sweep_after_ms=None)
    claim = _claim(store, now=NOW + 10, create=create)
    assert not claim.claimed and claim.before.status is RunStatus.CANCELLED
    row = store.get("j_a", T0)
    assert row.status is RunStatus.CANCELLED and row.cancelled_from is RunStatus.QUEUED and row.attempt == 0


def test_a_cancel_without_a_reason_stores_none(store: Any) -> None:
    _queued(store)
    assert cancel_run(store, FIRST, now_ms=NOW, by="alice").done
    assert store.get("j_a", T0).cancel_reason is None


def test_a_missing_run_is_not_cancelled_and_none_is_made(store: Any) -> None:
    result = cancel_run(store, FIRST, now_ms=NOW, by="alice")
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

    result = cancel_run(store, FIRST, now_ms=NOW + 10, by="alice")

    assert not result.done and result.row == before == store.get("j_a", T0)


def test_a_running_try_learns_of_the_cancel_from_its_heartbeat_and_records_its_try(store: Any) -> None:
    _queued(store)
    assert _claim(store).claimed
    assert store.renew(W1, now_ms=NOW + 30_000).renewed

    assert cancel_run(store, FIRST, now_ms=NOW + 40_000, by="alice", reason="stop").done
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

    assert cancel_run(store, FIRST, now_ms=NOW + 20, by="alice").done

    assert not _claim(store, "w2", NOW + 1_000_000).claimed
    row = store.get("j_a", T0)
    assert row.status is RunStatus.CANCELLED and row.retry_at is None and row.sweep_at is None
    assert row.error == "boom"  # the failed try's error stays in the history


def test_a_lost_workers_running_run_cancelled_is_not_taken_over(store: Any) -> None:
    _queued(store)
    assert _claim(store).claimed
    assert cancel_run(store, FIRST, now_ms=NOW + 20, by="alice").done

    assert not _claim(store, "w2", NOW + 10_000_000).claimed  # its heartbeat is long stale


def test_a_cancelled_run_is_listed_by_its_status_and_not_among_failures(store: Any) -> None:
    _queued(store)
    assert _claim(store).claimed
    owned = Owned("j_a", T0, 1, "w1", owner="team-a")
    assert store.retry(owned, RetryTransition(error="boom", retry_at_ms=NOW, sweep_at_ms=NOW + 100))
    assert [r.key for r in store.list_failed("team-a", 10)[0]] == [FIRST]

    assert cancel_run(store, FIRST, now_ms=NOW + 20, by="alice").done

    rows, _ = store.list_for_job("j_a", 10, RunFilter(status=RunStatus.CANCELLED))
    assert [r.status for r in rows] == [RunStatus.CANCELLED]
    assert store.list_failed("team-a", 10)[0] == []
