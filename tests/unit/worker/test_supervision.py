"""Heartbeats, timeouts, overlap and ownership while a try runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.clock import FakeClock, from_ms, to_ms
from jobsched.domain.overlap import OVERLAP_CHANGE_EVENTS
from jobsched.domain.retries import Outcome, Owned
from jobsched.domain.supervision import Heartbeat
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Job, JobEventKind, RunStatus
from jobsched.ports.jobs import AuditEvent, Rewrite, change_key
from jobsched.ports.runs import Claim, ClaimRequest, RunKey, run_id
from jobsched.ports.targets import TargetCall
from jobsched.targets import Targets, commands
from jobsched.targets.shell import ShellExecutor
from tests.support.processes import pid_written, process_gone
from tests.support.worker import T0, Kit, SimWaiter, claim_now, owner_sets_overlap_skip, take_overlap_lock


@pytest.fixture
def long_command(clock: FakeClock, waiter: SimWaiter) -> Iterator[None]:
    """Command ``long``: runs until the simulated clock has moved ``input.seconds`` past its start (parked
    in the waiter meanwhile, so simulated time moves only while it waits)."""

    @commands.register("long", replace=True)
    def long(call: TargetCall) -> str:
        waiter.sleep_until(clock() + int(call.input["seconds"] * 1000), call.cancel)
        return "done"

    yield
    commands.unregister("long")


def test_a_long_try_beats_on_the_run_row_and_the_message_visibility(
    kit: Kit, visibility_calls: list[dict[str, Any]], long_command: None
) -> None:
    # Given a run whose try lasts 95 s
    job = kit.due_job(command="long", input={"seconds": 95})
    record = kit.delivered(job, T0)
    started = kit.clock()
    # When the worker runs it
    assert kit.worker.handle(delivery_of(record)) == Outcome.SUCCEEDED
    # Then it beat every 30 s (at 30, 60 and 90 s): the row's heartbeat and the message's visibility
    assert len(visibility_calls) == 3
    assert {c["VisibilityTimeout"] for c in visibility_calls} == {
        kit.settings.heartbeat_stale_s + kit.settings.heartbeat_interval_s
    }
    assert {c["ReceiptHandle"] for c in visibility_calls} == {record["receiptHandle"]}
    assert {c["QueueUrl"] for c in visibility_calls} == {kit.settings.run_queue_url}
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED
    assert row.heartbeat_at == started + 90_000
    assert kit.clock() == started + 95_000


def test_heartbeat_beat_updates_the_row_and_detects_a_takeover(kit: Kit) -> None:
    class Visibility:
        def __init__(self) -> None:
            self.calls: list[tuple[str, int]] = []

        def change_visibility(self, receipt_handle: str, seconds: int) -> None:
            self.calls.append((receipt_handle, seconds))

    job = kit.due_job()
    claim_now(kit, job, "w1", stale_before_ms=0)
    visibility = Visibility()
    beat = Heartbeat(
        runs=kit.runs,
        owned=Owned(job.id, T0, 1, "w1"),
        visibility=visibility,
        receipt_handle="rh-1",
        visibility_s=150,
    )
    assert beat.beat(kit.clock() + 30_000)
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.heartbeat_at == kit.clock() + 30_000
    assert row.sweep_at == kit.clock() + kit.settings.sweep_queued_after_s * 1000  # claims and beats leave it
    assert visibility.calls == [("rh-1", 150)]
    # another worker took the run over (stale heartbeat): the beat is refused
    kit.runs.claim(
        ClaimRequest(
            RunKey(job.id, T0),
            worker="w2",
            now_ms=kit.clock() + 500_000,
            stale_before_ms=kit.clock() + 400_000,
            retry_due_by_ms=0,
        )
    )
    assert not beat.beat(kit.clock() + 500_001)
    assert beat.lost


def test_a_failing_heartbeat_does_not_fail_the_try(
    clock: FakeClock,
) -> None:
    class BrokenVisibility:
        def change_visibility(self, receipt_handle: str, seconds: int) -> None:
            raise ConnectionError("SQS unreachable")

    class BrokenRuns:
        def renew(self, *args: Any, **kwargs: Any) -> bool:
            raise ConnectionError("DynamoDB unreachable")

    beat = Heartbeat(
        runs=BrokenRuns(),  # type: ignore[arg-type]
        owned=Owned("j", T0, 1, "w1"),
        visibility=BrokenVisibility(),
        receipt_handle="rh",
        visibility_s=150,
        last_ok_ms=clock(),
        give_up_after_ms=90_000,
    )
    assert beat.beat(clock() + 30_000)
    assert not beat.lost and not beat.expiring


@dataclass
class Held:
    """What the ``hold`` command saw: whether its try was cancelled, and when (fake clock, epoch ms)."""

    stolen: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    cancelled_at: int | None = None


@pytest.fixture
def hold_command(runs: MemoryRunStore, clock: FakeClock, waiter: SimWaiter) -> Iterator[Held]:
    """Command ``hold``: runs until its try is cancelled (parked in the waiter, so simulated time moves only
    once it waits); with ``input.steal`` another worker first takes the run over (a claim as if this worker's
    heartbeat were stale)."""
    held = Held()

    @commands.register("hold", replace=True)
    def hold(call: TargetCall) -> str:
        try:
            if (call.input or {}).get("steal"):
                claimed = runs.claim(
                    ClaimRequest(
                        RunKey(call.job_id, call.scheduled_for_ms),
                        worker="w-2",
                        now_ms=clock(),
                        stale_before_ms=clock() + 1,
                        retry_due_by_ms=0,
                    )
                ).claimed
                assert claimed
                held.stolen.set()
            if waiter.sleep_until(None, call.cancel):
                held.cancelled_at = clock()
            return "held"
        finally:
            held.finished.set()

    yield held
    commands.unregister("hold")


def test_a_try_whose_run_was_taken_over_is_cancelled_and_writes_nothing(kit: Kit, hold_command: Held) -> None:
    # Given a try that keeps running after another worker took its run over (before simulated time moves on)
    job = kit.due_job(command="hold", input={"steal": True})
    started = kit.clock()
    # When its next heartbeat is refused
    assert kit.deliver(job) == Outcome.LOST
    # Then the target was cancelled at that beat, and nothing was written over the new owner's claim
    assert hold_command.stolen.is_set()
    assert hold_command.finished.wait(30)
    assert hold_command.cancelled_at is not None
    assert hold_command.cancelled_at - started == kit.settings.heartbeat_interval_s * 1000  # the first beat
    row = kit.runs.get(job.id, T0)
    assert row is not None
    assert (row.status, row.worker, row.attempt) == (RunStatus.RUNNING, "w-2", 2)
    assert row.error is None
    assert kit.queue.sent == []  # no retry message


def test_a_try_whose_heartbeats_keep_failing_ends_before_the_run_looks_lost(
    kit: Kit, hold_command: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a try that keeps running while every heartbeat write fails
    def unreachable(*args: Any, **kwargs: Any) -> bool:
        raise ConnectionError("DynamoDB unreachable")

    monkeypatch.setattr(kit.worker.runs, "renew", unreachable)
    job = kit.due_job(command="hold")
    # When it has gone unrecorded for heartbeat_stale_s minus one interval
    assert kit.deliver(job) == Outcome.RETRYING
    # Then the target was cancelled while the row was not yet stale (no other worker could have claimed it)
    assert hold_command.finished.wait(30)
    row = kit.runs.get(job.id, T0)
    assert row is not None and hold_command.cancelled_at is not None
    silent_ms = hold_command.cancelled_at - row.heartbeat_at
    assert silent_ms == (kit.settings.heartbeat_stale_s - kit.settings.heartbeat_interval_s) * 1000
    # and the abandoned try is recorded as failed (the run was still ours), to be retried
    assert row.status == RunStatus.RETRYING and row.attempt == 1
    assert row.error == (
        f"attempt 1 abandoned: its heartbeat could not be recorded for {silent_ms // 1000} s "
        "(the run would soon look lost and be taken over)"
    )


def test_a_command_past_its_timeout_fails_the_try_as_timed_out(kit: Kit, hold_command: Held) -> None:
    job = kit.due_job(command="hold", timeout_s=1)
    started = kit.clock()
    assert kit.deliver(job) == Outcome.RETRYING
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.RETRYING
    assert row.error == "timed out after 1 s (timeout_s)"
    assert hold_command.finished.wait(30) and hold_command.cancelled_at == started + 1_000


def test_timeout_s_is_capped_by_the_worker_cap(kit: Kit, hold_command: Held) -> None:
    worker = kit.build_worker(settings=kit.settings.model_copy(update={"worker_timeout_cap_s": 2}))
    job = kit.due_job(command="hold", timeout_s=600)
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.error == "timed out after 2 s (timeout_s)"


def test_a_shell_command_past_its_timeout_is_killed_with_its_children(kit: Kit, tmp_path: Path) -> None:
    # Given a shell command whose child sleeps 30 s; simulated time moves once the child has started (the
    # shell's own real-time limit, timeout_s, is far away: the worker's simulated timeout comes first)
    pidfile = tmp_path / "child.pid"
    waiter = SimWaiter(kit.clock, parked=lambda: pid_written(pidfile))
    worker = kit.build_worker(
        settings=kit.settings.model_copy(update={"allow_shell_targets": True}),
        targets=Targets(shell=ShellExecutor(enabled=True)),
        waiter=waiter,
    )
    job = kit.due_job(
        target={"type": "shell", "command": f"sleep 30 & echo $! > {pidfile}; wait"}, timeout_s=20
    )
    # When the try passes its timeout
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    # Then it failed as timed out, and the shell's child was killed with it
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.error == "timed out after 20 s (timeout_s)"
    assert process_gone(int(pidfile.read_text()))
    assert not waiter.stuck


@pytest.fixture
def blocking_command() -> Iterator[threading.Event]:
    """Command ``block``: runs until the test sets the returned event (60 s real at most)."""
    release = threading.Event()
    started = threading.Event()

    @commands.register("block", replace=True)
    def block(call: TargetCall) -> str:
        started.set()
        release.wait(60)  # the test sets it (and again at teardown)
        return "released"

    release.started = started  # type: ignore[attr-defined]
    yield release
    release.set()
    commands.unregister("block")


@pytest.mark.parametrize(("overlap", "expected"), [("skip", Outcome.SKIPPED), ("allow", Outcome.SUCCEEDED)])
def test_overlap_skip_skips_a_run_while_a_long_run_of_the_job_is_running(
    kit: Kit, blocking_command: threading.Event, overlap: str, expected: Outcome
) -> None:
    # Given an every-minute job whose 02:00 run is still running (blocked) on one worker
    job = kit.make_job(schedule="* * * * *", overlap=overlap, command="block")
    kit.make_run(job, T0)
    kit.make_run(job, T0 + 60_000)
    long_worker = kit.build_worker(waiter=None)  # real waiter: beats are 30 s away
    results: list[str] = []
    message = delivery_of(kit.record(job.id, T0))
    thread = threading.Thread(target=lambda: results.append(long_worker.handle(message)))
    thread.start()
    assert blocking_command.started.wait(30)  # type: ignore[attr-defined]
    # When the 02:01 run is delivered to another worker
    kit.clock.advance(60_000)
    other = kit.build_worker()
    if overlap == "allow":
        blocking_command.set()  # let the second try finish too
    outcome = other.handle(delivery_of(kit.record(job.id, T0 + 60_000, message_id="m-2")))
    blocking_command.set()
    thread.join(30)
    # Then under skip it is recorded skipped, naming the running run; under allow it runs
    assert outcome == expected
    assert results == [Outcome.SUCCEEDED]
    row = kit.runs.get(job.id, T0 + 60_000)
    assert row is not None and row.status == expected.value
    if overlap == "skip":
        assert row.error == f"overlap: run {run_id(job.id, T0)} of this job is still running"


def test_overlap_skip_ignores_a_run_whose_worker_is_lost(kit: Kit) -> None:
    job, _ = _claimed_with_the_next_queued(kit, "skip", "dead-worker")
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    assert kit.deliver(job, T0 + 60_000) == Outcome.SUCCEEDED


def _claimed_with_the_next_queued(kit: Kit, overlap: str, worker: str) -> tuple[Job, Claim]:
    """An every-minute job with ``overlap`` whose 02:00 run (``T0``) was queued, then claimed by ``worker`` (no lock
    taken), and whose 02:01 run is queued: the job and that claim."""
    job = kit.make_job(schedule="* * * * *", overlap=overlap)
    kit.make_run(job, T0)
    kit.make_run(job, T0 + 60_000)
    claim = kit.runs.claim(
        ClaimRequest(
            RunKey(job.id, T0), worker=worker, now_ms=kit.clock(), stale_before_ms=0, retry_due_by_ms=0
        )
    )
    return job, claim


def _running_without_the_lock(kit: Kit) -> Job:
    """An every-minute job with ``overlap: allow`` whose 02:00 run (``T0``) runs under worker ``w-1`` (no lock
    taken) and whose 02:01 run is queued."""
    job, claim = _claimed_with_the_next_queued(kit, "allow", "w-1")
    assert claim.claimed
    return job


def test_overlap_skip_set_while_a_run_is_running_skips_the_next_run(kit: Kit) -> None:
    # Given an every-minute job with overlap allow whose 02:00 run is running (its worker beats: fresh)
    job = _running_without_the_lock(kit)
    # When its owner sets overlap: skip (PATCH) and the 02:01 run is delivered while the 02:00 one still runs
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock())
    kit.clock.advance(60_000)
    outcome = kit.deliver(job, T0 + 60_000)
    # Then it is skipped: another run of the job is running (the 02:00 run took no lock under allow)
    assert outcome == Outcome.SKIPPED
    row = kit.runs.get(job.id, T0 + 60_000)
    assert row is not None and row.status is RunStatus.SKIPPED


@pytest.mark.parametrize("later_events", [OVERLAP_CHANGE_EVENTS, 3 * OVERLAP_CHANGE_EVENTS + 1])
def test_overlap_skip_set_before_many_other_edits_still_skips_the_next_run(
    kit: Kit, later_events: int
) -> None:
    # Given a running 02:00 run that took no lock, then overlap: skip, then many more edits of the job's other fields
    job = _running_without_the_lock(kit)
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock())
    for n in range(later_events):
        kit.clock.advance(1)
        kit.jobs.record_event(
            AuditEvent(
                job.id, kit.clock(), change_key(2 + n), JobEventKind.UPDATED, job.owner, {"fields": ["input"]}
            )
        )
    # When the 02:01 run is delivered while the 02:00 one still runs
    kit.clock.advance(60_000)
    outcome = kit.deliver(job, T0 + 60_000)
    # Then it is skipped however many events followed the overlap change
    assert outcome == Outcome.SKIPPED
    row = kit.runs.get(job.id, T0 + 60_000)
    assert row is not None and row.error == f"overlap: run {run_id(job.id, T0)} of this job is still running"


def test_an_overlap_change_older_than_the_longest_try_is_not_looked_for_past_it(kit: Kit) -> None:
    # Given overlap: skip set long ago (more than the longest a try lasts), then recent edits of other fields
    job = _running_without_the_lock(kit)
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock())
    kit.clock.advance((kit.settings.worker_timeout_cap_s + kit.settings.heartbeat_stale_s) * 1000 + 1)
    for n in range(2 * OVERLAP_CHANGE_EVENTS):
        kit.jobs.record_event(
            AuditEvent(
                job.id, kit.clock(), change_key(2 + n), JobEventKind.UPDATED, job.owner, {"fields": ["input"]}
            )
        )
    reads: list[str | None] = []
    list_events = kit.jobs.list_events

    def counted(job_id: str, limit: int, before: str | None = None) -> Any:
        reads.append(before)
        return list_events(job_id, limit, before)

    kit.jobs.list_events = counted  # type: ignore[method-assign]
    # When a run of the job is delivered: the 02:00 try (which took no lock) is stale by now, the edits recent
    stored = kit.jobs.get(job.id)
    edited = Job.model_validate(stored.job.model_dump() | {"updated_at": from_ms(kit.clock())})
    kit.jobs.replace(Rewrite(edited, stored.state, expected_updated_at=to_ms(stored.job.updated_at)))
    assert kit.deliver(job, T0 + 60_000) == Outcome.SUCCEEDED
    # Then the events were read back to the window's start and no further (3 pages, not all 41 events' history)
    assert len(reads) == 3


def test_a_storage_error_looking_for_an_unlocked_try_gives_the_overlap_lock_back(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobsched.domain.worker import Deferred
    from jobsched.ports.errors import StoreUnavailable

    # Given a job just switched to overlap: skip, whose audit events cannot be read (the table throttles)
    job = kit.make_job(schedule="* * * * *", overlap="allow")
    kit.make_run(job, T0)
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock())

    def throttled(*_: Any, **__: Any) -> Any:
        raise StoreUnavailable("list_events: ThrottlingException")

    monkeypatch.setattr(kit.jobs, "list_events", throttled)
    # When its run is delivered: the worker takes the lock, then cannot look for a try running without it
    with pytest.raises(Deferred):
        kit.deliver(job, T0)
    # Then the claim and the lock are both given back: the next delivery takes the lock at once
    # another run: only a free lock is taken (its holder is not stale)
    holder = take_overlap_lock(kit, job, T0 + 60_000, "w-2")
    assert holder is None
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.QUEUED and row.attempt == 0


def test_overlap_skip_set_while_a_lost_run_is_running_does_not_skip_the_next_run(kit: Kit) -> None:
    # Given the same switch from allow to skip, but the 02:00 run's worker was lost (its heartbeat is stale)
    job = _running_without_the_lock(kit)
    owner_sets_overlap_skip(kit.jobs, job, at_ms=kit.clock())
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    # When the 02:01 run is delivered
    outcome = kit.deliver(job, T0 + 60_000)
    # Then it runs: a lost try does not hold the job's next runs back (the sweeper takes it over)
    assert outcome == Outcome.SUCCEEDED


def test_overlap_skip_of_two_runs_claimed_together_skips_exactly_one(kit: Kit) -> None:
    # Given an older run claimed at this very millisecond by another worker, which took the job's overlap lock
    job, _ = _claimed_with_the_next_queued(kit, "skip", "w-1")
    holder = take_overlap_lock(kit, job, T0, "w-1")
    assert holder is None
    # the newer run, claimed at the same instant, finds the lock taken and is skipped
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0 + 60_000))) == Outcome.SKIPPED
    # and only the older run is left running
    older, newer = kit.runs.get(job.id, T0), kit.runs.get(job.id, T0 + 60_000)
    assert older is not None and older.status == RunStatus.RUNNING
    assert newer is not None and newer.status == RunStatus.SKIPPED


def test_overlap_skip_sees_a_running_run_behind_any_number_of_skipped_ones(
    kit: Kit, blocking_command: threading.Event
) -> None:
    # A check reading only the job's 100 newest rows would fail here: an every-5-seconds job whose run lasts 10
    # minutes piles up skipped rows, and after 100 of them a second run would start alongside the first.
    job = kit.make_job(schedule="every 5 seconds", overlap="skip", command="block")
    kit.clock.now_ms = T0 + 760_000
    kit.make_run(job, T0)
    long_worker = kit.build_worker(waiter=None)
    results: list[str] = []
    message = delivery_of(kit.record(job.id, T0))
    thread = threading.Thread(target=lambda: results.append(long_worker.handle(message)))
    thread.start()
    assert blocking_command.started.wait(30)  # type: ignore[attr-defined]
    for k in range(1, 151):  # the fires skipped meanwhile: 150 rows newer than the running one
        kit.make_run(job, T0 + k * 5_000, status=RunStatus.SKIPPED, error="overlap")
    kit.make_run(job, T0 + 755_000)
    other = kit.build_worker()
    outcome = other.handle(delivery_of(kit.record(job.id, T0 + 755_000, message_id="m-2")))
    blocking_command.set()
    thread.join(30)
    assert outcome == Outcome.SKIPPED
    assert results == [Outcome.SUCCEEDED]


def test_a_try_whose_run_was_taken_over_does_not_overwrite_the_result(kit: Kit) -> None:
    @commands.register("steal", replace=True)
    def steal(call: TargetCall) -> None:
        row = kit.runs.get(call.job_id, call.scheduled_for_ms)
        assert row is not None
        kit.runs.force(call.job_id, call.scheduled_for_ms, worker="thief", attempt=row.attempt + 1)

    try:
        job = kit.due_job(command="steal")
        assert kit.deliver(job) == Outcome.LOST
        row = kit.runs.get(job.id, T0)
        assert row is not None and row.status == RunStatus.RUNNING and row.worker == "thief"
    finally:
        commands.unregister("steal")


def test_a_run_whose_message_visibility_cannot_be_extended_is_watched_by_the_sweeper(kit: Kit) -> None:
    from jobsched.domain.runs import new_run

    class GoneMessage:
        """SQS refuses the extension: the message was deleted (a copy acknowledged) or its handle is stale."""

        def change_visibility(self, receipt_handle: str, seconds: int) -> None:
            raise ConnectionError("ReceiptHandleIsInvalid")

    # Given a scheduled run whose row its claim made (its message is its only guard: no sweep keys)
    job = kit.make_job()
    create = new_run(job.id, T0, now_ms=kit.clock(), retention_days=90, sweep_after_ms=None)
    now = kit.clock()
    assert claim_now(kit, job, "w1", stale_before_ms=0, create=create).claimed
    beat = Heartbeat(
        runs=kit.runs,
        owned=Owned(job.id, T0, 1, "w1"),
        visibility=GoneMessage(),
        receipt_handle="rh",
        visibility_s=150,
    )
    # When its beats land but the message's visibility cannot be extended, twice
    assert beat.beat(now + 30_000) and beat.beat(now + 60_000)
    # Then the run is in the sweep index from the first failure on (so a worker lost later is taken over)
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.RUNNING and row.sweep_at == now + 30_000 + 150_000
