"""POST /jobs/{id}/backfill through the handler on the in-memory fakes (design §3.3)."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain import registration
from jobsched.domain.backfill import MAX_BACKFILL_FIRES, BackfillWindowError, backfill_fires, dispatch_delay_s
from jobsched.domain.runs import new_run
from jobsched.models import RunStatus
from jobsched.schedule.engine import parse_schedule

DAY = {"start": "2026-03-01T00:00:00Z", "end": "2026-03-02T00:00:00Z"}
HOUR_MS = 3_600_000
MARCH_1 = 1_772_323_200_000  # 2026-03-01T00:00:00Z
NOW_MS = MARCH_1 + 34 * HOUR_MS  # the tests' clock: 2026-03-02T10:00:00Z
JITTERED_ID = "j_00000000000000000005"  # jitter_offset_ms(JITTERED_ID, 600) is 246 078 ms


def backfill(http: Any, job: dict[str, Any], body: dict[str, str], **kwargs: Any) -> Any:
    return http("POST", f"/jobs/{job['id']}/backfill", body=body, **kwargs)


def test_a_backfill_runs_each_past_fire_without_a_run_spread_at_the_backfill_rate(http):
    job = http.create(schedule="0 * * * *")  # created 2026-03-02T10:00Z: the window is before it
    http.put_run(job["id"], MARCH_1 + 5 * HOUR_MS, RunStatus.SUCCEEDED)
    http.backend.queue.take()

    reply = backfill(http, job, DAY)

    assert reply.status == 200, reply.body
    assert reply.body == {
        "count": 23,
        "created": 23,
        "rerun": 0,
        "fires": 24,
        "existing": 1,
        "first": "2026-03-01T00:00:00Z",
        "last": "2026-03-01T23:00:00Z",
        "left_to_scheduler": 0,
    }
    sent = http.backend.queue.take()
    assert [m.scheduled_for for m in sent] == [MARCH_1 + h * HOUR_MS for h in range(24) if h != 5]
    rate = http.settings.backfill_rate_per_s
    assert [m.delay_s for m in sent] == [i // rate for i in range(23)]
    runs = http("GET", f"/jobs/{job['id']}/runs", query={"limit": "100"}).body["items"]
    kinds = {run["scheduled_for"]: (run["kind"], run["status"]) for run in runs}
    assert kinds["2026-03-01T05:00:00Z"] == ("scheduled", "succeeded")  # left alone
    assert kinds["2026-03-01T06:00:00Z"] == ("backfill", "queued")
    assert len(runs) == 24


def test_a_repeated_backfill_creates_nothing_new(http):
    job = http.create(schedule="0 * * * *")
    first = backfill(http, job, DAY)
    http.backend.queue.take()

    again = backfill(http, job, DAY)

    assert first.body["count"] == 24
    assert again.status == 200 and again.body["count"] == 0 and again.body["existing"] == 24
    assert again.body["first"] is None and again.body["last"] is None
    assert http.backend.queue.take() == []


def test_a_backfill_is_recorded_in_the_job_s_events(http):
    job = http.create(schedule="0 * * * *")
    http.clock.advance(1)

    backfill(http, job, DAY, caller="carol")

    latest = http("GET", f"/jobs/{job['id']}/events").body["items"][0]
    assert latest["kind"] == "backfilled" and latest["actor"] == http.carol
    assert latest["detail"] == {
        "start": "2026-03-01T00:00:00+00:00",
        "end": "2026-03-02T00:00:00+00:00",
        "count": 24,
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"start": "2026-03-02T00:00:00Z", "end": "2026-03-01T00:00:00Z"}, "end must be after start"),
        ({"start": "2026-03-02T09:00:00Z", "end": "2026-03-02T11:00:00Z"}, "past fires only"),
        ({"start": "2026-02-01T00:00:00Z", "end": "2026-03-02T00:00:00Z"}, "at most 1000 fires"),
    ],
)
def test_a_window_that_cannot_be_run_is_a_400_naming_end(http, body, message):
    job = http.create(schedule="*/30 * * * *")

    reply = backfill(http, job, body)

    assert reply.status == 400 and reply.error["field"] == "end" and message in reply.error["message"]
    assert http("GET", f"/jobs/{job['id']}/runs").body["items"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"start": "2026-03-01T00:00:00", "end": "2026-03-02T00:00:00Z"}, "start"),
        ({"start": "2026-03-01T00:00:00Z"}, "end"),
        ({"start": "2026-03-01T00:00:00Z", "end": 1772409600}, "end"),
        ({"start": "2026-03-01T00:00:00Z", "end": "2026-03-02T00:00:00Z", "rate": 5}, "rate"),
    ],
)
def test_a_malformed_backfill_body_is_a_400_naming_the_field(http, body, field):
    job = http.create(schedule="0 * * * *")

    reply = backfill(http, job, body)

    assert reply.status == 400 and reply.error["field"] == field, reply.body


def test_another_team_cannot_backfill_the_job(http):
    job = http.create(schedule="0 * * * *")

    reply = backfill(http, job, DAY, caller="bob")

    assert reply.status == 404
    assert http("GET", f"/jobs/{job['id']}/runs").body["items"] == []


def test_a_backfill_with_a_key_replays_its_first_answer(http):
    job = http.create(schedule="0 * * * *")
    key = {"Idempotency-Key": "backfill-march-1"}

    first = backfill(http, job, DAY, headers=key)
    again = backfill(http, job, DAY, headers=key)
    other = backfill(http, job, {**DAY, "start": "2026-03-01T12:00:00Z"}, headers=key)

    assert first.body["count"] == 24 and again.body == first.body
    assert again.headers.get("idempotent-replayed") == "true"
    assert other.status == 422


# --- domain.backfill (pure) ---------------------------------------------------------------------------


def test_fires_are_taken_from_the_window_start_inclusive_end_exclusive():
    hourly = parse_schedule("0 * * * *", "UTC")

    fires = backfill_fires(hourly, MARCH_1, MARCH_1 + 3 * HOUR_MS, now_ms=MARCH_1 + 10 * HOUR_MS)

    assert fires == (MARCH_1, MARCH_1 + HOUR_MS, MARCH_1 + 2 * HOUR_MS)


def test_the_thousand_fire_bound_names_the_last_end_that_fits():
    minutely = parse_schedule("* * * * *", "UTC")
    end_that_fits = MARCH_1 + MAX_BACKFILL_FIRES * 60_000

    assert len(backfill_fires(minutely, MARCH_1, end_that_fits, now_ms=end_that_fits)) == MAX_BACKFILL_FIRES
    with pytest.raises(BackfillWindowError) as refused:
        backfill_fires(minutely, MARCH_1, end_that_fits + 1, now_ms=end_that_fits + 1)
    assert (
        refused.value.field == "end"
        and "end it at 2026-03-01T16:39:00.001000Z or earlier" in refused.value.message
    )


def test_dispatch_delays_spread_runs_at_the_rate_and_never_past_sqs_longest_delay():
    assert [dispatch_delay_s(i, 10) for i in (0, 9, 10, 25)] == [0, 0, 1, 2]
    assert dispatch_delay_s(10_000, 2) == 900


def test_a_backfill_reruns_fires_recorded_skipped(http):
    job = http.create(schedule="0 * * * *")
    http.put_run(job["id"], MARCH_1 + 3 * HOUR_MS, RunStatus.SKIPPED)
    http.put_run(job["id"], MARCH_1 + 4 * HOUR_MS, RunStatus.SUCCEEDED)
    http.backend.queue.take()

    reply = backfill(http, job, {"start": "2026-03-01T02:00:00Z", "end": "2026-03-01T06:00:00Z"})

    assert (reply.body["count"], reply.body["created"], reply.body["rerun"], reply.body["existing"]) == (
        3,
        2,
        1,
        1,
    )
    sent = http.backend.queue.take()
    assert [m.scheduled_for for m in sent] == [MARCH_1 + h * HOUR_MS for h in (2, 3, 5)]
    rerun = http.api.service.runs.get(job["id"], MARCH_1 + 3 * HOUR_MS)
    assert rerun.status is RunStatus.QUEUED and rerun.reruns == 1
    assert rerun.expires_at_s == http.NOW_MS // 1000 + http.settings.retention_days * 86400  # a new retention
    # each message names the round it was sent for: sent as its run was queued (the dead-letter drain tells an
    # earlier round's letter by it)
    for message in sent:
        row = http.api.service.runs.get(job["id"], message.scheduled_for)
        assert message.enqueued_at is not None and message.enqueued_at == row.enqueued_at
    assert (
        backfill(http, job, {"start": "2026-03-01T02:00:00Z", "end": "2026-03-01T06:00:00Z"}).body["count"]
        == 0
    )


def test_runs_whose_messages_sqs_refused_stay_queued_for_the_sweeper(http):
    job = http.create(schedule="0 * * * *")
    http.backend.queue.take()
    http.backend.queue.fail_next = 1

    reply = backfill(http, job, {"start": "2026-03-01T00:00:00Z", "end": "2026-03-01T03:00:00Z"})

    assert reply.status == 200 and reply.body["count"] == 3
    assert http.backend.queue.take() == []
    rows = [http.api.service.runs.get(job["id"], MARCH_1 + h * HOUR_MS) for h in range(3)]
    assert all(row.status is RunStatus.QUEUED and row.sweep_at is not None for row in rows)


def test_a_skipped_fire_is_re_run_past_many_other_rows_in_the_window(http):
    # manual triggers (or fires of an earlier schedule) leave rows between the window's fires
    job = http.create(schedule="0 0 * * *")
    first, second = MARCH_1, MARCH_1 + 24 * HOUR_MS
    http.put_run(job["id"], first, RunStatus.SKIPPED)
    http.put_run(job["id"], second, RunStatus.SKIPPED)
    for hour in range(1, 6):
        http.put_run(job["id"], first + hour * HOUR_MS, RunStatus.SUCCEEDED)
    http.backend.queue.take()

    reply = backfill(http, job, {"start": "2026-03-01T00:00:00Z", "end": "2026-03-02T01:00:00Z"})

    assert reply.status == 200, reply.body
    assert (reply.body["fires"], reply.body["rerun"], reply.body["existing"]) == (2, 2, 0)
    assert [m.scheduled_for for m in http.backend.queue.take()] == [first, second]


def test_two_backfills_in_one_millisecond_each_leave_their_event(http):
    job = http.create(schedule="0 * * * *")
    http.clock.advance(1)

    backfill(http, job, {"start": "2026-03-01T00:00:00Z", "end": "2026-03-01T05:00:00Z"})
    backfill(http, job, {"start": "2026-03-01T05:00:00Z", "end": "2026-03-01T09:00:00Z"})

    events = http("GET", f"/jobs/{job['id']}/events").body["items"]
    counts = sorted(event["detail"]["count"] for event in events if event["kind"] == "backfilled")
    assert counts == [4, 5]


@pytest.mark.parametrize(
    "start", ["0001-01-01T00:00:00Z", "1960-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z"]
)
def test_a_window_starting_before_1970_is_a_400_naming_start(http, start):
    # instants are epoch ms from 0 on: a run before that would get an id no route reads
    job = http.create(schedule="0 * * * *")

    reply = backfill(http, job, {"start": start, "end": "1970-01-02T00:00:00Z"})

    assert reply.status == 400 and reply.error["field"] == "start", reply.body
    assert http("GET", f"/jobs/{job['id']}/runs").body["items"] == []


def test_a_rate_job_without_start_at_is_backfilled_from_its_creation(http):
    # a rate without start_at is anchored at the job's creation (2026-03-02T10:00Z): fires every 7 minutes from it
    # (paused: its fires are backfill's, not left to a scheduler that has not dispatched them)
    job = http.create(schedule="rate(7 minutes)", paused=True)
    http.clock.advance(HOUR_MS)

    reply = backfill(http, job, {"start": "2026-03-02T00:00:00Z", "end": "2026-03-02T10:30:00Z"})

    assert reply.status == 200, reply.body
    assert (reply.body["fires"], reply.body["first"], reply.body["last"]) == (
        5,
        "2026-03-02T10:00:00Z",
        "2026-03-02T10:28:00Z",
    )


def _put_skipped_summary(http: Any, job_id: str, first: int, through: int) -> Any:
    """Store the skipped summary row of the 19 hourly fires of ``job_id`` from ``first`` to ``through`` (epoch
    ms), as a tick past them under ``missed: skip`` writes it; returns ``put_new``'s answer (None: stored)."""
    return http.backend.runs.put_new(
        new_run(
            job_id,
            first,
            now_ms=through,
            retention_days=90,
            status=RunStatus.SKIPPED,
            skipped_count=19,
            skipped_through=through,
            error="missed: policy skip",
        )
    )


