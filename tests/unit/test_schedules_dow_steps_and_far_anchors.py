"""A step from day-of-week 7, and a rate anchored off the whole second centuries ahead (each test names the promise
it checks)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.clock import from_ms, to_ms
from jobsched.domain.planning import next_fire_ms
from jobsched.schedule.engine import parse_schedule

END = datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize("dow", ["7/1", "7/3", "7/6"])
def test_a_step_from_day_of_week_7_is_sunday_only(dow: str) -> None:
    """``a/n`` runs from ``a`` to the field's maximum, and 7 is Sunday (the maximum day-of-week), so
    ``7/n`` is Sunday alone, not a wrap-around start that fires on other days (``7/1`` is not daily)."""
    schedule = parse_schedule(f"0 9 * * {dow}", "UTC")
    fires = schedule.fires(datetime(2026, 3, 1, tzinfo=UTC), END, 6)  # 2026-03-01 is a Sunday
    assert [fire.strftime("%a %d") for fire in fires] == [
        "Sun 01",
        "Sun 08",
        "Sun 15",
        "Sun 22",
        "Sun 29",
        "Sun 05",
    ]


def test_a_rate_anchored_off_the_whole_second_after_2242_keeps_firing() -> None:
    """start_at may be any instant up to year 8999. Past 2^33 s (year 2242) a float of epoch seconds has
    coarser steps than a microsecond, so a ``from_ms`` through floats lands up to a few microseconds before the
    instant it is given; the scheduler would then find the fire it has just run as the "next" one and drop the
    job from the due index (``next_fire_ms`` None after the first run)."""
    anchor = datetime(2300, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)  # 2300-01-01T00:00:00.001Z
    schedule = parse_schedule("rate(1 minute)", "UTC", start_at=anchor)
    first = to_ms(anchor)

    assert from_ms(first) == anchor
    assert next_fire_ms(schedule, first) == first + 60_000
