"""What will run next (``domain.fires``) and the daylight-saving notes of ``Schedule.dst_note``: pure, no AWS."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.clock import to_ms
from jobsched.domain.fires import MAX_FIRES, listing, upcoming_fires
from jobsched.domain.planning import next_fire_ms
from jobsched.ports.jobs import SchedulingState
from jobsched.schedule.engine import parse_schedule


def ms(text: str) -> int:
    return to_ms(datetime.fromisoformat(text))


def state(schedule: str, next_run_at: str | None, **fields) -> SchedulingState:
    return SchedulingState(
        job_id="j_00000000000000000001",
        partition=0,
        schedule=schedule,
        next_run_at=ms(next_run_at) if next_run_at else None,
        **fields,
    )


# --- Schedule.dst_note -------------------------------------------------------------------------


def notes(expression: str, zone: str, start: str, end: str) -> list[tuple[str, str | None]]:
    schedule = parse_schedule(expression, zone)
    fires = schedule.fires(datetime.fromisoformat(start), datetime.fromisoformat(end), 100)
    return [(fire.isoformat(), schedule.dst_note(fire)) for fire in fires]


def test_a_fixed_time_fire_in_the_spring_forward_gap_is_noted_as_moved_to_its_end():
    assert notes("30 2 * * *", "Europe/Berlin", "2027-03-27T00:00Z", "2027-03-29T00:00Z") == [
        ("2027-03-27T02:30:00+01:00", None),
        (
            "2027-03-28T03:00:00+02:00",
            "clocks go forward on 2027-03-28 from 02:00 to 03:00: 02:30 does not exist and runs at 03:00",
        ),
    ]


def test_several_fixed_time_fires_in_the_gap_are_noted_as_merged_into_one_run():
    assert notes("0,20,40 2 * * *", "America/New_York", "2027-03-14T05:00Z", "2027-03-14T08:00Z") == [
        (
            "2027-03-14T03:00:00-04:00",
            "clocks go forward on 2027-03-14 from 02:00 to 03:00: the 3 fires from 02:00 to 02:40 run once, "
            "at 03:00",
        )
    ]


def test_a_fixed_time_fire_in_a_repeated_hour_is_noted_as_run_once():
    assert notes("30 2 * * *", "Europe/Berlin", "2027-10-31T00:00Z", "2027-10-31T02:00Z") == [
        (
            "2027-10-31T02:30:00+02:00",
            "clocks go back on 2027-10-31: 02:30 occurs twice and runs once, on its first pass",
        )
    ]


def test_a_wildcard_entry_runs_on_both_passes_of_a_repeated_hour_and_each_says_which():
    found = notes("30 * * * *", "Europe/Berlin", "2027-10-30T23:15Z", "2027-10-31T01:45Z")
    assert found == [
        ("2027-10-31T01:30:00+02:00", None),
        (
            "2027-10-31T02:30:00+02:00",
            "clocks go back on 2027-10-31: 02:30 occurs twice; this run is on its first pass",
        ),
        (
            "2027-10-31T02:30:00+01:00",
            "clocks go back on 2027-10-31: 02:30 occurs twice; this run is on its second pass",
        ),
    ]


def test_fires_daylight_saving_does_not_touch_have_no_note():
    assert notes("0 3 * * *", "Europe/Berlin", "2027-03-27T00:00Z", "2027-03-29T00:00Z") == [
        ("2027-03-27T03:00:00+01:00", None),
        ("2027-03-28T03:00:00+02:00", None),  # 03:00 is a real wall time that day: not moved
    ]
    rate = parse_schedule("rate(1 hour)", "Europe/Berlin", start_at=datetime(2027, 3, 28, tzinfo=UTC))
    assert [
        rate.dst_note(f)
        for f in rate.fires(datetime(2027, 3, 28, tzinfo=UTC), datetime(2027, 3, 28, 3, tzinfo=UTC), 5)
    ] == [None] * 3


# --- upcoming_fires ----------------------------------------------------------------------------


def test_fires_start_at_the_stored_next_run_and_follow_the_schedule_with_the_jitter_offset():
    job = state("*/10 * * * *", "2026-03-02T10:10:00+00:00", jitter_offset_ms=2_500)

    found = upcoming_fires(job, 3, now_ms=ms("2026-03-02T10:05:00+00:00"))

    assert [(f.scheduled_for, f.dispatch_at, f.note) for f in found.fires] == [
        (ms("2026-03-02T10:10:00+00:00"), ms("2026-03-02T10:10:02.500+00:00"), None),
        (ms("2026-03-02T10:20:00+00:00"), ms("2026-03-02T10:20:02.500+00:00"), None),
        (ms("2026-03-02T10:30:00+00:00"), ms("2026-03-02T10:30:02.500+00:00"), None),
    ]
    assert found.reason is None


def test_fires_are_the_scheduler_s_chain_not_a_recomputation_from_now():
    """A rate's fires step from the stored next_run_at (anchored at anchor_at), as the tick plans them."""
    job = state("rate(7 seconds)", "2026-03-02T10:00:03+00:00", anchor_at=ms("2026-03-02T09:59:56+00:00"))
    schedule = parse_schedule("rate(7 seconds)", "UTC", start_at=datetime(2026, 3, 2, 9, 59, 56, tzinfo=UTC))
    chain = [ms("2026-03-02T10:00:03+00:00")]
    while len(chain) < 5:
        following = next_fire_ms(schedule, chain[-1])
        assert following is not None
        chain.append(following)

    found = upcoming_fires(job, 5, now_ms=ms("2026-03-02T10:00:00+00:00"))

    assert [f.scheduled_for for f in found.fires] == chain


