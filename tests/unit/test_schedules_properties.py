"""Property tests of the schedule engine across IANA zones, concentrated around DST transitions."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from functools import cache
from zoneinfo import available_timezones

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.schedule.engine import Schedule, ScheduleError, get_zone, parse_schedule


def _accepted(name: str) -> bool:
    try:
        get_zone(name)
    except ScheduleError:
        return False
    return True


ZONES = sorted(name for name in available_timezones() if _accepted(name))
YEARS = st.integers(min_value=1995, max_value=2037)
QUICK = settings(max_examples=60, deadline=None)


@cache
def transitions(zone_name: str, year: int) -> tuple[datetime, ...]:
    """UTC instants (to the hour) just after which the zone's offset changed during ``year``."""
    zone = get_zone(zone_name)

    def offset(instant: datetime) -> timedelta | None:
        return instant.astimezone(zone).utcoffset()

    start = datetime(year, 1, 1, tzinfo=UTC)
    found = []
    for day in range(366):
        morning = start + timedelta(days=day)
        if offset(morning) != offset(morning + timedelta(days=1)):
            hours = (morning + timedelta(hours=hour) for hour in range(1, 25))
            found.append(next(instant for instant in hours if offset(instant) != offset(morning)))
    return tuple(found)


@st.composite
def near_transition(draw: st.DrawFn, zones: list[str] = ZONES) -> tuple[str, datetime]:
    """A zone and an instant up to two days before one of its offset changes (or any instant)."""
    zone = draw(st.sampled_from(zones))
    year = draw(YEARS)
    changes = transitions(zone, year)
    base = draw(st.sampled_from(changes)) if changes else datetime(year, 6, 1, tzinfo=UTC)
    lead = draw(st.integers(min_value=0, max_value=48 * 3600))
    return zone, base - timedelta(seconds=lead)


MINUTES = st.sampled_from(["0", "30", "45", "*", "*/15", "5,35", "10-20/5"])
HOURS = st.sampled_from(["*", "0", "1", "2", "3", "23", "*/6", "1-3"])
DAYS_OF_MONTH = st.sampled_from(["*", "*", "*/10", "1", "15", "L"])
DAYS_OF_WEEK = st.sampled_from(["*", "*", "1-5", "0", "5"])
CRON = st.builds(lambda m, h, dom, dow: f"{m} {h} {dom} * {dow}", MINUTES, HOURS, DAYS_OF_MONTH, DAYS_OF_WEEK)
SECONDS_CRON = st.builds(lambda s, m: f"{s} {m} * * * *", st.sampled_from(["0", "*/20", "15,45"]), MINUTES)
RATES = st.sampled_from(["rate(1 hour)", "every 30 minutes", "rate(1 day)", "every 45 seconds"])


def build(expression: str, zone: str, anchor: datetime) -> Schedule:
    start_at = anchor if expression.startswith(("rate", "every")) else None
    return parse_schedule(expression, zone, start_at=start_at)


def wall_time_exists(fire: datetime) -> bool:
    """The fire's local wall time maps back to the same instant (so it is a real local time)."""
    zone = fire.tzinfo
    rebuilt = fire.replace(tzinfo=None).replace(tzinfo=zone, fold=fire.fold)
    return rebuilt.astimezone(UTC) == fire.astimezone(UTC)


@QUICK
@given(near_transition(), st.one_of(CRON, SECONDS_CRON, RATES))
def test_fires_strictly_increase_and_exist(zone_and_start: tuple[str, datetime], expression: str) -> None:
    zone, start = zone_and_start
    schedule = build(expression, zone, start)
    fires = schedule.fires(start, start + timedelta(days=31), 40)
    previous = start
    for fire in fires:
        assert fire.astimezone(UTC) > previous.astimezone(UTC)  # UTC: same-zone comparison ignores fold
        assert fire.tzinfo is get_zone(zone)
        assert wall_time_exists(fire)
        previous = fire


