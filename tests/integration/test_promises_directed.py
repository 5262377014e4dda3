"""Directed sequences of the promises, one per known way to break them and one for the pause rule (design §4.4:
fires that fall while a job is paused are neither run nor recorded missed), on a whole deployment on the fakes
(``tests.support.world.World``), each judged by the independent oracle (``tests.support.oracle``) with the same
invariants as the model test, and by the specific outcome the scenario is about."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.clock import to_ms
from jobsched.models import RunKind, RunStatus
from jobsched.ports.runs import run_id
from jobsched.ports.targets import TargetFailed
from jobsched.schedule.engine import jitter_offset_ms
from jobsched.settings import memory_settings
from tests.support.worker import SimWaiter
from tests.support.world import OWNER, World


def at(hh: int, mm: int, ss: int = 0, ms: int = 0) -> int:
    """Epoch ms of hh:mm:ss.ms UTC on the world's day (2026-03-02)."""
    return to_ms(datetime(2026, 3, 2, hh, mm, ss, ms * 1000, tzinfo=UTC))


@pytest.fixture
def world() -> Any:
    made = World()
    yield made
    made.close()


def fail_once(rid: str, world: World) -> None:
    """The next try of ``rid`` fails."""

    def fail() -> None:
        raise TargetFailed("failing on purpose")

    world.during(rid, fail)


# --- 1. a fire sent on time is later recorded missed ------------------------------------------------------


@pytest.mark.parametrize("mode", ["crash_after", "error_after"])
def test_a_fire_sent_on_time_then_the_tick_dies_before_its_move_still_runs(world: World, mode: str) -> None:
    job = world.create("*/10 * * * * *", missed="skip", misfire_grace_s=5, catch_up_window_s=0)
    world.tick(9)  # 09:58:39
    world.fault("tick", "move", "error_before" if mode == "error_after" else "crash_before")
    world.tick(1)  # 09:58:40: the fire is sent, its move fails
    world.downtime(30)  # the next leader reads the same next_run_at, 30 s late
    world.settle()
    fire = at(9, 58, 40)
    row = world.row(job, fire)
    assert row is not None and row.status is RunStatus.SUCCEEDED, row
    world.check()


def test_catch_up_fires_sent_before_a_crash_are_not_inside_a_skipped_summary(world: World) -> None:
    job = world.create("* * * * * *", missed="catch_up", misfire_grace_s=0, catch_up_window_s=30)
    world.tick(2)
    world.downtime(20)  # 20 fires behind, within the catch-up window
    world.fault("tick", "move", "crash_before")
    world.tick(1)  # the catch-up fires are sent, the tick dies before its move
    world.downtime(120)  # the next leader finds them all beyond the window
    world.settle()
    sent = sorted(f for j, f in world.oracle.sends if j == job)
    outcomes = {f: (row.status if (row := world.row(job, f)) else None) for f in sent}
    assert set(outcomes.values()) == {RunStatus.SUCCEEDED}, outcomes
    world.check()


# --- 2. re-timing a paused job back-dates the new schedule --------------------------------------------


def test_retiming_a_paused_job_runs_no_fire_of_a_schedule_it_never_had(world: World) -> None:
    job = world.create("0 * * * *", missed="catch_up", catch_up_window_s=86400)
    world.tick(120)  # 10:00 runs
    world.pause(job)  # 10:00:30
    world.downtime(5 * 3600)
    world.patch(job, schedule="*/5 * * * *")  # 15:00:30
    world.resume(job)
    world.settle()
    ran = sorted(r.scheduled_for for r in world.rows() if r.kind is RunKind.SCHEDULED)
    assert ran[0] == at(10, 0) and all(f > world.clock() - 600_000 for f in ran[1:]), ran
    world.check()


# --- 3. the automatic pause undoes an owner's resume ----------------------------------------------------


def test_the_automatic_pause_never_undoes_a_resume_that_came_after_the_streak(world: World) -> None:
    job = world.create(
        "0 10 * * *",
        command="fail",
        retry={"max_attempts": 1, "backoff_s": 1},
        alerts={"pause_after_consecutive_dead": 2},
    )
    world.pause(job)
    world.trigger(job)
    world.deliver()  # dead 1
    world.tick(1)
    world.trigger(job)
    # the worker recording dead run 2 read its streak (and the last resume); the owner resumes before its pause
    world.fault(
        "worker", "list_events", "hook", action=lambda: (world.clock.advance(1000), world.resume(job))
    )
    world.deliver()  # dead 2
    assert world.service.get_job(OWNER, job).paused is False, "paused again after the owner's resume"
    world.check(liveness=False)


