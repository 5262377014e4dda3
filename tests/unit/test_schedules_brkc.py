"""Schedule semantics found broken by the BRK-C review (each test names the promise it checks)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.schedules import parse_schedule

END = datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize("dow", ["7/1", "7/3", "7/6"])
def test_a_step_from_day_of_week_7_is_sunday_only(dow: str) -> None:
    """``a/n`` runs from ``a`` to the field's maximum, and 7 is Sunday (the maximum day-of-week), so
    ``7/n`` is Sunday alone; it read 7 as a wrap-around start and fired on other days (``7/1`` daily)."""
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