def test_a_backfill_over_a_skipped_summary_runs_every_fire_of_it_once_the_first_included(http):
    # Given: an hourly job whose fires 01:00-19:00 of March 1 are one skipped summary row (19 fires)
    job = http.create(schedule="0 * * * *")
    first, through = MARCH_1 + HOUR_MS, MARCH_1 + 19 * HOUR_MS
    assert _put_skipped_summary(http, job["id"], first, through) is None
    http.backend.queue.take()

    # When: the owner backfills 01:00-20:00
    reply = backfill(http, job, {"start": "2026-03-01T01:00:00Z", "end": "2026-03-01T20:00:00Z"})

    # Then: all 19 fires run once, 01:00 (the summary's own key) included
    assert reply.status == 200, reply.body
    assert (reply.body["count"], reply.body["created"], reply.body["rerun"], reply.body["existing"]) == (
        19,
        18,
        1,
        0,
    )
    assert sorted(m.scheduled_for for m in http.backend.queue.take()) == [
        MARCH_1 + h * HOUR_MS for h in range(1, 20)
    ]
    row = http.backend.runs.get(job["id"], first)
    assert (row.status, row.skipped_count, row.skipped_through) == (RunStatus.QUEUED, None, None)
    again = backfill(http, job, {"start": "2026-03-01T01:00:00Z", "end": "2026-03-01T20:00:00Z"})
    assert again.body["count"] == 0 and http.backend.queue.take() == []


