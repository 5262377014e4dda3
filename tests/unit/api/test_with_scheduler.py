"""API edits and triggers seen through the scheduler: the scheduler really ticks (FakeClock, the
in-memory fakes) after each call.

A PATCH that re-times a job must not drop fires that are still pending (jitter not yet elapsed) or were missed
while the scheduler was down; a manual trigger must never take the run key of a scheduled fire.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from pydantic import TypeAdapter

from jobsched.aws.positions import JsonPositions
from jobsched.clock import from_ms
from jobsched.domain import registration
from jobsched.domain.lease import LeaderLease
from jobsched.domain.loop import SchedulerLoop
from jobsched.domain.planning import TickLimits
from jobsched.domain.runs import claim_message
from jobsched.domain.tick import Scheduler
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.run_messages import RunMessage
from jobsched.runtime.wiring import tick_config
from jobsched.schedule.engine import jitter_offset_ms

MINUTE = 60_000
DAY = 86_400_000
JITTERED_ID = "j_00000000000000000005"  # jitter_offset_ms(JITTERED_ID, 600) is 246 078 ms


@pytest.fixture
def scheduler(http: Any) -> Iterator[SchedulerLoop]:
    """The partition-0 scheduler loop (one partition by default) on the test's fakes, queue and clock (fresh
    per test: no lease and no watermark left by another test's clock)."""
    settings, backend = http.settings, http.backend
    control = backend.control
    tick = Scheduler(
        partition=0,
        jobs=backend.jobs,
        runs=backend.runs,
        queue=backend.queue,
        control=control,
        config=tick_config(settings),
        positions=JsonPositions(),
        clock=http.clock,
        limits=TickLimits(threads=2),
    )
    lease = LeaderLease(control, 0, "api-tests", clock=http.clock, ttl_ms=int(settings.lease_ttl_s * 1000))
    yield SchedulerLoop(tick, lease, clock=http.clock, sleep=http.clock.sleep)
    tick.close()


def step_at(http: Any, loop: SchedulerLoop, now_ms: int) -> None:
    http.clock.now_ms = now_ms
    loop.step()


def runs(http: Any, job_id: str) -> list[dict[str, Any]]:
    """The job's runs, oldest first: its history through the API, and the scheduled runs whose message waits on
    the run queue (a scheduled run has no row before a worker's claim: its message is its record, design
    §4.2), each as the API shows a run not yet started (``id``, ``scheduled_for``, ``status`` queued,
    ``kind`` scheduled). The messages stay on the queue."""
    reply = http("GET", f"/jobs/{job_id}/runs", query={"limit": "100"})
    assert reply.status == 200, reply.body
    history = list(reversed(reply.body["items"]))
    seen = {run["scheduled_for"] for run in history}
    pending = {
        iso(m.scheduled_for): {
            "id": f"{m.job_id}@{m.scheduled_for}",
            "job_id": m.job_id,
            "scheduled_for": iso(m.scheduled_for),
            "status": "queued",
            "kind": "scheduled",
            "skipped_count": None,
        }
        for m in peek(http)
        if m.job_id == job_id
    }
    history.extend(run for at, run in pending.items() if at not in seen)
    return sorted(history, key=lambda run: run["scheduled_for"])


def peek(http: Any) -> list[RunMessage]:
    """The messages on the run queue (the fake's record of what was sent), left there."""
    return list(http.backend.queue.sent)


def drain(http: Any) -> list[RunMessage]:
    """The messages on the run queue, taken off it."""
    return list(http.backend.queue.take())


def claim_now(http: Any, message: RunMessage, *, same_round: bool = False) -> Any:
    """Worker ``w-1``'s claim of ``message``'s run now (``same_round``: in the message's round only, as the
    dead-letter drain claims)."""
    now = http.clock()
    return claim_message(
        http.backend.runs,
        message,
        worker="w-1",
        now_ms=now,
        retry_due_by_ms=now,
        settings=http.settings,
        same_round=same_round,
    )


def iso(ms: int) -> str:
    """An instant as the API writes it (``2026-03-02T10:05:00Z``)."""
    return str(TypeAdapter(datetime).dump_python(from_ms(ms), mode="json"))


