"""``overlap: replace`` in the worker (design §5.4): a fire finding the job's lock held by a running try cancels
that try's run (``cancelled`` by ``jobsched:replace``, the reason naming the new fire's run) and waits for the lock
as ``buffer_one``'s fire that waits does; the holder's worker stops the try at its next heartbeat and hands the lock
to it, so it runs next, never beside the replaced try. Of two fires in a row the newer one replaces the one that
waits (cancelled before any try of it starts)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.domain.overlap import CLOCK_SKEW_MS, PRE_CLAIM_SPEC_MS, REPLACED_BY
from jobsched.domain.retries import Outcome, Owned
from jobsched.domain.worker import Deferred
from jobsched.models import Job, RunStatus
from jobsched.ports.runs import ClaimRequest, RunKey, RunRow, run_id
from jobsched.ports.targets import TargetCall
from jobsched.targets import commands
from tests.support.worker import (
    T0,
    Kit,
    SimWaiter,
    holder_running,
    job_with_runs,
    owner_sets_overlap_skip,
    stored_run,
    take_overlap_lock,
)

MINUTE = 60_000


def _replaced_by_a_fire_that_waits(kit: Kit, count: int) -> tuple[Job, Owned]:
    """A replace job of ``count`` runs (``job_with_runs``) whose 02:00 try held the lock when its 02:01 fire was
    delivered: 02:00 cancelled, 02:01 waiting for the lock. The job and the 02:00 try's claim."""
    job = job_with_runs(kit, count, overlap="replace")
    holder = holder_running(kit, job)
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    return job, holder


def _replaced_by(row: RunRow, replacing: str) -> bool:
    return (
        row.status is RunStatus.CANCELLED
        and row.cancelled_by == REPLACED_BY
        and row.cancel_reason == f"replaced by run {replacing} (overlap: replace)"
    )


def test_a_fire_cancels_the_running_holder_waits_until_it_lets_go_then_runs(
    kit: Kit, calls: list[TargetCall], sent: list[dict[str, Any]]
) -> None:
    # Given a replace job whose 02:00 try runs holding the lock
    # When its 02:01 fire is delivered: the 02:00 run is cancelled, and 02:01 waits (queued, not run)
    job, holder = _replaced_by_a_fire_that_waits(kit, 2)
    replaced = stored_run(kit, job, T0)
    assert _replaced_by(replaced, run_id(job.id, T0 + MINUTE))
    assert replaced.cancelled_from is RunStatus.RUNNING
    assert stored_run(kit, job, T0 + MINUTE).status is RunStatus.QUEUED and calls == []
    # Then the holder's next heartbeat is refused with the cancelled row: its worker stops the try
    renewal = kit.runs.renew(holder, now_ms=kit.clock())
    assert not renewal.renewed and renewal.row is not None and renewal.row.status is RunStatus.CANCELLED
    # And while the stopped try has not let go of the lock, 02:01 waits, even past the holder's staleness
    kit.clock.advance(kit.settings.heartbeat_interval_s * 1000)
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    assert calls == []
    # When the holder's worker lets go: the lock is handed to 02:01, whose run is sent, and it runs, once
    kit.worker.overlap.release(holder)
    assert [json.loads(body["MessageBody"])["scheduled_for"] for body in sent] == [T0 + MINUTE]
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert [call.scheduled_for_ms for call in calls] == [T0 + MINUTE]
    # and the replaced run stays cancelled: no retry, no dead-run message
    assert stored_run(kit, job, T0).status is RunStatus.CANCELLED and kit.dead_runs.notified == []


def test_a_holder_lost_after_its_cancel_loses_the_lock_once_stale(kit: Kit, calls: list[TargetCall]) -> None:
    # Given a replace job whose 02:00 try holds the lock, replaced by 02:01, and 02:00's worker then lost
    job, _ = _replaced_by_a_fire_that_waits(kit, 2)
    # When the lock has gone stale (no heartbeat renews it): 02:01 takes it over and runs
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert [call.scheduled_for_ms for call in calls] == [T0 + MINUTE]
    assert stored_run(kit, job, T0).status is RunStatus.CANCELLED