def test_a_backfill_over_part_of_a_summary_keeps_the_rest_skipped(http):
    job = http.create(schedule="0 * * * *")
    first, through = MARCH_1 + HOUR_MS, MARCH_1 + 19 * HOUR_MS
    _put_skipped_summary(http, job["id"], first, through)

    reply = backfill(http, job, {"start": "2026-03-01T01:00:00Z", "end": "2026-03-01T03:00:00Z"})

    assert reply.body["count"] == 2
    assert sorted(m.scheduled_for for m in http.backend.queue.take()) == [first, first + HOUR_MS]
    rest = http.backend.runs.get(job["id"], MARCH_1 + 3 * HOUR_MS)
    assert (rest.status, rest.skipped_count, rest.skipped_through, rest.error) == (
        RunStatus.SKIPPED,
        17,
        through,
        "missed: policy skip",
    )


def test_a_backfill_leaves_a_jittered_fire_not_yet_dispatched_to_the_scheduler(http, monkeypatch):
    # Given: a daily 10:00 job with a 600 s jitter window (offset 246 s), at 10:00:05 on its fire's day
    monkeypatch.setattr(registration, "new_job_id", lambda: JITTERED_ID)
    http.clock.now_ms = MARCH_1 - 86_400_000 + 11 * HOUR_MS  # created on Feb 28, 11:00
    job = http.create(schedule="0 10 * * *", jitter_s=600)
    fire = MARCH_1 + 10 * HOUR_MS
    assert http.state(job["id"]).next_run_at == fire
    http.clock.now_ms = fire + 5_000

    # When: the owner backfills [09:59:30, 10:00:00.001)
    reply = backfill(http, job, {"start": "2026-03-01T09:59:30Z", "end": "2026-03-01T10:00:00.001Z"})

    # Then: the fire is the scheduler's (it dispatches it at 10:00 + 246 s): nothing runs early, and the answer
    # says why
    assert reply.status == 200, reply.body
    assert (reply.body["count"], reply.body["fires"], reply.body["left_to_scheduler"]) == (0, 1, 1)
    assert http.backend.queue.take() == [] and http.backend.runs.get(job["id"], fire) is None


def test_a_backfill_leaves_fires_at_or_after_next_run_at_to_the_scheduler(http):
    # Given: an every-minute job whose 10:01 fire the scheduler has not sent yet (no tick since 10:00)
    job = http.create(schedule="* * * * *")
    http.clock.now_ms = NOW_MS + 90_000

    reply = backfill(http, job, {"start": "2026-03-02T09:58:00Z", "end": "2026-03-02T10:01:30Z"})

    # Then: 09:58 and 09:59 (from before the job existed) run; 10:00 and 10:01 are the scheduler's
    assert (reply.body["count"], reply.body["fires"], reply.body["left_to_scheduler"]) == (2, 4, 2)
    assert [m.scheduled_for for m in http.backend.queue.take()] == [NOW_MS - 120_000, NOW_MS - 60_000]


def test_a_paused_jobs_fires_are_backfills(http):
    job = http.create(schedule="* * * * *", paused=True)
    http.clock.now_ms = NOW_MS + 150_000

    reply = backfill(http, job, {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:02:30Z"})

    assert (reply.body["count"], reply.body["left_to_scheduler"]) == (3, 0)
