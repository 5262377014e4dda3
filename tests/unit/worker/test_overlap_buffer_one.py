"""``overlap: buffer_one`` in the worker (design §5.4): a fire finding the job's lock held waits for it (its claim
given back, its row ``queued``), a later fire while one waits is ``skipped``, and the holder's release hands the
lock to the fire that waits and sends its run a message, so it runs next, once, after the holder; a holder lost
with its worker does not lose the fire that waits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobsched.domain.cancels import cancel_run
from jobsched.domain.overlap import CLOCK_SKEW_MS, CONTENDED_WAIT_S, OverlapLock
from jobsched.domain.retries import Outcome, Owned
from jobsched.domain.worker import Deferred
from jobsched.models import Job, RunStatus
from jobsched.ports.runs import (
    BufferAnswer,
    BufferRequest,
    ClaimRequest,
    OverlapHolder,
    OverlapRequest,
    RunKey,
    run_id,
)
from jobsched.ports.targets import TargetCall
from tests.support.worker import T0, Kit, holder_running, job_with_runs, stored_run

MINUTE = 60_000


def _waiting_behind_a_lost_holder(kit: Kit, count: int) -> Job:
    """A ``buffer_one`` job of ``count`` runs (``job_with_runs``, 3 attempts) whose 02:00 try holds the lock, its
    02:01 fire waiting for it, and then the 02:00 worker lost (its heartbeat stale now)."""
    job = job_with_runs(kit, count, overlap="buffer_one", retry={"max_attempts": 3})
    holder_running(kit, job, "w-lost")
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    return job


def test_one_fire_waits_for_the_holder_later_ones_are_skipped_and_it_runs_next(
    kit: Kit, calls: list[TargetCall], sent: list[dict[str, Any]]
) -> None:
    # Given a buffer_one job whose 02:00 try runs holding the lock
    job = job_with_runs(kit, 4, overlap="buffer_one")
    holder_running(kit, job)
    # When its 02:01 fire is delivered, it waits: not run, not skipped, its row queued
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    assert stored_run(kit, job, T0 + MINUTE).status is RunStatus.QUEUED and calls == []
    # And the 02:02 fire, while 02:01 waits, is skipped naming both
    assert kit.deliver(job, T0 + 2 * MINUTE) == Outcome.SKIPPED.value
    skipped = kit.runs.get(job.id, T0 + 2 * MINUTE)
    assert skipped is not None and skipped.error is not None
    assert run_id(job.id, T0) in skipped.error and run_id(job.id, T0 + MINUTE) in skipped.error
    # And 02:01, delivered again while 02:00 still runs, waits again (it is the fire that waits)
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    assert calls == []
    # When the 02:00 try ends and lets go of the lock
    assert kit.runs.succeed(Owned(job.id, T0, 1, "w-holder"), now_ms=kit.clock())
    kit.worker.overlap.release(Owned(job.id, T0, 1, "w-holder"))
    # Then the lock is handed to 02:01, whose run is sent now
    assert [json.loads(body["MessageBody"]) for body in sent] == [
        {"job_id": job.id, "scheduled_for": T0 + MINUTE, "enqueued_at": kit.clock()}
    ]
    # and a fire arriving before 02:01 runs waits behind it rather than running first
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + 3 * MINUTE)
    assert calls == []
    # And 02:01 runs, then hands the lock to 02:03, which runs
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert kit.deliver(job, T0 + 3 * MINUTE) == Outcome.SUCCEEDED.value
    assert [call.scheduled_for_ms for call in calls] == [T0 + MINUTE, T0 + 3 * MINUTE]
    # and the lock is free again: a later fire runs at once
    kit.make_run(job, T0 + 4 * MINUTE)
    assert kit.deliver(job, T0 + 4 * MINUTE) == Outcome.SUCCEEDED.value


def test_the_fire_that_waits_is_not_lost_when_the_holders_worker_is(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a buffer_one job whose 02:00 try holds the lock, its 02:01 fire waiting, and 02:00's worker lost
    job = _waiting_behind_a_lost_holder(kit, 2)
    # When 02:00's message comes back: taken over, it runs
    assert kit.deliver(job, T0) == Outcome.SUCCEEDED.value
    # Then 02:01 still waits for it and runs after it, once
    assert stored_run(kit, job, T0 + MINUTE).status is RunStatus.QUEUED
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert [(call.scheduled_for_ms, call.attempt) for call in calls] == [(T0, 2), (T0 + MINUTE, 1)]


def test_a_stale_holder_loses_the_lock_to_the_fire_that_waits_not_to_a_later_fire(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a buffer_one job whose 02:00 try holds the lock, its 02:01 fire waiting, and 02:00's worker lost
    job = _waiting_behind_a_lost_holder(kit, 3)
    # When the 02:02 fire comes first: the stale lock is not its to take, and a fire waits: skipped
    assert kit.deliver(job, T0 + 2 * MINUTE) == Outcome.SKIPPED.value
    # And 02:01 takes the stale lock and runs; 02:00's message, back after it, waits for it then runs
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED.value
    assert kit.deliver(job, T0) == Outcome.SUCCEEDED.value
    assert [(call.scheduled_for_ms, call.attempt) for call in calls] == [(T0 + MINUTE, 1), (T0, 2)]


def test_a_fire_that_waited_and_ended_otherwise_gives_its_place_up(kit: Kit, calls: list[TargetCall]) -> None:
    # Given a buffer_one job whose 02:00 try holds the lock and whose 02:01 fire waits
    job = job_with_runs(kit, 3, overlap="buffer_one")
    holder_running(kit, job)
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    # When 02:01 ends without running (recorded skipped, as for a deleted job)
    owned = Owned(job.id, T0 + MINUTE, 1, "w-other")
    assert kit.runs.claim(ClaimRequest(owned.key, "w-other", kit.clock(), 0, 0)).claimed
    assert kit.runs.skip(owned, now_ms=kit.clock(), reason="job deleted before the run started")
    # Then 02:02 waits in its place, and runs once 02:00 lets go
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + 2 * MINUTE)
    assert kit.runs.succeed(Owned(job.id, T0, 1, "w-holder"), now_ms=kit.clock())
    kit.worker.overlap.release(Owned(job.id, T0, 1, "w-holder"))
    assert kit.deliver(job, T0 + 2 * MINUTE) == Outcome.SUCCEEDED.value
    assert [call.scheduled_for_ms for call in calls] == [T0 + 2 * MINUTE]


class _ChangingHands:
    """A job store whose lock is held by a running try whenever it is asked for and free whenever a fire asks to
    wait for it (it changes hands between the two requests each time)."""

    def __init__(self, jobs: Any) -> None:
        self.jobs = jobs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.jobs, name)

    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder:
        return OverlapHolder(f"{request.job_id}@{T0}", 1, "w-other", request.now_ms + 10 * CLOCK_SKEW_MS)

    def buffer_overlap(self, request: BufferRequest) -> BufferAnswer:
        return BufferAnswer(False, None)


def test_a_fire_whose_lock_changes_hands_on_every_request_waits_and_asks_again(kit: Kit) -> None:
    job = job_with_runs(kit, 2, overlap="buffer_one")
    lock = OverlapLock(settings=kit.settings, runs=kit.runs, jobs=_ChangingHands(kit.jobs), clock=kit.clock)
    blocked = lock.take(Owned(job.id, T0 + MINUTE, 1, "w-1"), job, kit.clock())
    assert blocked is not None and blocked.wait_s == CONTENDED_WAIT_S and not blocked.buffered


def test_a_fire_that_waits_cancelled_by_its_owner_gives_its_place_to_the_next_fire(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a buffer_one job whose 02:00 try runs holding the lock and whose 02:01 fire waits for it
    job = job_with_runs(kit, 3, overlap="buffer_one")
    holder = holder_running(kit, job)
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)
    # When the owner cancels the 02:01 run, and the 02:02 fire comes: it waits in its place (not skipped)
    assert cancel_run(kit.runs, RunKey(job.id, T0 + MINUTE), now_ms=kit.clock(), by="alice").done
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + 2 * MINUTE)
    assert stored_run(kit, job, T0 + 2 * MINUTE).status is RunStatus.QUEUED
    # And the cancelled 02:01, delivered again, never starts a try
    assert kit.deliver(job, T0 + MINUTE) == Outcome.DROPPED.value
    # When the 02:00 try lets go of the lock, it is handed to 02:02, which runs, once
    kit.worker.overlap.release(holder)
    assert kit.deliver(job, T0 + 2 * MINUTE) == Outcome.SUCCEEDED.value
    assert stored_run(kit, job, T0 + MINUTE).status is RunStatus.CANCELLED and len(calls) == 1