def test_a_holder_already_finished_is_not_cancelled_and_the_fire_just_runs(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a replace job whose 02:00 try succeeded but could not give the lock back
    job = job_with_runs(kit, 2, overlap="replace")
    holder = holder_running(kit, job)
    assert kit.runs.succeed(holder, now_ms=kit.clock())
    # When 02:01 is delivered: it takes the lock from the finished try and runs; 02:00 stays succeeded
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert [call.scheduled_for_ms for call in calls] == [T0 + MINUTE]
    assert stored_run(kit, job, T0).status is RunStatus.SUCCEEDED


def test_of_two_fires_in_a_row_the_newer_replaces_the_one_that_waits(
    kit: Kit, calls: list[TargetCall], sent: list[dict[str, Any]]
) -> None:
    # Given a replace job whose 02:00 try holds the lock, replaced by 02:01, which waits
    job, holder = _replaced_by_a_fire_that_waits(kit, 3)
    # When 02:02 is delivered before 02:00 has stopped: 02:01 is cancelled (no try of it ever starts), 02:02 waits
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + 2 * MINUTE)
    waited = stored_run(kit, job, T0 + MINUTE)
    assert _replaced_by(waited, run_id(job.id, T0 + 2 * MINUTE)) and waited.cancelled_from is RunStatus.QUEUED
    assert _replaced_by(stored_run(kit, job, T0), run_id(job.id, T0 + MINUTE))
    # Then 02:01's message, back, is dropped; once 02:00 lets go the lock goes to 02:02, which runs
    assert kit.deliver(job, T0 + MINUTE) == Outcome.DROPPED.value
    kit.worker.overlap.release(holder)
    assert [json.loads(body["MessageBody"])["scheduled_for"] for body in sent] == [T0 + 2 * MINUTE]
    assert kit.deliver(job, T0 + 2 * MINUTE) == Outcome.SUCCEEDED.value
    assert [call.scheduled_for_ms for call in calls] == [T0 + 2 * MINUTE]


def test_a_fire_replaces_one_the_lock_was_handed_to_before_it_ran(kit: Kit, calls: list[TargetCall]) -> None:
    # Given a replace job whose 02:00 try was replaced by 02:01 and let go, handing the lock to 02:01
    job, holder = _replaced_by_a_fire_that_waits(kit, 3)
    kit.worker.overlap.release(holder)
    # When 02:02 comes before 02:01 has run: 02:01 (no try started) is cancelled and 02:02 runs at once
    assert kit.deliver(job, T0 + 2 * MINUTE) == Outcome.SUCCEEDED.value
    assert _replaced_by(stored_run(kit, job, T0 + MINUTE), run_id(job.id, T0 + 2 * MINUTE))
    assert kit.deliver(job, T0 + MINUTE) == Outcome.DROPPED.value
    assert [call.scheduled_for_ms for call in calls] == [T0 + 2 * MINUTE]


def test_a_fire_finding_a_try_running_without_the_lock_waits_rather_than_being_skipped(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given an overlap: allow job whose 02:00 try runs (holding no lock), then the owner's PATCH to replace
    job = kit.make_job(schedule="* * * * *", overlap="allow", command="record")
    kit.make_run(job, T0)
    kit.make_run(job, T0 + MINUTE)
    assert kit.runs.claim(ClaimRequest(RunKey(job.id, T0), "w-1", kit.clock(), 0, 0)).claimed
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock(), overlap="replace")
    kit.clock.advance(PRE_CLAIM_SPEC_MS + CLOCK_SKEW_MS + 1)
    # When the 02:01 fire takes the lock and finds 02:00 running without it: it waits (never skipped under replace)
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    assert stored_run(kit, job, T0 + MINUTE).status is RunStatus.QUEUED and calls == []