# --- PATCH keeps pending fires ------------------------------------------------------------------------


def test_a_patch_between_a_fire_and_its_jittered_dispatch_keeps_that_run(http, scheduler, monkeypatch):
    # Given: a daily 10:05 job with a 600 s jitter window, whose 10:05 fire is due at 10:05 + its offset
    monkeypatch.setattr(registration, "new_job_id", lambda: JITTERED_ID)
    job = http.create("jittered", schedule="5 10 * * *", jitter_s=600)
    offset = jitter_offset_ms(JITTERED_ID, 600)
    fire = http.NOW_MS + 5 * MINUTE
    assert job["next_run_at"] == iso(fire) and offset > 2 * MINUTE
    step_at(http, scheduler, http.NOW_MS)
    step_at(http, scheduler, fire + 1_000)  # past the nominal fire, before its dispatch: nothing runs yet
    assert runs(http, job["id"]) == []

    # When: the owner changes a timing field in that window
    reply = http("PATCH", f"/jobs/{job['id']}", body={"end_at": "2027-01-01T00:00:00Z"})

    # Then: the pending fire stays next, and runs at its dispatch instant, never earlier
    assert reply.status == 200 and reply.body["next_run_at"] == iso(fire)
    step_at(http, scheduler, fire + offset - 1)
    assert runs(http, job["id"]) == []
    step_at(http, scheduler, fire + offset)
    [run] = runs(http, job["id"])
    assert run["scheduled_for"] == iso(fire) and run["status"] == "queued" and run["kind"] == "scheduled"
    assert drain(http) == [RunMessage(job_id=job["id"], scheduled_for=fire)]
    assert http("GET", f"/jobs/{job['id']}").body["next_run_at"] == iso(fire + DAY)


def test_a_patch_of_jitter_between_a_fire_and_its_dispatch_does_not_skip_that_fire(
    http, scheduler, monkeypatch
):
    # Given: a daily 10:05 job (missed: skip, 60 s grace) with a 600 s jitter window, 3 minutes past its 10:05
    # fire and more than a minute before its dispatch (10:05 + 246 s): the fire is pending, not missed
    monkeypatch.setattr(registration, "new_job_id", lambda: JITTERED_ID)
    job = http.create("jittered-skip", schedule="5 10 * * *", jitter_s=600, missed="skip")
    fire = http.NOW_MS + 5 * MINUTE
    step_at(http, scheduler, http.NOW_MS)
    step_at(http, scheduler, fire + 3 * MINUTE)
    assert runs(http, job["id"]) == []

    # When: the owner drops the jitter (its dispatch instant becomes the nominal fire, already 3 minutes past)
    reply = http("PATCH", f"/jobs/{job['id']}", body={"jitter_s": 0})
    assert reply.status == 200 and reply.body["next_run_at"] == iso(fire)

    # Then: the pending fire runs once, at once (its new instant is past): it was never missed, so it is not
    # recorded skipped
    step_at(http, scheduler, fire + 3 * MINUTE + 1_000)
    [run] = runs(http, job["id"])
    assert (run["scheduled_for"], run["status"]) == (iso(fire), "queued")
    assert drain(http) == [RunMessage(job_id=job["id"], scheduled_for=fire)]


def test_a_patch_after_scheduler_downtime_keeps_the_catch_up_backlog(http, scheduler):
    # Given: an every-minute job whose 10:00 run was made, then 29 minutes without a scheduler
    job = http.create("minutely", schedule="* * * * *")
    step_at(http, scheduler, http.NOW_MS + 5)
    http.clock.now_ms = http.NOW_MS + 30 * MINUTE + 500

    # When: the owner edits end_at before the scheduler is back
    reply = http("PATCH", f"/jobs/{job['id']}", body={"end_at": "2027-01-01T00:00:00Z"})

    # Then: next_run_at is the first missed fire, and the scheduler runs each missed fire once (catch_up)
    assert reply.status == 200 and reply.body["next_run_at"] == iso(http.NOW_MS + MINUTE)
    step_at(http, scheduler, http.NOW_MS + 30 * MINUTE + 600)
    rows = runs(http, job["id"])
    assert [r["scheduled_for"] for r in rows] == [iso(http.NOW_MS + i * MINUTE) for i in range(31)]
    assert {r["status"] for r in rows} == {"queued"}
    assert len(drain(http)) == 31
    assert http("GET", f"/jobs/{job['id']}").body["next_run_at"] == iso(http.NOW_MS + 31 * MINUTE)


