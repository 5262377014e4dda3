"""croniter (kiorky/croniter, pinned in the dev dependencies) as a differential oracle for jobsched's own cron
arithmetic (``jobsched.schedule``).

A property compares the next fires of random expressions from the dialect both read (5 fields, or 6 with
seconds first: numbers, names, ranges, wrap-around ranges, steps, lists, ``?``, ``L``, ``n-L``, ``n-L/s``,
``nW``, ``d#n``, ``Ld``) in UTC and in zones away from daylight-saving transitions. Every difference is one
of ``CONVENTIONS``: the listed, documented places where jobsched reads an expression otherwise (the README's
"Differences from croniter" shows the same list); anything else fails the test as a bug of ours.

``JOBSCHED_FUZZ_EXAMPLES`` raises the number of examples (``make test`` runs a few seconds' worth).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterBadCronError, CroniterBadDateError, croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobsched.schedule.cron_fields import FIELD_MAX, FIELD_MIN
from jobsched.schedule.engine import ScheduleError, get_zone, parse_instant, parse_schedule

EXAMPLES = int(os.environ.get("JOBSCHED_FUZZ_EXAMPLES", "60"))
FIRES = 5
END = datetime.max.replace(tzinfo=UTC)
README = Path(__file__).parents[2] / "README.md"
PEER = json.loads((Path(__file__).parent / "data" / "peers" / "croniter.json").read_text())
FIELDS = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_RANGE = re.compile(r"^(?P<low>[a-z0-9]+)-(?P<high>[a-z0-9]+)(?:/(?P<step>[0-9]+))?$")


# --- both libraries, one call each ------------------------------------------------------------------------


def croniter_fires(expression: str, zone: ZoneInfo, after: datetime, count: int) -> list[datetime] | None:
    """croniter's first ``count`` fires after ``after`` in ``zone`` (UTC instants), reading a sixth field as
    seconds FIRST as jobsched does; None when croniter refuses the expression. A schedule croniter finds no
    fire of within 400 years (the Gregorian cycle, jobsched's horizon) has no fires."""
    try:
        found = croniter(
            expression, after.astimezone(zone), second_at_beginning=True, max_years_between_matches=400
        )
    except CroniterBadCronError:
        return None
    fires: list[datetime] = []
    for _ in range(count):
        try:
            fires.append(found.get_next(datetime).astimezone(UTC))
        except CroniterBadDateError:
            break
    return fires


def jobsched_fires(expression: str, zone: ZoneInfo, after: datetime, count: int) -> list[datetime] | None:
    """jobsched's first ``count`` fires after ``after`` (UTC instants); None when it refuses the expression."""
    try:
        schedule = parse_schedule(expression, zone.key)
    except ScheduleError:
        return None
    return [fire.astimezone(UTC) for fire in schedule.fires(after, END, count)]


# --- the conventions ----------------------------------------------------------------------------------------


def _value(field: str, text: str) -> int | None:
    """A range end's value (names, and day-of-week 7 as Sunday), or None when it is not one."""
    names = _MONTHS if field == "month" else _WEEKDAYS if field == "day-of-week" else ()
    if text in names:
        return names.index(text) + (1 if field == "month" else 0)
    if not text.isdigit():
        return None
    return int(text) % 7 if field == "day-of-week" else int(text)


def _ranges(fields: dict[str, str]) -> list[tuple[str, int, int, int]]:
    """Every ``a-b`` or ``a-b/s`` item of the fields as (field, a, b, step); ``n-L`` reads as ``n-31``."""
    found = []
    for field, text in fields.items():
        for item in text.split(","):
            match = _RANGE.match(item.replace("-l", "-31") if field == "day-of-month" else item)
            if match is None:
                continue
            low, high = _value(field, match["low"]), _value(field, match["high"])
            if low is not None and high is not None:
                found.append((field, low, high, int(match["step"] or 1)))
    return found


def _equal_range(fields: dict[str, str]) -> bool:
    return any(low == high for _, low, high, _ in _ranges(fields))


def _wrap_step(fields: dict[str, str]) -> bool:
    return any(low > high and step > 1 for _, low, high, step in _ranges(fields))


def _restricted(text: str) -> bool:
    return text not in ("*", "?")


def _star_day_rule(fields: dict[str, str]) -> bool:
    dom, dow = fields["day-of-month"], fields["day-of-week"]
    return _restricted(dom) and _restricted(dow) and (dom.startswith("*") or dow.startswith("*"))


def _nth_in_a_list(fields: dict[str, str]) -> bool:
    items = fields["day-of-week"].split(",")
    special = [item for item in items if "#" in item or "l" in item]
    return bool(special) and len(special) < len(items)


def _special_beside_a_day_field(fields: dict[str, str]) -> bool:
    dom, dow = fields["day-of-month"], fields["day-of-week"]
    special = "w" in dom or "#" in dow or "l" in dow
    return special and _restricted(dom) and _restricted(dow)


def _sunday_seven_step(fields: dict[str, str]) -> bool:
    return any(item.startswith("7/") for item in fields["day-of-week"].split(","))


def _late_nearest_weekday(fields: dict[str, str]) -> bool:
    match = re.fullmatch(r"(?P<day>[0-9]+)w", fields["day-of-month"])
    return match is not None and int(match["day"]) >= 29


def _never(fields: dict[str, str]) -> bool:
    return False


@dataclass(frozen=True)
class Convention:
    """A place where jobsched reads an expression otherwise than croniter, on purpose: ``example`` (in
    ``timezone``, fired after ``after``) shows it, ``reason`` says why in one line, ``applies`` recognises it in
    an expression's fields (by name, lower case); one that only daylight saving shows never applies to the
    property, which keeps away from transitions."""

    name: str
    example: str
    reason: str
    applies: Callable[[dict[str, str]], bool]
    timezone: str = "UTC"
    after: str = "2026-01-05T10:07:00Z"


CONVENTIONS = (
    Convention(
        "equal range",
        "0 0-0 * * *",
        "a range whose ends are equal (`0-0`, `jan-jan`, `7-0`) is that one value, as in Vixie cron; croniter "
        "reads it as the whole field",
        _equal_range,
    ),
    Convention(
        "wrap-around step",
        "0 23-3/2 * * *",
        "a step over a wrap-around range counts on across the wrap (23, 1, 3); croniter restarts it after the "
        "wrap (23, 2)",
        _wrap_step,
    ),
    Convention(
        "day rule with `*`",
        "0 0 */10 * mon",
        "when a restricted day field starts with `*` both day fields must match (Vixie cron); croniter takes "
        "either",
        _star_day_rule,
    ),
    Convention(
        "`#` or `L` in a day-of-week list",
        "0 0 * * *,sat#3",
        "a day-of-week list is the union of its items (`*,sat#3` is every day, `mon,fri#1` Mondays and the "
        "first Friday); croniter keeps only the `#` days beside a whole week and refuses other mixes",
        _nth_in_a_list,
    ),
    Convention(
        "`#`, `dL` or `W` with both day fields restricted",
        "0 0 1 * 5#2",
        "when both day fields are restricted a day matches if either does, whatever their items (Vixie "
        "cron); croniter requires both when one of them has `#`, `L` (day-of-week) or `W`",
        _special_beside_a_day_field,
    ),
    Convention(
        "`7/n` in day-of-week",
        "0 0 * * 7/2",
        "`a/n` runs from a to the field's end, and day-of-week ends at 7, so `7/2` is Sunday alone; croniter "
        "reads it as `0/2`",
        _sunday_seven_step,
    ),
    Convention(
        "`nW` in a month without day n",
        "0 0 30W 2 *",
        "`30W` has no day in a month without a 30th (Cronos' rule); croniter takes the month's last weekday",
        _late_nearest_weekday,
    ),
    Convention(
        "steps beyond the field",
        "*/60 * * * *",
        "a step is at most the field's maximum (cronie's rule), so `*/60` minutes is refused; croniter accepts "
        "it as minute 0",
        _never,
    ),
    Convention(
        "daylight saving",
        "30 2 * * *",
        "a fixed-time entry runs once in a repeated (fall-back) hour, on its first pass (ISC cron); croniter "
        "runs it on both passes",
        _never,
        timezone="Europe/Berlin",
        after="2026-10-24T12:00:00+02:00",
    ),
)
"""The differences from croniter: shown in the README's "Differences from croniter" (``test_the_readme_lists``)."""


def _fields(expression: str) -> dict[str, str]:
    parts = expression.lower().split()
    return dict(zip(FIELDS, parts if len(parts) == 6 else ["0", *parts], strict=True))


# --- random expressions of the shared dialect -----------------------------------------------------------------

_SPELL = {"month": _MONTHS, "day-of-week": _WEEKDAYS}


@st.composite
def _number(draw: st.DrawFn, field: str) -> str:
    top = FIELD_MAX[field] if field != "day-of-week" else 7
    value = draw(st.integers(FIELD_MIN[field], top))
    names = _SPELL.get(field)
    if names and value < 7 + (field == "month") * 6 and draw(st.booleans()):
        return names[value - 1] if field == "month" else names[value % 7]
    return str(value)


@st.composite
def _item(draw: st.DrawFn, field: str) -> str:
    step_max = 6 if field == "day-of-week" else FIELD_MAX[field]
    steps = st.integers(1, step_max)
    shape = draw(st.sampled_from(["value", "range", "star-step", "range-step", "start-step"]))
    if shape == "value":
        return draw(_number(field))
    if shape == "range":
        return f"{draw(_number(field))}-{draw(_number(field))}"
    if shape == "star-step":
        return f"*/{draw(steps)}"
    if shape == "range-step":
        return f"{draw(_number(field))}-{draw(_number(field))}/{draw(steps)}"
    return f"{draw(_number(field))}/{draw(steps)}"


def _plain(field: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just("*"),
        st.lists(_item(field), min_size=1, max_size=3).map(",".join),
    )


_DAYS_OF_MONTH = st.one_of(
    _plain("day-of-month"),
    st.just("?"),
    st.just("L"),
    st.integers(1, 31).map(lambda day: f"{day}W"),
    st.builds(
        lambda day, step: f"{day}-L" + (f"/{step}" if step else ""), st.integers(1, 31), st.integers(0, 9)
    ),
    st.lists(st.one_of(_item("day-of-month"), st.just("L")), min_size=2, max_size=3).map(",".join),
)
_DAYS_OF_WEEK = st.one_of(
    _plain("day-of-week"),
    st.just("?"),
    st.builds(lambda day, nth: f"{day}#{nth}", _number("day-of-week"), st.integers(1, 5)),
    st.integers(0, 7).map(lambda day: f"L{day}"),  # croniter reads Ld with a number only
    st.builds(lambda nth: f"*,sat#{nth}", st.integers(1, 5)),
)
SHARED_CRON = st.builds(
    lambda seconds, minute, hour, dom, month, dow: " ".join([*seconds, minute, hour, dom, month, dow]),
    st.one_of(st.just([]), _plain("second").map(lambda text: [text])),
    _plain("minute"),
    _plain("hour"),
    _DAYS_OF_MONTH,
    _plain("month"),
    _DAYS_OF_WEEK,
)
"""Cron expressions both jobsched and croniter read (5 fields, or 6 with seconds first)."""

ZONES = st.sampled_from(
    [
        "UTC",
        "Asia/Tokyo",
        "Asia/Kolkata",
        "Asia/Kathmandu",
        "America/Phoenix",
        "Etc/GMT+5",
        "Pacific/Kiritimati",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Sydney",
    ]
)
STARTS = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2090, 12, 31), timezones=st.just(UTC)
)


