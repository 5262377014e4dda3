"""``overlap: skip`` around tries that may not be skipped: a retry or a lost worker's run taken over waits for
the job's lock (its attempts kept) rather than ending ``skipped``; and a claim under a spec read before a PATCH
to ``skip`` never runs beside a locked try. The same cases run on moto (tests/integration/worker)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.domain.overlap import CLOCK_SKEW_MS, LAMBDA_MAX_RUN_S, PRE_CLAIM_SPEC_MS
from jobsched.domain.retries import Outcome, Owned
from jobsched.domain.worker import Deferred
from jobsched.models import Job, RunStatus
from jobsched.ports.runs import ClaimRequest, RetryTransition, RunKey, RunRow, run_id
from jobsched.ports.targets import TargetCall
from jobsched.targets import Targets, commands
from tests.support.worker import T0, Kit, SimWaiter, owner_sets_overlap_skip, take_overlap_lock

MINUTE = 60_000


def _every_minute_with_two_runs(kit: Kit, **fields: Any) -> Job:
    """An every-minute job of ``fields`` with its 02:00 (``T0``) and 02:01 runs queued."""
    job = kit.make_job(schedule="* * * * *", **fields)
    kit.make_run(job, T0)
    kit.make_run(job, T0 + MINUTE)
    return job


def _claim(kit: Kit, job: Job, scheduled_for: int, worker: str) -> None:
    assert kit.runs.claim(
        ClaimRequest(
            RunKey(job.id, scheduled_for),
            worker=worker,
            now_ms=kit.clock(),
            stale_before_ms=0,
            retry_due_by_ms=0,
        )
    ).claimed


def _running_with_the_lock(kit: Kit, job: Job, scheduled_for: int, worker: str = "w-1") -> None:
    """Run ``scheduled_for`` of ``job`` claimed by ``worker`` now, holding the job's overlap lock."""
    _claim(kit, job, scheduled_for, worker)
    holder = take_overlap_lock(
        kit,
        job,
        scheduled_for,
        worker,
        stale_before_ms=kit.clock() - kit.settings.heartbeat_stale_s * 1000,
        expires_at_s=kit.clock() // 1000 + 86_400,
    )
    assert holder is None


def _finish(kit: Kit, job: Job, scheduled_for: int, worker: str = "w-1") -> None:
    """The locked try of ``scheduled_for`` succeeds and gives the lock back."""
    assert kit.runs.succeed(Owned(job.id, scheduled_for, 1, worker), now_ms=kit.clock())
    kit.jobs.release_overlap(job.id, run_id=run_id(job.id, scheduled_for), attempt=1, worker=worker)


def _runs_as_attempt_2_after_the_locked_try(kit: Kit, job: Job, calls: list[TargetCall]) -> RunRow:
    """Once the locked 02:01 try is over, the 02:00 run is delivered a minute later and succeeds as attempt 2
    (the only call of the target): its row."""
    _finish(kit, job, T0 + MINUTE)
    kit.clock.advance(MINUTE)
    assert kit.deliver(job, T0) == Outcome.SUCCEEDED
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.SUCCEEDED and row.attempt == 2
    assert [call.attempt for call in calls] == [2]
    return row