def test_a_patch_after_downtime_lets_the_skip_policy_record_what_did_not_run(http, scheduler):
    # Given: the same downtime for a job whose missed fires are skipped
    job = http.create("minutely-skip", schedule="* * * * *", missed="skip")
    step_at(http, scheduler, http.NOW_MS + 5)
    http.clock.now_ms = http.NOW_MS + 30 * MINUTE + 500

    reply = http("PATCH", f"/jobs/{job['id']}", body={"timezone": "Europe/Berlin"})

    # Then: the 29 fires late by more than the grace show as one skipped summary row; 10:30 (on time) runs
    assert reply.body["next_run_at"] == iso(http.NOW_MS + MINUTE)
    step_at(http, scheduler, http.NOW_MS + 30 * MINUTE + 600)
    rows = runs(http, job["id"])
    assert [(r["scheduled_for"], r["status"], r["skipped_count"]) for r in rows] == [
        (iso(http.NOW_MS), "queued", None),
        (iso(http.NOW_MS + MINUTE), "skipped", 29),
        (iso(http.NOW_MS + 30 * MINUTE), "queued", None),
    ]


def test_a_patch_to_a_new_schedule_keeps_missed_fires_of_both_schedules_only(http, scheduler):
    # Given: an hourly job (last run 10:00) and a scheduler down until 12:30
    job = http.create("hourly", schedule="0 * * * *")
    step_at(http, scheduler, http.NOW_MS + 5)
    http.clock.now_ms = http.NOW_MS + 150 * MINUTE  # 12:30

    # When: the schedule becomes half-hourly
    reply = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "*/30 * * * *"})

    # Then: of the missed fires, only those after the last one that was no fire of the hourly schedule in force
    # (11:30) are kept: 12:00 runs (caught up), 11:00 and 11:30 do not; 12:30 on time
    assert reply.body["next_run_at"] == iso(http.NOW_MS + 120 * MINUTE)
    step_at(http, scheduler, http.NOW_MS + 150 * MINUTE + 5)
    assert [r["scheduled_for"] for r in runs(http, job["id"])] == [
        iso(http.NOW_MS + m * MINUTE) for m in (0, 120, 150)
    ]


def test_a_patch_of_a_paused_job_to_a_new_schedule_runs_no_fire_from_before_it(http, scheduler):
    # Given: an hourly job paused at 10:00:30 (after its 10:00 run)
    job = http.create("hourly-paused", schedule="0 * * * *")
    step_at(http, scheduler, http.NOW_MS + 5)
    http.clock.now_ms = http.NOW_MS + 30_000
    assert http("POST", f"/jobs/{job['id']}/pause").status == 200

    # When: at 15:00:30 the schedule becomes every 5 minutes, and the job is resumed
    http.clock.now_ms = http.NOW_MS + 300 * MINUTE + 30_000
    assert http("PATCH", f"/jobs/{job['id']}", body={"schedule": "*/5 * * * *"}).status == 200
    reply = http("POST", f"/jobs/{job['id']}/resume")

    # Then: the first fire is 15:05; nothing of 11:00-15:00 runs (no fire of the new schedule before the
    # PATCH, no fire of the paused time)
    assert reply.body["next_run_at"] == iso(http.NOW_MS + 305 * MINUTE)
    for second in range(0, 6 * MINUTE, 1_000):
        step_at(http, scheduler, http.NOW_MS + 300 * MINUTE + 30_000 + second)
    assert [(r["scheduled_for"], r["status"]) for r in runs(http, job["id"])] == [
        (iso(http.NOW_MS), "queued"),
        (iso(http.NOW_MS + 305 * MINUTE), "queued"),
    ]


