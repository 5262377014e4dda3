"""Cancelling a run (design §5.8) against the worker and the sweeper on the in-memory fakes: a cancelled queued or
retrying run never starts a try, a running try is stopped at its next heartbeat, and a try's outcome written after
the cancel never overwrites it (no retry, no dead-run message or alert)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.domain.cancels import cancel_run
from jobsched.domain.retries import Outcome, Owned
from jobsched.models import RunStatus
from jobsched.ports.runs import ClaimRequest, RunKey
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.targets import Targets, commands
from jobsched.targets.shell import ShellExecutor
from tests.support.processes import pid_written, process_gone
from tests.support.worker import T0, Kit, SimWaiter, take_overlap_lock


def _cancel(kit: Kit, job_id: str, reason: str | None = "wrong input") -> None:
    """An operator cancels the job's run at ``T0`` now (the API's write)."""
    done = cancel_run(kit.runs, RunKey(job_id, T0), now_ms=kit.clock(), by="alice", reason=reason)
    assert done.done and done.row is not None and done.row.status is RunStatus.CANCELLED


@pytest.fixture
def cancelling_commands(kit: Kit) -> Iterator[dict[str, Any]]:
    """Commands that cancel their own run as an operator would while they run, then: ``cancel_then_wait``
    waits until the try is cancelled (its stop time in the returned dict, ``stopped_at``), ``cancel_then_succeed``
    returns, ``cancel_then_fail`` fails."""
    seen: dict[str, Any] = {"finished": threading.Event()}
    runs, clock, waiter = kit.runs, kit.clock, kit.waiter

    def cancel(call: TargetCall) -> None:
        cancel_run(
            runs, RunKey(call.job_id, call.scheduled_for_ms), now_ms=clock(), by="alice", reason="oops"
        )

    @commands.register("cancel_then_wait", replace=True)
    def cancel_then_wait(call: TargetCall) -> str:
        seen["started_at"] = clock()
        cancel(call)
        try:
            if waiter.sleep_until(None, call.cancel):
                seen["stopped_at"] = clock()
            return "stopped"
        finally:
            seen["finished"].set()

    @commands.register("cancel_then_succeed", replace=True)
    def cancel_then_succeed(call: TargetCall) -> str:
        cancel(call)
        return "done"

    @commands.register("cancel_then_fail", replace=True)
    def cancel_then_fail(call: TargetCall) -> str:
        cancel(call)
        raise TargetFailed("HTTP 500")

    yield seen
    for name in ("cancel_then_wait", "cancel_then_succeed", "cancel_then_fail"):
        commands.unregister(name)


def test_a_cancelled_queued_run_is_never_claimed(kit: Kit) -> None:
    job = kit.due_job()
    _cancel(kit, job.id)

    assert kit.deliver(job) == Outcome.DROPPED

    row = kit.runs.get(job.id, T0)
    assert row.status is RunStatus.CANCELLED and row.attempt == 0 and row.tries == ()
    assert row.cancelled_by == "alice" and row.cancel_reason == "wrong input"


def test_a_cancelled_retrying_run_never_starts_its_retry_nor_is_swept_back(kit: Kit) -> None:
    job = kit.due_job(command="fail", retry={"max_attempts": 3, "backoff_s": 10})
    assert kit.deliver(job) == Outcome.RETRYING
    _cancel(kit, job.id)
    kit.clock.advance(3_600_000)

    assert kit.deliver(job) == Outcome.DROPPED  # the retry message comes: refused
    kit.build_sweeper().sweep()  # nothing to sweep: the cancel took the run out of the sweep index

    row = kit.runs.get(job.id, T0)
    assert row.status is RunStatus.CANCELLED and row.attempt == 1 and row.sweep_at is None
    assert row.cancelled_from is RunStatus.RETRYING
    assert kit.dead_runs.notified == []


def test_a_running_try_is_stopped_at_its_next_heartbeat_and_recorded(kit: Kit, cancelling_commands) -> None:
    job = kit.due_job(command="cancel_then_wait", retry={"max_attempts": 3})
    sent_before = list(kit.queue.sent)

    assert kit.deliver(job) == Outcome.CANCELLED

    # the try was stopped at the first heartbeat after the cancel: one interval after it started
    seen = cancelling_commands
    assert seen["finished"].wait(30)
    assert seen["stopped_at"] - seen["started_at"] == kit.settings.heartbeat_interval_s * 1000
    row = kit.runs.get(job.id, T0)
    assert row.status is RunStatus.CANCELLED and row.cancelled_from is RunStatus.RUNNING
    (tried,) = row.tries
    assert tried.attempt == 1 and tried.worker == row.worker
    assert tried.error == "attempt 1 stopped: the run was cancelled by alice: oops"
    assert kit.queue.sent == sent_before  # no retry message
    assert kit.dead_runs.notified == []


@pytest.mark.parametrize(
    ("command", "max_attempts"),
    [("cancel_then_succeed", 3), ("cancel_then_fail", 3), ("cancel_then_fail", 1)],
)
def test_an_outcome_written_after_the_cancel_does_not_overwrite_it(
    kit: Kit, cancelling_commands, command, max_attempts
) -> None:
    # Given a try that ends (succeeds, fails with attempts left, fails on its last) after its run was cancelled
    job = kit.due_job(command=command, retry={"max_attempts": max_attempts})
    sent_before = list(kit.queue.sent)

    outcome = kit.deliver(job)

    # Then its outcome write was refused: the run stays cancelled, no retry message, no dead-run message
    assert outcome == Outcome.LOST
    row = kit.runs.get(job.id, T0)
    assert row.status is RunStatus.CANCELLED and row.cancel_reason == "oops"
    assert kit.queue.sent == sent_before
    assert kit.dead_runs.notified == []


def test_a_run_cancelled_before_a_lost_workers_takeover_is_not_taken_over(kit: Kit) -> None:
    # Given a running run whose worker died, then cancelled
    job = kit.due_job()
    kit.runs.force(job.id, T0, status=RunStatus.RUNNING, attempt=1, worker="w-dead", heartbeat_at=T0)
    _cancel(kit, job.id)
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 * 2)

    # When its message comes back
    assert kit.deliver(job) == Outcome.DROPPED

    # Then no try started
    row = kit.runs.get(job.id, T0)
    assert row.status is RunStatus.CANCELLED and row.attempt == 1 and row.tries == ()


def test_a_cancelled_shell_try_is_killed_with_its_children_after_its_grace(kit: Kit, tmp_path: Path) -> None:
    # Given a shell command whose child ignores SIGTERM, and a job giving a stopped try 1 s before SIGKILL
    pidfile = tmp_path / "child.pid"
    cancelled: list[bool] = []

    def parked() -> bool:
        """Simulated time moves once the child has started; the operator cancels the run then."""
        if not pid_written(pidfile):
            return False
        if not cancelled:
            cancelled.append(True)
            _cancel(kit, job.id)
        return True

    waiter = SimWaiter(kit.clock, parked=parked)
    worker = kit.build_worker(
        settings=kit.settings.model_copy(update={"allow_shell_targets": True}),
        targets=Targets(shell=ShellExecutor(enabled=True)),
        waiter=waiter,
    )
    command = f"trap '' TERM; sleep 300 & echo $! > {pidfile}; wait"
    job = kit.due_job(target={"type": "shell", "command": command}, cancel_grace_s=1)
    started = time.monotonic()

    # When the run is cancelled while it runs
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.CANCELLED

    # Then the child, which ignored SIGTERM, got SIGKILL once the grace was over
    assert process_gone(int(pidfile.read_text()))
    assert time.monotonic() - started >= 1.0
    assert kit.runs.get(job.id, T0).status is RunStatus.CANCELLED
    assert not waiter.stuck


def test_a_try_cancelled_while_running_keeps_its_jobs_overlap_lock_until_its_worker_lets_go(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given an overlap: skip job whose 02:00 try runs holding the lock, and an operator cancels its run
    job = kit.make_job(schedule="* * * * *", overlap="skip", command="record")
    for scheduled_for in (T0, T0 + 60_000, T0 + 120_000):
        kit.make_run(job, scheduled_for)
    assert kit.runs.claim(ClaimRequest(RunKey(job.id, T0), "w-holder", kit.clock(), 0, 0)).claimed
    assert take_overlap_lock(kit, job, T0, "w-holder", stale_before_ms=0) is None
    _cancel(kit, job.id)
    # When the 02:01 fire comes before the holder's worker has learnt of it (its next beat) and stopped the try
    # Then it does not run beside that try: skipped, the lock still the holder's
    assert kit.deliver(job, T0 + 60_000) == Outcome.SKIPPED
    assert calls == []
    # And once the holder's worker lets go, the next fire runs
    kit.worker.overlap.release(Owned(job.id, T0, 1, "w-holder"))
    assert kit.deliver(job, T0 + 120_000) == Outcome.SUCCEEDED
    assert [call.scheduled_for_ms for call in calls] == [T0 + 120_000]