@QUICK
@given(near_transition(), st.integers(0, 23), st.sampled_from([0, 1, 15, 30, 59]))
def test_fixed_time_daily_fires_once_per_local_day(
    zone_and_start: tuple[str, datetime], hour: int, minute: int
) -> None:
    zone_name, start = zone_and_start
    zone = get_zone(zone_name)
    schedule = parse_schedule(f"{minute} {hour} * * *", zone_name)
    # Whole local days from the day after `start` for three days
    first_day = start.astimezone(zone).date() + timedelta(days=1)
    days = [first_day + timedelta(days=offset) for offset in range(3)]
    window_start = datetime.combine(days[0], datetime.min.time(), zone)
    window_end = datetime.combine(days[-1] + timedelta(days=1), datetime.min.time(), zone)
    fires = schedule.fires(window_start - timedelta(seconds=1), window_end - timedelta(seconds=1), 10)
    local_dates = [fire.astimezone(zone).date() for fire in fires]
    assert sorted(local_dates) == [day for day in days if _day_exists(day, zone_name)]


def _day_exists(day: date, zone_name: str) -> bool:
    """False only for a calendar day a zone skipped entirely (Pacific/Apia, 2011-12-30)."""
    zone = get_zone(zone_name)
    noon = datetime.combine(day, datetime.min.time()).replace(hour=12, tzinfo=zone)
    return noon.astimezone(UTC).astimezone(zone).date() == day


@QUICK
@given(near_transition(), st.one_of(CRON, SECONDS_CRON, RATES), st.integers(1, 30))
def test_fires_agrees_with_repeated_next_fire(
    zone_and_start: tuple[str, datetime], expression: str, limit: int
) -> None:
    zone, start = zone_and_start
    schedule = build(expression, zone, start)
    until = start + timedelta(days=3)
    stepped: list[datetime] = []
    cursor = start
    while len(stepped) < limit and (fire := schedule.next_fire(cursor)) is not None and fire <= until:
        stepped.append(fire)
        cursor = fire
    assert schedule.fires(start, until, limit) == stepped
    assert schedule.count_fires(start, until, limit) == len(stepped)


@QUICK
@given(near_transition(), st.one_of(CRON, RATES))
def test_next_fire_is_strictly_after_any_instant(
    zone_and_start: tuple[str, datetime], expression: str
) -> None:
    zone, start = zone_and_start
    schedule = build(expression, zone, start - timedelta(days=1))
    fire = schedule.next_fire(start)
    assert fire is not None and fire > start
    # nothing fires between `start` and that fire: stepping back from just before it lands on it again
    assert schedule.next_fire(fire.astimezone(UTC) - timedelta(microseconds=1)) == fire


# --- count_fires is exact: per-day arithmetic against plain enumeration --------------------------