def test_a_patch_while_the_scheduler_keeps_up_retimes_from_now_on(http, scheduler):
    # Given: an every-minute job the scheduler has kept up with (next fire 10:03, ahead of now)
    job = http.create("current", schedule="* * * * *")
    for minute in range(3):
        step_at(http, scheduler, http.NOW_MS + minute * MINUTE + 5)
    http.clock.now_ms = http.NOW_MS + 2 * MINUTE + 30_000  # 10:02:30

    reply = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "*/5 * * * *"})

    # Then: the first fire of the new schedule from now on; the runs made stay as they were
    assert reply.body["next_run_at"] == iso(http.NOW_MS + 5 * MINUTE)
    step_at(http, scheduler, http.NOW_MS + 5 * MINUTE + 5)
    assert [r["scheduled_for"] for r in runs(http, job["id"])] == [
        iso(http.NOW_MS + m * MINUTE) for m in (0, 1, 2, 5)
    ]


# --- a pause means the job does not run ------------------------------------------------------------------


@pytest.mark.parametrize("missed", ["catch_up", "skip"])
def test_a_resume_runs_nothing_of_the_paused_time_and_records_nothing_missed(http, scheduler, missed):
    # Given: an hourly job (its 10:00 run made) paused at 10:00:30 for three days
    job = http.create(f"paused-{missed}", schedule="0 * * * *", missed=missed, catch_up_window_s=7 * 86_400)
    step_at(http, scheduler, http.NOW_MS + 5)
    http.clock.now_ms = http.NOW_MS + 30_000
    assert http("POST", f"/jobs/{job['id']}/pause").status == 200
    step_at(http, scheduler, http.NOW_MS + 31_000)

    # When: it is resumed three days later at 10:20
    resumed_at = http.NOW_MS + 3 * DAY + 20 * MINUTE
    http.clock.now_ms = resumed_at
    reply = http("POST", f"/jobs/{job['id']}/resume")

    # Then: it continues with the first fire after the resume instant; the 72 fires of the pause neither run
    # nor show as skipped
    assert reply.status == 200 and reply.body["next_run_at"] == iso(http.NOW_MS + 3 * DAY + 60 * MINUTE)
    step_at(http, scheduler, resumed_at + 1_000)
    step_at(http, scheduler, http.NOW_MS + 3 * DAY + 60 * MINUTE + 5)
    assert [(r["scheduled_for"], r["status"]) for r in runs(http, job["id"])] == [
        (iso(http.NOW_MS), "queued"),
        (iso(http.NOW_MS + 3 * DAY + 60 * MINUTE), "queued"),
    ]


def test_a_patch_resuming_a_job_continues_after_the_resume_instant(http, scheduler):
    job = http.create("patched-resume", schedule="0 * * * *", paused=True)
    http.clock.now_ms = http.NOW_MS + 150 * MINUTE  # 12:30

    reply = http("PATCH", f"/jobs/{job['id']}", body={"paused": False, "end_at": "2027-01-01T00:00:00Z"})

    assert reply.status == 200 and reply.body["next_run_at"] == iso(http.NOW_MS + 180 * MINUTE)
    step_at(http, scheduler, http.NOW_MS + 150 * MINUTE + 5)
    assert runs(http, job["id"]) == []


# --- trigger never takes a scheduled fire's run key --------------------------------------------------


@pytest.mark.parametrize("schedule", ["* * * * *", "every 1 minute", "* * * * * *"])
def test_a_trigger_at_a_fire_instant_leaves_that_fire_to_the_scheduler(http, scheduler, schedule):
    # Given: a job whose schedule fires at 10:01:00.000, triggered at exactly that millisecond
    job = http.create("busy", schedule=schedule)
    step_at(http, scheduler, http.NOW_MS + MINUTE - 1_000)
    drain(http)
    fire = http.NOW_MS + MINUTE
    http.clock.now_ms = fire

    manual = http("POST", f"/jobs/{job['id']}/trigger")

    # Then: the manual run takes the previous free millisecond (never one after the request: a worker receiving
    # it at once would start it before its scheduled_for, found by the model-based test), and the scheduled
    # fire still gets its own run
    assert manual.status == 202 and manual.body["id"] == f"{job['id']}@{fire - 1}"
    step_at(http, scheduler, fire + 5)
    rows = {r["scheduled_for"]: r["kind"] for r in runs(http, job["id"])}
    assert rows[iso(fire)] == "scheduled" and rows[iso(fire - 1)] == "manual"
    assert sorted(m.scheduled_for for m in drain(http) if m.scheduled_for >= fire - 1) == [fire - 1, fire]


