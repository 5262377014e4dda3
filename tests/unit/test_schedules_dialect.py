"""The cron dialect as a table (tests/unit/data/schedule_dialect.json): wrap-around ranges, mixed day lists,
LW / L-n / L-nW, EventBridge cron(...), skipped local dates, the edges of the supported range, and the
forms jobsched refuses with a message saying what to write instead. Each case names its source."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jobsched.cli import app
from jobsched.schedule.engine import ScheduleError, get_zone, parse_instant, parse_schedule, validate_schedule

TABLE = json.loads((Path(__file__).parent / "data" / "schedule_dialect.json").read_text())
NOW = datetime(2026, 1, 1, tzinfo=UTC)
END = datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize("case", TABLE["fires"], ids=lambda case: case["name"])
def test_dialect_fires(case: dict[str, Any]) -> None:
    schedule = parse_schedule(case["schedule"], case["timezone"])
    after = parse_instant(case["after"], get_zone(case["timezone"]), field="after")
    wanted = len(case["expected"]) + (1 if case.get("complete") else 0)
    assert [fire.isoformat() for fire in schedule.fires(after, END, wanted)] == case["expected"]


@pytest.mark.parametrize("case", TABLE["rejected"], ids=lambda case: case["schedule"])
def test_dialect_rejections_say_what_to_write(case: dict[str, Any]) -> None:
    with pytest.raises(ScheduleError) as caught:
        validate_schedule(case["schedule"], "UTC", now=NOW)
    assert caught.value.field == case["field"]
    assert case["fragment"] in caught.value.message


@pytest.mark.parametrize("case", TABLE["cli"], ids=lambda case: " ".join(case["args"]))
def test_next_at_the_edges_of_time(case: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["next", *case["args"]])
    assert result.exit_code == case["exit"], result.output
    if case["exit"] == 0:
        assert result.stdout.splitlines() == case["out"]
        assert result.stderr == ""
    else:
        assert len(result.stderr.splitlines()) == 1
        assert case["err"] in result.stderr
        assert result.stdout == ""


def test_the_last_second_of_year_9999_follows_a_sub_millisecond_instant() -> None:
    schedule = parse_schedule("* * * * * *", "UTC")
    after = datetime(9999, 12, 31, 23, 59, 58, 999_999, tzinfo=UTC)
    assert schedule.fires(after, END, 5) == [datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)]
    assert schedule.count_fires(after, END, 5) == 1


def test_no_fire_left_names_start_at_when_it_is_given() -> None:
    with pytest.raises(ScheduleError) as caught:
        validate_schedule("0 0 29 2 *", "UTC", now=NOW, start_at=datetime(9996, 3, 1, tzinfo=UTC))
    assert caught.value.field == "start_at"
    assert "no fire after it before the end of the supported range" in caught.value.message


def test_end_at_is_blamed_only_when_a_fire_exists_after_it() -> None:
    with pytest.raises(ScheduleError) as caught:
        validate_schedule("0 0 1 1 *", "UTC", now=NOW + timedelta(days=1), end_at=NOW + timedelta(days=30))
    assert caught.value.field == "end_at"


@pytest.mark.parametrize(
    ("bound", "value"),
    [("start_at", datetime(9999, 12, 31, 23, 0)), ("end_at", datetime(1, 1, 1, 0, 0))],
)
def test_bounds_outside_the_supported_range_name_their_field(bound: str, value: datetime) -> None:
    # naive bounds are wall times in the zone: in Etc/GMT+12 the first is in year 10000 in UTC, and in
    # Asia/Tokyo the second is before year 1
    zone = "Etc/GMT+12" if bound == "start_at" else "Asia/Tokyo"
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 0 * * *", zone, **{bound: value})
    assert caught.value.field == bound
    assert "outside the supported range" in caught.value.message


def test_a_one_off_outside_the_supported_range_names_the_schedule() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("at 9999-12-31T23:00:00-12:00", "UTC")
    assert caught.value.field == "schedule"
    assert "outside the supported range" in caught.value.message