def _steady_until(zone: ZoneInfo, start: datetime) -> datetime | None:
    """The end of the span from ``start`` in which ``zone``'s UTC offset stays what it is at ``start`` (and was
    a day before): the last daily sample before the offset changes, at most 400 days on; None when it changed
    in the day before ``start`` (no span away from a transition)."""
    offset = start.astimezone(zone).utcoffset()
    if (start - timedelta(days=1)).astimezone(zone).utcoffset() != offset:
        return None
    for days in range(1, 401):
        if (start + timedelta(days=days)).astimezone(zone).utcoffset() != offset:
            return start + timedelta(days=days - 1)
    return start + timedelta(days=400)


def _differences(expression: str, zone: ZoneInfo, after: datetime) -> tuple[Any, Any]:
    """Both libraries' fires after ``after`` (those before the zone's next offset change), or None for a refusal."""
    ours, theirs = (
        jobsched_fires(expression, zone, after, FIRES),
        croniter_fires(expression, zone, after, FIRES),
    )
    steady = _steady_until(zone, after)
    if steady is not None and ours is not None and theirs is not None:
        ours, theirs = [f for f in ours if f < steady], [f for f in theirs if f < steady]
    return ours, theirs


# --- the tests ---------------------------------------------------------------------------------------------------


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="JOBSCHED_FUZZ_EXAMPLES" not in os.environ,  # make test repeats itself; a fuzz run explores
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(expression=SHARED_CRON, zone=ZONES, after=STARTS)
def test_croniter_agrees_but_for_the_listed_conventions(expression: str, zone: str, after: datetime) -> None:
    tz = ZoneInfo(zone)
    if _steady_until(tz, after) is None:
        return
    ours, theirs = _differences(expression, tz, after)
    if ours == theirs:
        return
    fields = _fields(expression)
    assert any(convention.applies(fields) for convention in CONVENTIONS), (
        f"{expression!r} in {zone} after {after.isoformat()}: jobsched {ours}, croniter {theirs}"
    )