def test_a_trigger_between_fires_keeps_its_instant(http):
    job = http.create("quiet", schedule="* * * * *")
    http.clock.now_ms = http.NOW_MS + 1_234

    manual = http("POST", f"/jobs/{job['id']}/trigger").body

    assert manual["id"] == f"{job['id']}@{http.NOW_MS + 1_234}"
    assert manual["scheduled_for"] == iso(http.NOW_MS + 1_234)


def test_a_trigger_still_runs_when_the_stored_schedule_no_longer_parses(http):
    # Given: a job whose stored zone tzdata no longer knows (so the scheduler cannot fire it either)
    job = http.create("orphaned", schedule="* * * * *")
    jobs = http.backend.jobs.jobs
    jobs[job["id"]] = jobs[job["id"]].model_copy(update={"timezone": "Gone/Zone"})
    http.clock.now_ms = http.NOW_MS + MINUTE

    manual = http("POST", f"/jobs/{job['id']}/trigger")

    assert manual.status == 202 and manual.body["id"] == f"{job['id']}@{http.NOW_MS + MINUTE}"


# --- queued fires: dispatched, not yet claimed ----------------------------------------------------------------


def _history(http: Any, path: str, **query: str) -> list[tuple[str, str]]:
    reply = http("GET", path, query={"limit": "100", **query})
    assert reply.status == 200, reply.body
    return [(run["scheduled_for"], run["status"]) for run in reply.body["items"]]


def test_fires_dispatched_and_not_yet_claimed_are_listed_queued_until_their_claim(http, scheduler):
    # Given an every-minute job whose 10:00, 10:01 and 10:02 fires the scheduler dispatched, no worker running
    job = http.create("minutely-queued", schedule="* * * * *")
    for minute in range(3):
        step_at(http, scheduler, http.NOW_MS + minute * MINUTE + 5)
    fires = [iso(http.NOW_MS + minute * MINUTE) for minute in (2, 1, 0)]
    # Then the job's history and GET /runs (all, and status=queued) list them queued, newest first
    queued = [(fire, "queued") for fire in fires]
    assert _history(http, f"/jobs/{job['id']}/runs") == queued
    assert _history(http, f"/jobs/{job['id']}/runs", status="queued") == queued
    assert _history(http, "/runs") == queued
    assert _history(http, "/runs", status="queued") == queued
    assert _history(http, "/runs", job_id=job["id"], status="queued") == queued
    assert _history(http, f"/jobs/{job['id']}/runs", status="running") == []
    # When a worker claims the 10:00 fire (its row made by the claim)
    message = next(m for m in drain(http) if m.scheduled_for == http.NOW_MS)
    claim = claim_now(http, message)
    assert claim.claimed
    # Then it is listed once, running, and the two others still queued
    assert _history(http, f"/jobs/{job['id']}/runs") == [*queued[:2], (fires[2], "running")]
    assert _history(http, "/runs", status="queued") == queued[:2]
    # And the pages of a listing split the queued fires and the rows alike
    first = http("GET", f"/jobs/{job['id']}/runs", query={"limit": "2"})
    assert [run["scheduled_for"] for run in first.body["items"]] == fires[:2]
    rest = http("GET", f"/jobs/{job['id']}/runs", query={"limit": "2", "cursor": first.body["next_cursor"]})
    assert [(run["scheduled_for"], run["status"]) for run in rest.body["items"]] == [(fires[2], "running")]
    assert rest.body["next_cursor"] is None