# --- 4. the dead-letter drain kills runs the owner asked for --------------------------------------------


def test_the_dead_letter_drain_never_kills_a_rerun_the_owner_asked_for(world: World) -> None:
    job = world.create("0 10 * * *", command="fail", retry={"max_attempts": 1, "backoff_s": 1})
    world.trigger(job)
    (message,) = [m.message for m in world.queue.messages]
    world.dead_letters.redrive(message, 5)  # a copy of its message SQS gave up on, not yet drained
    world.deliver()  # the run's try fails: dead
    row = world.row(job, message.scheduled_for)
    assert row is not None and row.status is RunStatus.DEAD
    world.hooks.clear()
    world.downtime(60)  # the owner re-runs it a minute later: its old letter is of an earlier round
    world.patch(job, command="echo")
    world.rerun(job, message.scheduled_for)
    world.sweep()  # the drain reaches the old letter
    world.settle()
    row = world.row(job, message.scheduled_for)
    assert row is not None and row.status is RunStatus.SUCCEEDED, row
    world.check()


def test_the_dead_letter_drain_never_kills_a_backfilled_fire(world: World) -> None:
    job = world.create("*/10 * * * * *", missed="skip", misfire_grace_s=5, catch_up_window_s=0)
    world.tick(10)  # 09:58:40 sent
    fire = at(9, 58, 40)
    (sent,) = [m for m in world.queue.messages if m.message.scheduled_for == fire]
    world.queue.messages.remove(sent)
    world.dead_letters.redrive(sent.message, 5)  # SQS gave up on it; no row: the message was its record
    world.pause(job)
    world.tick(5)
    world.backfill(job, fire, fire + 1)  # the owner runs it on purpose
    world.sweep()  # the drain, lagging, reaches the letter after the backfill
    world.settle()
    row = world.row(job, fire)
    assert row is not None and row.status is RunStatus.SUCCEEDED, row
    world.check()


# --- 5. overlap: skip runs two tries at once after a PATCH -----------------------------------------------


def test_overlap_skip_holds_for_a_batch_that_read_its_spec_before_the_patch(world: World) -> None:
    job = world.create("*/10 * * * * *", overlap="allow")
    world.tick(10)  # 09:58:30 and 09:58:40 sent
    world.deliver()
    world.tick(20)  # 09:58:50 and 09:59:00 sent
    first, second = at(9, 58, 50), at(9, 59, 0)
    stale = world.worker.read_specs([job])  # batch A reads its specs: overlap allow
    world.patch(job, overlap="skip")
    # batch B takes the lock, sees no running try and runs; batch A's claim lands meanwhile
    world.during(run_id(job, second), lambda: world.deliver_fire(job, first, specs=stale))
    world.deliver_fire(job, second)
    world.check(liveness=False)


# --- 6. overlap: skip is broken by a timed-out try -------------------------------------------------------


def test_overlap_skip_holds_while_a_timed_out_try_still_runs(world: World) -> None:
    job = world.create(
        "*/10 * * * * *", overlap="skip", timeout_s=5, retry={"max_attempts": 1, "backoff_s": 1}
    )
    world.tick(10)  # 09:58:40 sent
    stuck, release = threading.Event(), threading.Event()

    def ignores_its_cancel() -> None:
        stuck.set()
        release.wait(20)

    first = at(9, 58, 40)
    world.during(run_id(job, first), ignores_its_cancel)
    slow = world.make_worker(waiter=SimWaiter(world.clock, parked=stuck.is_set), name="slow")
    try:
        world.deliver(worker=slow)  # past timeout_s the try is recorded failed; its command still runs
        world.tick(10)  # 09:58:50 sent
        world.deliver()
        world.check(liveness=False)
    finally:
        release.set()


# --- 7. a run that succeeded is recorded dead ------------------------------------------------------------


@pytest.mark.parametrize("attempts", [1, 2])
def test_a_try_that_succeeded_is_never_recorded_dead_nor_run_again(world: World, attempts: int) -> None:
    job = world.create("*/10 * * * * *", retry={"max_attempts": attempts, "backoff_s": 1})
    world.tick(10)  # 09:58:40 sent
    world.fault("worker", "succeed", "error_before")  # the one success write fails transiently
    world.deliver()
    world.settle()  # its message comes back after its visibility; the claim takes the run over
    row = world.row(job, at(9, 58, 40))
    assert row is not None and row.status is RunStatus.SUCCEEDED, row
    world.check()