@pytest.fixture
def replaced_while_running(kit: Kit) -> Iterator[dict[str, Any]]:
    """Command ``replaced_while_running``: the 02:00 try has the 02:01 fire delivered while it runs (the outcome
    in the returned dict, ``next``), then waits until it is cancelled (``stubborn`` set: it ignores the cancel
    until ``release`` is set, 60 s real at most); any other try records when it ran (``ran``) and whether the
    02:00 try was still running then (``beside``)."""
    seen: dict[str, Any] = {"stubborn": False, "release": threading.Event(), "ended": threading.Event()}
    seen["ran"] = []
    worker, waiter = kit.worker, kit.waiter
    record = kit.record

    @commands.register("replaced_while_running", replace=True)
    def replaced_while_running_command(call: TargetCall) -> str:
        if call.scheduled_for_ms != T0:
            seen["ran"].append((call.scheduled_for_ms, seen["ended"].is_set()))
            return "done"
        try:
            try:
                worker.handle(delivery_of(record(call.job_id, T0 + MINUTE)))
            except Deferred:
                seen["next"] = Outcome.DEFERRED
            if seen["stubborn"]:
                seen["parked"] = True
                seen["release"].wait(60)
            else:
                waiter.sleep_until(None, call.cancel)
            return "stopped"
        finally:
            seen["ended"].set()

    yield seen
    seen["release"].set()
    commands.unregister("replaced_while_running")


def test_a_running_try_replaced_stops_at_its_next_heartbeat_and_the_fire_runs_after_it(
    kit: Kit, replaced_while_running: dict[str, Any], sent: list[dict[str, Any]]
) -> None:
    # Given a replace job whose 02:00 try runs when its 02:01 fire is delivered
    job = job_with_runs(kit, 2, overlap="replace", command="replaced_while_running")
    # When the 02:00 try is delivered: 02:01 waits, and 02:00 is stopped at its next beat, recorded cancelled
    assert kit.deliver(job, T0) == Outcome.CANCELLED.value
    seen = replaced_while_running
    assert seen["next"] is Outcome.DEFERRED and seen["ended"].wait(30)
    stopped = stored_run(kit, job, T0)
    assert _replaced_by(stopped, run_id(job.id, T0 + MINUTE))
    (tried,) = stopped.tries
    assert tried.error == (
        f"attempt 1 stopped: the run was cancelled by {REPLACED_BY}: "
        f"replaced by run {run_id(job.id, T0 + MINUTE)} (overlap: replace)"
    )
    # Then the lock was handed to 02:01, which runs after 02:00 ended, once; no dead-run message
    assert [json.loads(body["MessageBody"])["scheduled_for"] for body in sent] == [T0 + MINUTE]
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert seen["ran"] == [(T0 + MINUTE, True)]
    assert kit.dead_runs.notified == []


def test_a_replaced_try_that_ignores_its_stop_keeps_the_fire_from_running_beside_it(
    kit: Kit, replaced_while_running: dict[str, Any]
) -> None:
    # Given a replace job whose 02:00 try, replaced by 02:01, ignores the TERM (it runs on until KILLed)
    seen = replaced_while_running
    seen["stubborn"] = True
    job = job_with_runs(kit, 2, overlap="replace", command="replaced_while_running")
    worker = kit.build_worker(waiter=SimWaiter(kit.clock, parked=lambda: seen.get("parked", False)))
    # When its worker stops waiting for it at its next beat: recorded cancelled, yet still running
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.CANCELLED
    assert not seen["ended"].is_set()
    # Then the lock is held on: 02:01 waits, even once the lock would be stale
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    assert seen["ran"] == []
    # And once the longest a try may last has passed, 02:01 runs
    kit.clock.advance(kit.settings.worker_timeout_cap_s * 1000 + CLOCK_SKEW_MS)
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert [ran for ran, _ in seen["ran"]] == [T0 + MINUTE]


def test_a_retry_of_an_older_run_does_not_replace_a_newer_fires_running_try(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a replace job whose 02:00 run failed once and waits for its retry, while its 02:01 fire's try runs
    # holding the lock
    job = job_with_runs(kit, 2, overlap="replace")
    kit.runs.force(job.id, T0, status=RunStatus.RETRYING, attempt=1)
    newer = T0 + MINUTE
    assert kit.runs.claim(ClaimRequest(RunKey(job.id, newer), "w-holder", kit.clock(), 0, 0)).claimed
    assert take_overlap_lock(kit, job, newer, "w-holder") is None
    # When the 02:00 retry is delivered
    with pytest.raises(Deferred):
        kit.deliver(job, T0)
    # Then the newer fire's try is not cancelled (the newest fire runs); the retry waits for the lock, not run
    assert stored_run(kit, job, newer).status is RunStatus.RUNNING
    assert stored_run(kit, job, T0).status is RunStatus.RETRYING and calls == []