def test_fires_before_the_jobs_last_edit_or_in_a_skipped_summary_are_not_listed_queued(http, scheduler):
    # Given an every-minute job (missed: skip) whose 10:00 fire was dispatched, then 29 minutes of downtime
    job = http.create("minutely-summary", schedule="* * * * *", missed="skip")
    step_at(http, scheduler, http.NOW_MS + 5)
    step_at(http, scheduler, http.NOW_MS + 30 * MINUTE + 600)
    # Then the 29 missed fires are one skipped summary, not queued; 10:00 and 10:30 are queued
    assert _history(http, f"/jobs/{job['id']}/runs") == [
        (iso(http.NOW_MS + 30 * MINUTE), "queued"),
        (iso(http.NOW_MS + MINUTE), "skipped"),
        (iso(http.NOW_MS), "queued"),
    ]
    # When the job is edited, fires dispatched before the edit are no longer derived (they show once claimed)
    http.clock.now_ms += MINUTE
    assert http("PATCH", f"/jobs/{job['id']}", body={"timezone": "Europe/Berlin"}).status == 200
    assert _history(http, f"/jobs/{job['id']}/runs", status="queued") == []


def test_a_fire_listed_queued_can_be_cancelled_and_no_try_of_it_starts(http, scheduler):
    # Given an every-minute job whose 10:00 fire was dispatched and is listed queued (no row: no claim yet)
    job = http.create("minutely-cancel", schedule="* * * * *")
    step_at(http, scheduler, http.NOW_MS + 5)
    [listed] = http("GET", f"/jobs/{job['id']}/runs").body["items"]
    assert listed["status"] == "queued"
    # When the owner cancels it by the id the listing shows
    reply = http("POST", f"/jobs/{job['id']}/runs/{listed['id']}/cancel", body={"reason": "not today"})
    # Then it ends cancelled, no try started, and the listing shows it cancelled (no longer queued)
    assert reply.status == 200, reply.body
    assert (reply.body["status"], reply.body["stop"]) == ("cancelled", "not_started")
    assert reply.body["cancel_reason"] == "not today" and reply.body["cancelled_by"] == http.alice
    assert _history(http, f"/jobs/{job['id']}/runs") == [(listed["scheduled_for"], "cancelled")]
    assert _history(http, "/runs", status="cancelled") == [(listed["scheduled_for"], "cancelled")]
    # And the worker's claim of its message is refused: the run is never started, still cancelled
    [message] = drain(http)
    claim = claim_now(http, message)
    assert not claim.claimed
    assert http.backend.runs.get(job["id"], http.NOW_MS).status.value == "cancelled"
    # And a second cancel answers the same
    again = http("POST", f"/jobs/{job['id']}/runs/{listed['id']}/cancel", body={"reason": "other"})
    assert again.status == 200 and again.body["cancel_reason"] == "not today"


def test_a_fire_not_dispatched_is_still_404_to_cancel(http, scheduler):
    # Given an every-minute job the scheduler dispatched up to 10:00 only
    job = http.create("minutely-future", schedule="* * * * *")
    step_at(http, scheduler, http.NOW_MS + 5)
    # Then its 10:01 fire (not dispatched, not listed) cannot be cancelled ahead: 404, nothing written
    run_id = f"{job['id']}@{http.NOW_MS + MINUTE}"
    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel")
    assert reply.status == 404 and reply.error["code"] == "not_found"
    assert http.backend.runs.get(job["id"], http.NOW_MS + MINUTE) is None


def test_a_queued_fires_cancel_that_fails_after_its_row_is_made_leaves_the_fire_to_run(
    http, scheduler, monkeypatch
):
    # Given an every-minute job whose 10:00 fire is listed queued, and a run store whose cancel write fails
    job = http.create("minutely-cancel-fails", schedule="* * * * *")
    step_at(http, scheduler, http.NOW_MS + 5)
    [listed] = http("GET", f"/jobs/{job['id']}/runs").body["items"]
    http.clock.now_ms += MINUTE // 2
    calls: list[int] = []
    real_cancel = http.backend.runs.cancel

    def fails_second(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise StoreUnavailable("runs table unreachable")
        return real_cancel(*args, **kwargs)

    monkeypatch.setattr(http.backend.runs, "cancel", fails_second)
    # When the cancel made the fire's row, then failed to cancel it
    reply = http("POST", f"/jobs/{job['id']}/runs/{listed['id']}/cancel")
    assert reply.status == 500, reply.body
    # Then the fire is still queued, and its message's claim takes it, in its own round too (dead-letter drain)
    assert http.backend.runs.get(job["id"], http.NOW_MS).status.value == "queued"
    [message] = drain(http)
    claim = claim_now(http, message, same_round=True)
    assert claim.claimed