def test_a_success_write_that_took_effect_before_its_error_stands(world: World) -> None:
    job = world.create("*/10 * * * * *", retry={"max_attempts": 1, "backoff_s": 1})
    world.tick(10)
    world.fault("worker", "succeed", "error_after")
    world.deliver()
    world.settle()
    row = world.row(job, at(9, 58, 40))
    assert row is not None and row.status is RunStatus.SUCCEEDED, row
    world.check()


# --- 8. overlap: skip turns a lost or failed try into skipped ---------------------------------------------


def test_overlap_skip_never_turns_the_retry_of_a_failed_try_into_skipped(world: World) -> None:
    job = world.create("*/10 * * * * *", overlap="skip", retry={"max_attempts": 2, "backoff_s": 1})
    world.tick(10)  # 09:58:30 and 09:58:40 sent
    world.deliver_fire(job, at(9, 58, 30))
    first, second = at(9, 58, 40), at(9, 58, 50)
    fail_once(run_id(job, first), world)
    world.deliver_fire(job, first)  # the first try fails: retrying in 1 s
    world.tick(10)  # 09:58:50 sent
    # the retry arrives while the next fire's try holds the lock
    world.during(run_id(job, second), lambda: world.deliver_fire(job, first))
    world.deliver_fire(job, second)
    world.settle()
    row = world.row(job, first)
    assert row is not None and row.status in (RunStatus.SUCCEEDED, RunStatus.DEAD), row
    world.check()


def test_overlap_skip_never_turns_a_lost_workers_try_into_skipped(world: World) -> None:
    job = world.create("*/10 * * * * *", overlap="skip", retry={"max_attempts": 2, "backoff_s": 1})
    world.tick(10)  # 09:58:30 and 09:58:40 sent
    world.deliver_fire(job, at(9, 58, 30))
    first = at(9, 58, 40)
    world.fault("worker", "claim", "crash_after")  # its worker dies right after the claim
    world.deliver_fire(job, first)
    world.tick(150)  # its heartbeat is stale, its message visible again; 10:01:10 sent
    latest = at(10, 1, 10)
    # the lost worker's run comes back while the latest fire's try holds the lock
    world.during(run_id(job, latest), lambda: world.deliver_fire(job, first))
    world.deliver_fire(job, latest)
    world.settle()
    row = world.row(job, first)
    assert row is not None and row.status in (RunStatus.SUCCEEDED, RunStatus.DEAD), row
    assert len(row.tries) >= 1, row
    world.check()


# --- 9. backfill never runs the first fire of a skipped summary --------------------------------------------


def test_a_backfill_runs_every_fire_of_a_skipped_summary_first_one_included(world: World) -> None:
    job = world.create("*/10 * * * * *", missed="skip", misfire_grace_s=0, catch_up_window_s=0)
    world.tick(2)
    world.downtime(200)  # 09:58:40 .. 10:01:50 missed: one summary row
    world.settle()
    summary = [r for r in world.rows() if r.skipped_count]
    assert summary and summary[0].scheduled_for == at(9, 58, 40), world.rows()
    world.backfill(job, at(9, 58, 40), at(10, 1, 45))
    world.settle()
    ran = {r.scheduled_for for r in world.rows() if r.status is RunStatus.SUCCEEDED}
    assert at(9, 58, 40) in ran
    world.check()


# --- 10. backfill runs a jittered fire early --------------------------------------------------------------


def test_a_backfill_never_runs_a_jittered_fire_before_its_dispatch(world: World) -> None:
    job = world.create("0 10 * * *", jitter_s=600)
    while jitter_offset_ms(job, 600) < 60_000:  # a job whose dispatch is at least a minute after 10:00
        world.delete(job)
        job = world.create("0 10 * * *", jitter_s=600)
    world.tick(95)  # 10:00:05
    result = world.backfill(job, at(9, 59, 30), at(10, 0, 0, 1))
    assert result.left_to_scheduler == 1, result
    world.run_for(600)  # past the fire's dispatch (10:00 plus at most 600 s): the scheduler sends it
    world.settle()
    row = world.row(job, at(10, 0))
    assert row is not None and row.status is RunStatus.SUCCEEDED, row
    assert row.started_at is not None and row.started_at >= at(10, 0) + jitter_offset_ms(job, 600), row
    world.check()


# --- 11. lowering due_shards silences jobs ----------------------------------------------------------------


def test_lowering_due_shards_leaves_no_job_silent() -> None:
    world = World(settings=memory_settings(due_shards=4))
    try:
        for _ in range(8):
            world.create("*/10 * * * * *", missed="skip", misfire_grace_s=5, catch_up_window_s=0)
        world.run_for(20)
        world.redeploy(memory_settings(due_shards=1))
        world.run_for(120)
        world.check()
    finally:
        world.close()