@pytest.mark.parametrize("convention", CONVENTIONS, ids=lambda convention: convention.name)
def test_each_convention_is_a_real_difference(convention: Convention) -> None:
    zone = get_zone(convention.timezone)
    after = parse_instant(convention.after, zone, field="after")
    ours, theirs = (
        jobsched_fires(convention.example, zone, after, 3),
        croniter_fires(convention.example, zone, after, 3),
    )
    assert ours != theirs
    assert convention.applies is _never or convention.applies(_fields(convention.example))


@pytest.mark.parametrize("row", PEER["cases"], ids=lambda row: row["name"])
def test_the_oracle_reads_croniters_own_cases(row: dict[str, Any]) -> None:
    """The harness calls croniter as its own tests do (the peer table, in jobsched's seconds-first order)."""
    zone = get_zone(row["timezone"])
    after = parse_instant(row["after"], zone, field="after")
    expected = [datetime.fromisoformat(text).astimezone(UTC) for text in row["expected"]]
    assert croniter_fires(row["schedule"], zone, after, len(expected)) == expected


def test_the_readme_lists_the_conventions() -> None:
    section = README.read_text().split("### Differences from croniter", 1)[1].split("\n## ", 1)[0]
    for convention in CONVENTIONS:
        assert f"`{convention.example}`" in section, convention.name
        assert convention.reason in " ".join(section.split()), convention.name
