"""Schedule engine: the worked cases, each form and cron feature, DST conventions, validation errors."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobsched.schedule.engine import (
    MAX_RATE_INTERVAL_S,
    Schedule,
    ScheduleError,
    get_zone,
    jitter_offset_ms,
    localize,
    parse_instant,
    parse_schedule,
    validate_schedule,
)

CASES: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "schedule_cases.json").read_text())
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def bounds(case: dict[str, Any]) -> dict[str, datetime]:
    return {key: at(case[key]) for key in ("start_at", "end_at") if key in case}


def following(schedule: Schedule, after: datetime, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(count):
        fire = schedule.next_fire(after)
        assert fire is not None, f"schedule ended after {found}"
        found.append(fire.isoformat())
        after = fire
    return found


# --- worked cases (tests/unit/data/schedule_cases.json) -------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_worked_case(case: dict[str, Any]) -> None:
    schedule = parse_schedule(case["schedule"], case["timezone"], **bounds(case))
    assert following(schedule, at(case["after"]), len(case["expected"])) == case["expected"], case["rule"]
    if case.get("then_none"):
        assert schedule.next_fire(at(case["expected"][-1])) is None


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_worked_case_through_fires(case: dict[str, Any]) -> None:
    schedule = parse_schedule(case["schedule"], case["timezone"], **bounds(case))
    fires = schedule.fires(at(case["after"]), at(case["expected"][-1]), limit=100)
    assert [fire.isoformat() for fire in fires] == case["expected"]


def test_worked_cases_cover_the_shared_examples() -> None:
    names = {case["name"] for case in CASES}
    assert {"dst-spring-fixed", "dst-fall-fixed-once", "dst-fall-wildcard-twice", "dom-or-dow"} <= names
    assert len(CASES) >= 30


# --- forms ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "equivalent"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("daily 02:00", "0 2 * * *"),
        ("DAILY 7:05", "5 7 * * *"),
        ("daily 02:00:30", "30 0 2 * * *"),
        ("  0   2 * * *  ", "0 2 * * *"),
        ("0 2 * * *", "0 0 2 * * *"),
    ],
)
def test_equivalent_forms_fire_alike(expression: str, equivalent: str) -> None:
    start = at("2024-02-27T00:00:00+01:00")
    mine = parse_schedule(expression, "Europe/Berlin").fires(start, start + timedelta(days=800), 30)
    theirs = parse_schedule(equivalent, "Europe/Berlin").fires(start, start + timedelta(days=800), 30)
    assert mine == theirs
    assert len(mine) >= 2


@pytest.mark.parametrize(
    ("expression", "interval_s"),
    [
        ("rate(5 minutes)", 300),
        ("rate(1 minute)", 60),
        ("RATE( 2 Hours )", 7200),
        ("rate(1 day)", 86400),
        ("rate(45 seconds)", 45),
        ("every 5 minutes", 300),
        ("every 30 seconds", 30),
        ("every 1 second", 1),
        ("Every 3 days", 259200),
        ("every hour", 3600),
    ],
)
def test_rate_forms(expression: str, interval_s: int) -> None:
    anchor = at("2024-01-01T00:00:00+00:00")
    schedule = parse_schedule(expression, start_at=anchor)
    assert schedule.kind == "rate"
    assert schedule.min_interval_s == interval_s
    assert schedule.next_fire(anchor) == anchor + timedelta(seconds=interval_s)
    assert schedule.first_fire(anchor) == anchor


def test_rate_anchored_by_real_time_not_wall_clock() -> None:
    # Given an hourly rate anchored in New York before the fall-back transition
    anchor = at("2026-11-01T00:30:00-04:00")
    schedule = parse_schedule("rate(1 hour)", "America/New_York", start_at=anchor)
    # When the repeated hour passes, every fire is exactly 3600 s after the previous
    fires = schedule.fires(anchor, anchor + timedelta(hours=4), 10)
    assert [fire.isoformat() for fire in fires] == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T02:30:00-05:00",
        "2026-11-01T03:30:00-05:00",
    ]


def test_rate_next_fire_does_not_drift_from_anchor() -> None:
    anchor = at("2024-01-01T00:00:07+00:00")
    schedule = parse_schedule("every 10 seconds", start_at=anchor)
    assert schedule.next_fire(at("2024-01-01T05:00:00.5+00:00")) == at("2024-01-01T05:00:07+00:00")
    assert schedule.next_fire(at("2023-12-31T00:00:00+00:00")) == anchor


@pytest.mark.parametrize(
    ("expression", "zone", "expected"),
    [
        ("at 2026-12-04T18:00:00", "America/New_York", "2026-12-04T18:00:00-05:00"),
        ("at(2026-12-04T18:00:00)", "UTC", "2026-12-04T18:00:00+00:00"),
        ("AT ( 2026-12-04T18:00:00+09:00 )", "UTC", "2026-12-04T09:00:00+00:00"),
        ("at 2026-12-04T18:00:00Z", "Asia/Kolkata", "2026-12-04T23:30:00+05:30"),
        ("at 2026-03-08T02:30:00", "America/New_York", "2026-03-08T03:00:00-04:00"),
        ("at 2026-11-01T01:30:00", "America/New_York", "2026-11-01T01:30:00-04:00"),
    ],
)
def test_one_off(expression: str, zone: str, expected: str) -> None:
    schedule = parse_schedule(expression, zone)
    assert schedule.kind == "once"
    fire = schedule.next_fire(at("2026-01-01T00:00:00+00:00"))
    assert fire is not None and fire.isoformat() == expected
    assert schedule.next_fire(fire) is None
    assert schedule.min_interval_s is None


def test_expression_kept_exactly_as_written() -> None:
    schedule = parse_schedule("  Rate(5 Minutes) ", " UTC", start_at=NOW)
    assert schedule.expression == "  Rate(5 Minutes) "
    assert schedule.timezone == "UTC"


def test_parse_is_cached() -> None:
    assert parse_schedule("*/5 * * * *", "Europe/Paris") is parse_schedule("*/5 * * * *", "Europe/Paris")


# --- cron features --------------------------------------------------------------------------------


def test_vixie_day_rule_union_when_both_restricted() -> None:
    schedule = parse_schedule("0 0 13 * 5")  # the 13th, or any Friday
    days = [
        fire.day
        for fire in schedule.fires(at("2024-09-01T00:00:00+00:00"), at("2024-09-30T00:00:00+00:00"), 50)
    ]
    assert days == [6, 13, 20, 27]  # Fridays 6, 13, 20, 27 (13 is both)


def test_vixie_day_rule_intersection_with_star_prefixed_dow() -> None:
    schedule = parse_schedule("0 0 13 * */1")  # dow starts with *: the 13th AND any weekday = the 13th
    fires = schedule.fires(at("2024-09-01T00:00:00+00:00"), at("2024-12-31T00:00:00+00:00"), 50)
    assert [fire.day for fire in fires] == [13, 13, 13, 13]


def test_step_restarts_each_day() -> None:
    schedule = parse_schedule("0 */5 * * *")
    fires = schedule.fires(at("2024-01-01T19:00:00+00:00"), at("2024-01-02T06:00:00+00:00"), 50)
    assert [fire.hour for fire in fires] == [20, 0, 5]


def test_range_with_step_and_sunday_zero() -> None:
    schedule = parse_schedule("0 0 * * 0")
    sunday = schedule.next_fire(at("2024-01-01T00:00:00+00:00"))
    assert sunday is not None and sunday.isoformat() == "2024-01-07T00:00:00+00:00"
    odd_days = parse_schedule("0 0 1-7/3 * *").fires(
        at("2024-01-01T00:00:00+00:00"), at("2024-01-31T00:00:00+00:00"), 9
    )
    assert [fire.day for fire in odd_days] == [4, 7]


def test_min_interval_of_cron_samples() -> None:
    assert parse_schedule("*/15 * * * * *").min_interval_s == 15
    assert parse_schedule("0,10 * * * *").min_interval_s == 600
    assert parse_schedule("0 0 * * *").min_interval_s == 86400


# --- daylight saving ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        ("America/New_York", "2024-03-10"),
        ("America/New_York", "2024-11-03"),
        ("Europe/London", "2024-03-31"),
        ("Europe/London", "2024-10-27"),
        ("Australia/Lord_Howe", "2024-10-06"),
        ("Australia/Lord_Howe", "2024-04-07"),
        ("America/Santiago", "2024-09-08"),
        ("America/Santiago", "2024-04-07"),
    ],
)
@pytest.mark.parametrize("hour", [0, 1, 2, 3])
def test_fixed_time_fires_once_on_transition_days(zone: str, day: str, hour: int) -> None:
    schedule = parse_schedule(f"30 {hour} * * *", zone)
    midnight = localize(datetime.fromisoformat(f"{day}T00:00:00"), get_zone(zone))
    fires = schedule.fires(midnight - timedelta(days=1), midnight + timedelta(days=2), 10)
    local_days = [fire.date().isoformat() for fire in fires]
    assert len(local_days) == len(set(local_days)) == 3


def test_wildcard_hour_skips_gap_in_half_hour_zone() -> None:
    # Lord Howe springs from 02:00 to 02:30: the 02:00 and 02:15 wall times never happen
    schedule = parse_schedule("*/15 * * * *", "Australia/Lord_Howe")
    fires = schedule.fires(at("2024-10-06T01:40:00+10:30"), at("2024-10-06T02:50:00+11:00"), 10)
    assert [fire.isoformat() for fire in fires] == [
        "2024-10-06T01:45:00+10:30",
        "2024-10-06T02:30:00+11:00",
        "2024-10-06T02:45:00+11:00",
    ]


def test_next_fire_from_first_pass_finds_second_pass_of_earlier_wall_time() -> None:
    # after 01:50 on the first pass, an hourly :10 job next fires at 01:10 on the second pass
    schedule = parse_schedule("10 * * * *", "America/Los_Angeles")
    fire = schedule.next_fire(at("2026-11-01T01:50:00-07:00"))
    assert fire is not None and fire.isoformat() == "2026-11-01T01:10:00-08:00"


def test_fixed_time_never_fires_on_second_pass_even_from_inside_it() -> None:
    schedule = parse_schedule("10,40 1 * * *", "America/Los_Angeles")
    fire = schedule.next_fire(at("2026-11-01T01:20:00-08:00"))
    assert fire is not None and fire.isoformat() == "2026-11-02T01:10:00-08:00"


def test_fires_returned_in_schedule_zone_from_any_zone_input() -> None:
    schedule = parse_schedule("0 9 * * *", "Asia/Tokyo")
    fire = schedule.next_fire(at("2024-01-01T00:00:00-08:00"))
    assert fire is not None and fire.isoformat() == "2024-01-02T09:00:00+09:00"


# --- first_fire, bounds, enumeration --------------------------------------------------------------


def test_first_fire_of_recent_one_off_is_its_time() -> None:
    schedule = parse_schedule("at 2026-06-01T11:59:30Z")
    assert schedule.first_fire(NOW) == at("2026-06-01T11:59:30+00:00")
    assert schedule.first_fire(NOW + timedelta(minutes=5)) is None


def test_first_fire_of_cron_includes_now() -> None:
    assert parse_schedule("0 12 * * *").first_fire(NOW) == NOW
    assert parse_schedule("0 12 * * *").first_fire(NOW + timedelta(seconds=1)) == NOW + timedelta(days=1)


def test_first_fire_of_rate_is_anchor_or_next_step() -> None:
    schedule = parse_schedule("rate(10 minutes)", start_at=NOW)
    assert schedule.first_fire(NOW - timedelta(hours=1)) == NOW
    assert schedule.first_fire(NOW + timedelta(minutes=25)) == NOW + timedelta(minutes=30)


def test_end_at_stops_rate() -> None:
    schedule = parse_schedule("rate(1 hour)", start_at=NOW, end_at=NOW + timedelta(hours=2))
    assert schedule.fires(NOW - timedelta(seconds=1), NOW + timedelta(days=1), 10) == [
        NOW,
        NOW + timedelta(hours=1),
        NOW + timedelta(hours=2),
    ]
    assert schedule.count_fires(NOW - timedelta(seconds=1), NOW + timedelta(days=1), 100) == 3


def test_naive_bounds_are_wall_times_in_job_zone() -> None:
    schedule = parse_schedule("0 * * * *", "Europe/Berlin", end_at=datetime(2024, 1, 1, 3, 0))
    assert schedule.end_at == at("2024-01-01T02:00:00+00:00")


def test_fires_is_bounded_and_fast_for_every_second_job() -> None:
    schedule = parse_schedule("* * * * * *")
    start = time.perf_counter()
    fires = schedule.fires(NOW, NOW + timedelta(days=1), 100)
    assert time.perf_counter() - start < 1.0
    assert len(fires) == 100
    assert fires[-1] == NOW + timedelta(seconds=100)


def test_count_fires_caps_and_counts() -> None:
    cron = parse_schedule("*/10 * * * * *")
    assert cron.count_fires(NOW, NOW + timedelta(minutes=1), 1000) == 6
    assert cron.count_fires(NOW, NOW + timedelta(days=1), 50) == 50
    rate = parse_schedule("every 1 second", start_at=NOW)
    assert rate.count_fires(NOW, NOW + timedelta(days=365), 10**9) == 365 * 86400
    assert rate.count_fires(NOW, NOW + timedelta(days=1), 7) == 7
    assert rate.count_fires(NOW + timedelta(days=1), NOW, 7) == 0


def test_naive_after_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_schedule("0 0 * * *").next_fire(datetime(2024, 1, 1))


# --- zones ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "UTC",
        "GMT",  # an IANA link to Etc/GMT, as UTC is to Etc/UTC: how people name the zone, not an abbreviation
        "Etc/UTC",
        "Etc/GMT",
        "Etc/GMT+5",  # POSIX sign: five hours WEST of Greenwich
        "Etc/GMT-14",
        "Europe/Berlin",
        "US/Pacific",
        "America/Argentina/Buenos_Aires",
    ],
)
def test_iana_zones_accepted(name: str) -> None:
    assert get_zone(name).key == name


def test_gmt_and_etc_zones_fire_at_their_offsets() -> None:
    # Given a daily 02:00 job in GMT and one in Etc/GMT+5 (UTC-5)
    after = datetime(2024, 7, 1, tzinfo=UTC)

    # Then GMT is UTC all year (no British summer time) and Etc/GMT+5 is five hours behind it
    assert parse_schedule("0 2 * * *", "GMT").next_fire(after) == datetime(2024, 7, 1, 2, tzinfo=UTC)
    assert parse_schedule("0 2 * * *", "Etc/GMT+5").next_fire(after) == datetime(2024, 7, 1, 7, tzinfo=UTC)
    assert validate_schedule("0 2 * * *", "GMT", now=NOW).timezone == "GMT"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("PST", "abbreviation"),
        ("IST", "abbreviation"),
        ("EST", "abbreviation"),
        ("MST", "abbreviation"),
        ("HST", "abbreviation"),
        ("CET", "abbreviation"),
        ("BST", "abbreviation"),
        ("EST5EDT", "Area/Location"),
        ("gmt", "did you mean GMT"),
        ("GMT0", "Area/Location"),
        ("Pacific Standard Time", "Windows time zone name"),
        ("Mars/Olympus_Mons", "unknown timezone"),
        ("europe/berlin", "did you mean Europe/Berlin"),
    ],
)
def test_bad_zones_rejected(name: str, fragment: str) -> None:
    with pytest.raises(ScheduleError, match=fragment) as caught:
        get_zone(name)
    assert caught.value.field == "timezone"


def test_unknown_zone_rejected_by_parse() -> None:
    with pytest.raises(ScheduleError, match="unknown timezone") as caught:
        parse_schedule("0 0 * * *", "Nowhere/Special")
    assert caught.value.field == "timezone"


# --- rejected input, one test per kind ------------------------------------------------------------


def rejected(expression: str, timezone: str = "UTC", **kwargs: Any) -> ScheduleError:
    with pytest.raises(ScheduleError) as caught:
        validate_schedule(expression, timezone, now=NOW, **kwargs)
    return caught.value


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        # too few or too many fields
        ("0 2 * *", "has 4 fields"),
        ("0 0 2 * * * 2026", "has 7 fields"),
        # macros and extensions cron does not have
        ("@reboot", "@reboot is not supported"),
        ("@often", "unknown macro"),
        ("H 0 * * *", "H or R"),
        # a field's value out of its range
        ("61 * * * *", "the minute field '61'"),
        ("0 24 * * *", "the hour field '24'"),
        ("0 0 32 * *", "the day-of-month field '32'"),
        ("0 0 * 13 *", "the month field '13'"),
        ("0 0 * * 8", "the day-of-week field '8'"),
        ("0 0 * * 1#6", "the day-of-week field '1#6'"),
        ("75 0 0 * * *", "the second field '75'"),
        ("0 0 * foo *", "the month field 'foo'"),
        # a step above the field's maximum would match only the range's first value; cronie refuses it
        ("*/99999999999 * * * *", "the minute step must be between 1 and 59"),
        ("*/60 * * * *", "the minute field '*/60' has a step of 60"),
        ("5/100 * * * *", "the minute step must be between 1 and 59"),
        ("0 1-5/24 * * *", "the hour field '1-5/24' has a step of 24"),
        ("0 0 */32 * *", "the day-of-month step must be between 1 and 31"),
        ("0 0 1 */13 *", "the month step must be between 1 and 12"),
        ("0 0 * * 1,*/8", "the day-of-week step must be between 1 and 7"),
        ("*/75 * * * * *", "the second step must be between 1 and 59"),
        # not a schedule at all
        ("", "empty"),
        ("   ", "empty"),
        ("hello", "is not a schedule"),
        ("rate(0 minutes)", "positive"),
        ("rate(5 fortnights)", "not a valid rate"),
        ("every -5 minutes", "not a valid rate"),
        ("daily 25:00", "not a time of day"),
        ("daily noon", "daily HH:MM"),
        ("at tomorrow", "not an ISO 8601 date-time"),
        ("at()", "not an ISO 8601 date-time"),
    ],
)
def test_rejects_a_bad_expression_naming_what_is_wrong(expression: str, fragment: str) -> None:
    error = rejected(expression)
    assert error.field == "schedule" and fragment in error.message


@pytest.mark.parametrize("expression", ["*/59 * * * *", "0 */23 * * *", "0 0 */31 * *", "0 0 1 */12 *"])
def test_accepts_a_step_up_to_its_fields_maximum(expression: str) -> None:
    assert validate_schedule(expression, "UTC", now=NOW).kind == "cron"


@pytest.mark.parametrize(
    "expression",
    [
        "rate(99999999999999999999 minutes)",
        "every 9999999999999 seconds",
        "every 99999999999 minutes",
        "rate(3651 days)",
        "rate(" + "9" * 5000 + " minutes)",
    ],
)
def test_rejects_a_rate_longer_than_ten_years(expression: str) -> None:
    for check in (
        lambda: validate_schedule(expression, "UTC", now=NOW),
        lambda: parse_schedule(expression, start_at=NOW),
    ):
        with pytest.raises(ScheduleError) as caught:
            check()
        assert caught.value.field == "schedule"
        assert "at most 3650 days" in caught.value.message


def test_accepts_a_rate_of_exactly_the_longest_interval() -> None:
    schedule = validate_schedule("rate(3650 days)", "UTC", now=NOW)
    assert schedule.min_interval_s == MAX_RATE_INTERVAL_S
    assert schedule.next_fire(NOW) == NOW + timedelta(days=3650)


def test_rejects_unknown_zone() -> None:
    assert rejected("0 0 * * *", "Atlantis/Capital").field == "timezone"


@pytest.mark.parametrize(
    ("zone", "fragment"),
    [
        ("PST", "America/Los_Angeles"),
        ("Pacific Standard Time", "Windows"),
        ("", "empty"),
    ],
)
def test_rejects_a_zone_that_is_not_an_iana_name_saying_why(zone: str, fragment: str) -> None:
    error = rejected("0 0 * * *", zone)
    assert error.field == "timezone" and fragment in error.message


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *"])
def test_rejects_never_firing(expression: str) -> None:
    error = rejected(expression)
    assert error.field == "schedule" and "never fires" in error.message


def test_accepts_rare_but_real_schedules() -> None:
    assert validate_schedule("0 9 29 2 *", "UTC", now=NOW).kind == "cron"
    assert validate_schedule("0 9 29 2 1", "UTC", now=NOW).kind == "cron"  # Feb 29 or any Monday


def test_rejects_one_off_too_old() -> None:
    error = rejected("at 2026-06-01T11:55:00Z")
    assert error.field == "schedule"
    assert "5 minutes in the past" in error.message and "runs once, now" in error.message


def test_accepts_one_off_within_grace() -> None:
    schedule = validate_schedule("at 2026-06-01T11:59:10Z", "UTC", now=NOW)
    assert schedule.first_fire(NOW) == at("2026-06-01T11:59:10+00:00")


def test_rejects_interval_below_minimum() -> None:
    error = rejected("every 30 seconds", min_interval_s=60)
    assert error.field == "schedule" and "more often than this deployment allows" in error.message
    error = rejected("*/10 * * * * *", min_interval_s=60)
    assert error.field == "schedule" and "10 s" in error.message


def test_rejects_end_at_before_start_at() -> None:
    error = rejected("0 0 * * *", start_at=NOW + timedelta(days=2), end_at=NOW + timedelta(days=1))
    assert error.field == "end_at" and "after start_at" in error.message


def test_rejects_end_at_before_first_fire() -> None:
    error = rejected("0 0 1 1 *", end_at=NOW + timedelta(days=1))
    assert error.field == "end_at" and "never run" in error.message


def test_rejects_one_off_before_start_at() -> None:
    error = rejected("at 2026-07-01T00:00:00Z", start_at=at("2026-08-01T00:00:00+00:00"))
    assert error.field == "start_at"


def test_rejects_rate_without_anchor() -> None:
    with pytest.raises(ScheduleError, match="needs an anchor") as caught:
        parse_schedule("rate(5 minutes)")
    assert caught.value.field == "start_at"


def test_validate_anchors_rate_at_now_by_default() -> None:
    schedule = validate_schedule("rate(5 minutes)", "UTC", now=NOW)
    assert schedule.start_at == NOW and schedule.first_fire(NOW) == NOW


# --- helpers --------------------------------------------------------------------------------------


def test_parse_instant_naive_is_in_zone_and_offset_is_honoured() -> None:
    berlin = get_zone("Europe/Berlin")
    assert (
        parse_instant("2024-07-01T12:00:00", berlin, field="after").isoformat() == "2024-07-01T12:00:00+02:00"
    )
    assert (
        parse_instant("2024-07-01T12:00:00Z", berlin, field="after").isoformat()
        == "2024-07-01T14:00:00+02:00"
    )
    with pytest.raises(ScheduleError) as caught:
        parse_instant("noon", berlin, field="after")
    assert caught.value.field == "after"


def test_jitter_offset_is_stable_and_in_range() -> None:
    offsets = [jitter_offset_ms(f"job-{index}", 30) for index in range(500)]
    assert all(0 <= offset < 30_000 for offset in offsets)
    assert len(set(offsets)) > 450
    assert jitter_offset_ms("job-7", 30) == jitter_offset_ms("job-7", 30)
    assert jitter_offset_ms("job-7", 0) == 0
    with pytest.raises(ValueError, match=">= 0"):
        jitter_offset_ms("job-7", -1)