COUNT_SECONDS = st.sampled_from(["0", "0", "*/20", "15,45", "10-50/20"])
COUNT_MINUTES = st.sampled_from(["0", "30", "*/15", "5,35", "10-20/5", "50-10/10", "*", "*/7"])
COUNT_HOURS = st.sampled_from(["*", "0", "1", "2", "3", "23", "*/6", "1-3", "2,3", "22-2", "0,12"])
# zones with daylight saving, half-hour shifts (Lord Howe), midnight changes (Havana, Santiago), a
# skipped date (Apia) and 2:00/2:30/3:00 changes; every second draw is one of them
DST_ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Santiago",
    "America/Havana",
    "Asia/Tehran",
    "America/St_Johns",
    "Pacific/Chatham",
    "Europe/London",
]
COUNT_DAYS_OF_MONTH = st.sampled_from(["*", "*", "L", "LW", "L-2", "15W", "1,15", "*/10", "28-3", "L-1W,1"])
COUNT_DAYS_OF_WEEK = st.sampled_from(["*", "*", "1-5", "0", "5L", "0#2", "1,5L", "sat-mon", "2#1,4"])
COUNT_CRON = st.builds(
    lambda s, m, h, dom, dow, seconds: (f"{s} " if seconds else "") + f"{m} {h} {dom} * {dow}",
    COUNT_SECONDS,
    COUNT_MINUTES,
    COUNT_HOURS,
    COUNT_DAYS_OF_MONTH,
    COUNT_DAYS_OF_WEEK,
    st.booleans(),
)
ENUMERATION_LIMIT = 3000


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(near_transition(DST_ZONES), near_transition()),
    COUNT_CRON,
    st.integers(0, 4 * 86400 * 1000),
    st.integers(0, 86400 * 1000),
    st.one_of(st.none(), st.integers(0, 3 * 86400)),
    st.one_of(st.none(), st.integers(0, 3 * 86400)),
    st.integers(1, 5000),
)
def test_count_fires_equals_enumeration(
    zone_and_start: tuple[str, datetime],
    expression: str,
    length_ms: int,
    offset_ms: int,
    start_after_s: int | None,
    end_after_s: int | None,
    cap: int,
) -> None:
    # Given a cron schedule (L, W, #, wrap-around ranges) in a zone, and a range of up to 4 days that
    # starts up to 2 days before an offset change, at any millisecond; start_at/end_at inside or absent
    zone, base = zone_and_start
    after = base + timedelta(milliseconds=offset_ms)
    until = after + timedelta(milliseconds=length_ms)
    start_at = None if start_after_s is None else base + timedelta(seconds=start_after_s)
    end_at = None if end_after_s is None else base + timedelta(seconds=end_after_s + 86400)
    schedule = parse_schedule(expression, zone, start_at=start_at, end_at=end_at)

    # When the fires are counted by arithmetic and enumerated one by one
    counted = schedule.count_fires(after, until, 2**62)
    listed = schedule.fires(after, until, ENUMERATION_LIMIT)

    # Then both agree (past the enumeration limit: the count is at least that), and the cap caps
    if len(listed) < ENUMERATION_LIMIT:
        assert counted == len(listed), (expression, zone, after, until)
    else:
        assert counted >= ENUMERATION_LIMIT
    assert schedule.count_fires(after, until, cap) == min(cap, counted)


def test_count_fires_of_every_second_over_two_days_is_exact_across_a_transition() -> None:
    # Given a one-second cron in Berlin over the 49-hour local span of the fall-back weekend
    schedule = parse_schedule("* * * * * *", "Europe/Berlin")
    after = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)  # local midnight 2026-10-25, a 25-hour day
    until = after + timedelta(days=2)
    # Then each second of the two days (172,800 instants) is one fire: the wildcard entry also fires on
    # the second pass of the repeated hour, so counting by instants is exact
    assert schedule.count_fires(after, until, 2**62) == 172_800
    assert schedule.count_fires(after, until, 1000) == 1000
    # and a fixed-time entry fires once in the repeated hour: 02:30 on 25 and 26 October
    fixed = parse_schedule("0 30 2 * * *", "Europe/Berlin")
    assert [f.isoformat() for f in fixed.fires(after, until, 5)] == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]
    assert fixed.count_fires(after, until, 2**62) == 2


@pytest.mark.parametrize("zone", DST_ZONES)
@pytest.mark.parametrize(
    "expression",
    ["0 2,3 * * *", "30 2 * * *", "0,30 1-3 * * *", "0 0 * * *", "0 12 * * *", "30 23 * * *", "*/30 * * * *"],
)
def test_count_fires_equals_enumeration_over_each_transition_of_a_year(zone: str, expression: str) -> None:
    # Given fixed-time entries whose matches fall in gaps (some also matching the gap's end, one instant)
    # and in repeated ranges, and a wildcard entry, over every offset change of a year in the zone
    schedule = parse_schedule(expression, zone)
    for year in (2011, 2026):
        for change in transitions(zone, year):
            after, until = change - timedelta(days=1, seconds=1), change + timedelta(days=1)
            # Then the arithmetic count is the enumerated count
            assert schedule.count_fires(after, until, 2**62) == len(schedule.fires(after, until, 500)), change