# --- a pause means the job does not run ---------------------------------------------------------------------


@pytest.mark.parametrize("missed", ["catch_up", "skip"])
def test_fires_that_fall_while_paused_are_neither_run_nor_recorded_missed(world: World, missed: str) -> None:
    job = world.create("*/10 * * * * *", missed=missed, misfire_grace_s=5, catch_up_window_s=600)
    world.tick(15)  # 09:58:40 runs
    world.pause(job)  # 09:58:45
    world.tick(60)  # 09:58:50 .. 09:59:40 fall while paused
    world.resume(job)  # 09:59:45
    world.run_for(10)  # 09:59:55: the first fire after the resume is due
    world.settle()
    paused_over = [r for r in world.rows() if at(9, 58, 45) < r.scheduled_for <= at(9, 59, 45)]
    assert paused_over == [], paused_over
    assert world.row(job, at(9, 59, 50)) is not None
    world.check()


def test_a_backfill_runs_a_paused_over_window_on_purpose(world: World) -> None:
    job = world.create("*/10 * * * * *", missed="catch_up", catch_up_window_s=600)
    world.tick(15)
    world.pause(job)
    world.tick(60)
    world.resume(job)
    world.backfill(job, at(9, 58, 45), at(9, 59, 45))
    world.settle()
    ran = {r.scheduled_for for r in world.rows() if r.status is RunStatus.SUCCEEDED}
    assert {at(9, 58, 50) + 10_000 * i for i in range(6)} <= ran, sorted(ran)
    world.check()


# --- a re-run near the retention age ------------------------------------------------------------------------


def test_a_rerun_near_the_retention_age_does_not_expire_mid_run(world: World) -> None:
    job = world.create("0 10 * * *", command="fail", retry={"max_attempts": 1, "backoff_s": 1})
    world.trigger(job)
    world.deliver()
    (row,) = [r for r in world.rows() if r.job_id == job]
    assert row.status is RunStatus.DEAD and row.expires_at_s is not None
    world.pause(job)
    world.patch(job, command="echo")
    world.clock.now_ms = row.expires_at_s * 1000 - 30_000  # 30 s before the row's expiry
    world.rerun(job, row.scheduled_for)

    def retention_passes() -> None:
        world.clock.advance(60_000)
        world.expire()

    world.during(row.run_id, retention_passes)
    world.settle()
    world.check()


# --- a job deleted before any tick found its missed fires ---------------------------------------------------


def test_a_job_deleted_during_a_downtime_has_its_missed_fires_neither_run_nor_owed(world: World) -> None:
    job = world.create("*/10 * * * * *", missed="catch_up", misfire_grace_s=0, catch_up_window_s=30)
    world.downtime(600)  # 60 fires missed, no tick ran
    world.delete(job)
    world.settle()
    assert [r for r in world.rows() if r.job_id == job] == []
    world.check()


# --- a job deleted while its fire waits on the queue ----------------------------------------------------------


def test_a_fire_sent_before_its_job_was_deleted_is_recorded_skipped_not_owed(world: World) -> None:
    job = world.create("*/10 * * * * *", missed="catch_up", misfire_grace_s=0)
    world.tick(11)  # the first fires are sent; no worker takes them yet
    sent = [m.message.scheduled_for for m in world.queue.messages if m.message.job_id == job]
    assert sent
    world.delete(job)
    world.settle()
    rows = {r.scheduled_for: r for r in world.rows() if r.job_id == job}
    assert all(rows[fire].status.value == "skipped" for fire in sent)
    world.check()


# --- a manual run whose message SQS gave up on ----------------------------------------------------------------


def test_a_trigger_whose_message_is_dead_lettered_is_recorded_dead_not_lost(world: World) -> None:
    job = world.create("* * * * *", missed="catch_up")
    world.trigger(job)
    (sent,) = [m for m in world.queue.messages if m.message.job_id == job]
    world.queue.messages.remove(sent)
    world.dead_letters.redrive(sent.message, 5)  # SQS gave up on it before any try
    world.settle()
    (row,) = [r for r in world.rows() if r.job_id == job and r.scheduled_for == sent.message.scheduled_for]
    assert row.status is RunStatus.DEAD and "dead-letter" in (row.error or ""), row
    world.check()


# --- a backfill after a change of schedule ------------------------------------------------------------------