def test_an_overdue_first_fire_is_listed_with_a_note():
    job = state("0 2 * * *", "2026-03-02T02:00:00+00:00")

    found = upcoming_fires(job, 2, now_ms=ms("2026-03-02T10:00:00+00:00"))

    assert found.fires[0].note == "overdue: the scheduler runs or skips it by the job's missed policy"
    assert found.fires[1].note is None


def test_a_paused_job_has_no_fires_and_says_why():
    found = upcoming_fires(state("0 2 * * *", "2026-03-03T02:00:00+00:00", paused=True), 5, now_ms=0)
    assert (
        found.fires == ()
        and found.reason
        == "paused: no fire runs while the job is paused; a resume continues with the first fire after it"
    )


def test_an_ended_job_and_one_past_end_at_have_no_fires():
    assert (
        upcoming_fires(state("0 2 * * *", None), 5, now_ms=0).reason
        == "ended: the schedule has no further fire"
    )
    past_end = state("0 2 * * *", "2026-03-03T02:00:00+00:00", end_at=ms("2026-03-02T12:00:00+00:00"))
    assert upcoming_fires(past_end, 5, now_ms=0) == upcoming_fires(state("0 2 * * *", None), 5, now_ms=0)


def test_a_schedule_ending_before_count_fires_gives_the_fires_it_has_and_the_reason():
    job = state("0 2 * * *", "2026-03-03T02:00:00+00:00", end_at=ms("2026-03-04T12:00:00+00:00"))

    found = upcoming_fires(job, 10, now_ms=0)

    assert [f.scheduled_for for f in found.fires] == [
        ms("2026-03-03T02:00:00+00:00"),
        ms("2026-03-04T02:00:00+00:00"),
    ]
    assert found.reason == "ended: the schedule has no further fire"


def test_a_stored_schedule_that_no_longer_parses_is_a_reason_not_an_error():
    found = upcoming_fires(
        state("0 2 * * *", "2026-03-03T02:00:00+00:00", timezone="Mars/Olympus"), 3, now_ms=0
    )
    assert found.fires == () and found.reason is not None and "Mars/Olympus" in found.reason


@pytest.mark.parametrize("count", [0, MAX_FIRES + 1])
def test_count_out_of_range_is_refused(count):
    with pytest.raises(ValueError, match="count must be 1 to 100"):
        upcoming_fires(state("0 2 * * *", "2026-03-03T02:00:00+00:00"), count, now_ms=0)


def test_the_listing_gives_local_times_in_the_job_s_zone():
    job = state("30 2 * * *", "2027-03-28T01:00:00+00:00", timezone="Europe/Berlin")

    fires = listing(job, 2, now_ms=0).items

    assert [f.local_time for f in fires] == ["2027-03-28T03:00:00+02:00", "2027-03-29T02:30:00+02:00"]
    assert fires[0].note is not None and fires[0].note.endswith("02:30 does not exist and runs at 03:00")
    assert fires[0].dispatch_at == fires[0].scheduled_for