def test_a_retry_finding_the_next_fires_try_holding_the_lock_waits_and_keeps_its_attempts(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given an overlap: skip job whose 02:00 run failed its first try and is retrying
    job = _every_minute_with_two_runs(kit, overlap="skip", command="record", retry={"max_attempts": 3})
    _claim(kit, job, T0, "w-0")
    change = RetryTransition(
        error="attempt 1 failed", retry_at_ms=kit.clock(), sweep_at_ms=kit.clock() + MINUTE
    )
    assert kit.runs.retry(Owned(job.id, T0, 1, "w-0"), change)
    # and the 02:01 run's try running with the job's lock
    _running_with_the_lock(kit, job, T0 + MINUTE)

    # When the retry is delivered
    with pytest.raises(Deferred):
        kit.deliver(job, T0)

    # Then it waits: not skipped, not tried, its one failed try kept
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.RETRYING and row.attempt == 1
    assert calls == []
    # and once the 02:01 try is over it runs as attempt 2
    _runs_as_attempt_2_after_the_locked_try(kit, job, calls)


def test_a_lost_workers_run_taken_over_while_the_lock_is_held_waits_and_its_lost_try_is_recorded(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given an overlap: skip job whose 02:00 run's worker was lost mid-try (its heartbeat stale)
    job = _every_minute_with_two_runs(kit, overlap="skip", command="record", retry={"max_attempts": 3})
    _claim(kit, job, T0, "w-lost")
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    # and the 02:01 run's try running with the job's lock
    _running_with_the_lock(kit, job, T0 + MINUTE)

    # When the 02:00 run's message comes back
    with pytest.raises(Deferred):
        kit.deliver(job, T0)

    # Then it waits for the lock: still the lost worker's, not skipped
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.RUNNING and row.worker == "w-lost" and row.attempt == 1
    assert calls == []
    # and once the 02:01 try is over it is taken over: the lost try recorded, then attempt 2 runs
    row = _runs_as_attempt_2_after_the_locked_try(kit, job, calls)
    assert [t.attempt for t in row.tries] == [1, 2] and row.tries[0].error


def test_a_claim_under_a_spec_read_before_a_patch_to_skip_does_not_run_beside_the_locked_try(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given an overlap: allow job whose 02:00 run's batch read the job's spec
    job = _every_minute_with_two_runs(kit, overlap="allow", command="record")
    specs = kit.worker.read_specs([job.id])
    assert specs is not None and specs.jobs[job.id].overlap.value == "allow"
    # and then the owner's PATCH to skip, and the 02:01 try taking the lock (no try running without it)
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock())
    kit.clock.advance(PRE_CLAIM_SPEC_MS + 5_000)
    _running_with_the_lock(kit, job, T0 + MINUTE)

    # When the 02:00 run's claim lands after all that, with the spec its batch read
    outcome = kit.worker.handle(delivery_of(kit.record(job.id, T0)), specs)

    # Then it does not run under the stale spec: the job is overlap: skip and a try holds the lock
    assert outcome == Outcome.SKIPPED
    assert calls == []


def test_a_lock_taken_just_after_a_patch_to_skip_waits_for_claims_under_the_earlier_spec(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given an overlap: allow job whose 02:00 run's batch read the job's spec just before the PATCH to skip
    job = _every_minute_with_two_runs(kit, overlap="allow", command="record")
    specs = kit.worker.read_specs([job.id])
    assert specs is not None
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock())
    kit.clock.advance(1_000)

    # When the 02:01 run takes the lock a second later and finds no try running without it
    with pytest.raises(Deferred):
        kit.deliver(job, T0 + MINUTE)

    # Then it waits (the 02:00 claim may still land and run under overlap: allow) and gives the lock back
    assert calls == []
    row = kit.runs.get(job.id, T0 + MINUTE)
    assert row is not None and row.status is RunStatus.QUEUED and row.attempt == 0
    # the 02:00 claim lands under its batch's spec and runs alone
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0)), specs) == Outcome.SUCCEEDED
    # and the 02:01 run, back later, runs once nothing else does
    kit.clock.advance(MINUTE)
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SUCCEEDED
    assert [call.run_id for call in calls] == [run_id(job.id, T0), run_id(job.id, T0 + MINUTE)]


@pytest.fixture
def stubborn() -> Iterator[threading.Event]:
    """Command ``stubborn``: the 02:00 run's try ignores its cancel and runs until the test sets the returned
    event (60 s real at most); any other run's try returns at once."""
    release = threading.Event()
    started = threading.Event()

    @commands.register("stubborn", replace=True)
    def stubborn_command(call: TargetCall) -> str:
        if call.scheduled_for_ms == T0:
            started.set()
            release.wait(60)
        return "done"

    release.started = started  # type: ignore[attr-defined]
    yield release
    release.set()
    commands.unregister("stubborn")


def test_a_timed_out_try_that_does_not_stop_keeps_the_lock(kit: Kit, stubborn: threading.Event) -> None:
    # Given an overlap: skip job whose 02:00 try ignores the cancel at its timeout
    job = _every_minute_with_two_runs(kit, overlap="skip", command="stubborn", timeout_s=60)
    started = stubborn.started  # type: ignore[attr-defined]
    worker = kit.build_worker(waiter=SimWaiter(kit.clock, parked=started.is_set))
    # When it passes its timeout: recorded failed (to be retried), yet still running
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    # Then the lock is not given back: the 02:01 run is skipped, and the 02:00 retry waits
    kit.clock.advance(MINUTE)
    assert kit.deliver(job, T0 + MINUTE) == Outcome.SKIPPED
    with pytest.raises(Deferred):
        kit.deliver(job, T0)
    stubborn.set()


def test_a_timed_out_lambda_try_keeps_the_lock_while_its_function_may_run(kit: Kit) -> None:
    # Given an overlap: skip job aimed at a Lambda function whose 02:00 invocation outlasts the try's timeout
    class Parked:
        def execute(self, target: Any, call: TargetCall) -> str:
            if call.scheduled_for_ms == T0 and call.attempt == 1:
                kit.waiter.sleep_until(None, call.cancel)  # the caller stops waiting; the function does not
            return "lambda f: status 200"

    job = _every_minute_with_two_runs(
        kit, overlap="skip", target={"type": "lambda", "function": "f"}, timeout_s=60
    )
    worker = kit.build_worker(targets=Targets(lambda_=Parked()))
    claimed_at = kit.clock()
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    # Then until the function's longest run from the try's start is over, no other try of the job runs
    kit.clock.advance(MINUTE)
    assert worker.handle(delivery_of(kit.record(job.id, T0 + MINUTE))) == Outcome.SKIPPED
    with pytest.raises(Deferred):
        worker.handle(delivery_of(kit.record(job.id, T0)))
    # and after it the retry runs
    kit.clock.now_ms = claimed_at + LAMBDA_MAX_RUN_S * 1000 + CLOCK_SKEW_MS + 1
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.SUCCEEDED