def test_a_backfill_after_a_change_of_schedule_runs_the_fires_of_the_schedule_in_force_at_the_request(
    world: World,
) -> None:
    job = world.create("* * * * * *", missed="catch_up", misfire_grace_s=0, catch_up_window_s=0)
    world.tick(5)
    world.downtime(120)  # the fires of the last two minutes are missed
    world.patch(job, schedule="* * * * *")  # every second until now, every minute from now on
    start = world.clock() - 60_000
    world.backfill(job, start, world.clock())  # the window's fires of the schedule in force now: every minute
    world.settle()
    world.check()


def test_a_backfill_runs_fires_of_its_schedule_from_before_that_schedule_was_written(world: World) -> None:
    job = world.create("*/10 * * * * *", missed="skip", misfire_grace_s=0, catch_up_window_s=600)
    world.patch(job, schedule="every 7 seconds")
    world.downtime(600)
    world.patch(job, schedule="*/10 * * * * *")
    start = world.clock() - 600_000
    world.backfill(job, start, world.clock())  # */10's fires of the last ten minutes, on the owner's request
    world.patch(job, schedule="* * * * *")  # in the same millisecond: the backfill asked for */10's fires
    world.settle()
    ran = {r.scheduled_for for r in world.rows() if r.kind is RunKind.BACKFILL}
    assert ran and all(fire % 10_000 == 0 for fire in ran), sorted(ran)
    world.check()


# --- a job whose due entry waits in the backlog after a downtime ----------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "fields"),
    [
        ("*/10 * * * * *", {"missed": "skip", "misfire_grace_s": 0, "catch_up_window_s": 30}),
        ("* * * * * *", {"missed": "catch_up", "misfire_grace_s": 5, "catch_up_window_s": 30}),
    ],
)
def test_fires_that_fall_while_the_ticks_read_a_backlog_may_be_found_late_and_recorded_missed(
    world: World, schedule: str, fields: dict[str, Any]
) -> None:
    """After a long downtime each tick reads the due backlog a bounded slice at a time (oldest buckets first,
    ``TickLimits.backlog_buckets``, plus the newest two: design §4.1, "A rush fills ticks with its backlog, oldest
    due first"). A job whose entry lies in a bucket between the slice and the newest two is found only when the
    slice reaches it: its fires that fell meanwhile are late by then, and ``missed: skip`` records them missed
    (``catch_up``: those older than its window).
    Those ticks did not read every due entry (``lag_ms > 0``): the oracle counts them as ticks that may have
    found a fire, not as ticks that found every due job."""
    job = world.create(schedule, **fields)
    world.tick(3)
    world.downtime(2 * 86_400)  # 2880 buckets to read again, 60 a tick
    world.tick(
        1
    )  # the job's entry lies in the oldest bucket: found, its fires recorded missed, refiled for now
    world.downtime(300)  # its entry is now 5 minutes old: neither in the slice nor in the newest two buckets
    start = world.clock()
    world.tick(20)
    results = world.step_loops()
    assert results and all(r.lag_ms > 0 for r in results)  # still reading the backlog
    world.settle()
    fire = start // 10_000 * 10_000 + 10_000  # a fire of both schedules, while the ticks read the backlog
    rows = [r for r in world.rows() if r.job_id == job and r.status is RunStatus.SKIPPED]
    assert any(r.scheduled_for <= fire <= (r.skipped_through or r.scheduled_for) for r in rows), rows
    world.check()


# --- a manual run and a re-timed schedule's first fire at the same instant -------------------------------------


def test_a_schedule_retimed_at_a_manual_runs_instant_starts_after_it(world: World) -> None:
    """A manual run is keyed at the instant of its request and never at a fire of the job's schedule (design §2:
    "their ``scheduled_for`` never collides with a scheduled fire"). A PATCH in the same millisecond to a rate
    anchored at that instant (the job's creation) would have its first fire there, under the manual run's key:
    the scheduler's message would find the manual run's row and the fire would never run on its own. The
    re-timed schedule starts with its first fire after the manual run's instant."""
    job = world.create("at 2026-03-02T11:00:00Z")
    created = world.clock()
    world.trigger(job)
    world.patch(job, schedule="every 7 seconds")  # the same millisecond: the rate is anchored at the creation
    assert world.clock() == created
    world.tick(10)
    world.settle()
    manual = world.row(job, created)
    assert manual is not None and manual.kind is RunKind.MANUAL and manual.status is RunStatus.SUCCEEDED
    assert (job, created) not in world.oracle.sends  # no fire of the schedule under the manual run's key
    first = world.row(job, created + 7_000)
    assert first is not None and first.kind is RunKind.SCHEDULED and first.status is RunStatus.SUCCEEDED
    world.check()
