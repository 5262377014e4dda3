"""Cron fields as value sets, and the naive wall-clock arithmetic over them (pure, no zones).

jobsched owns its cron arithmetic so that every rule is written down here, not inherited from a
library's corner cases. A :class:`CronFields` is a parsed expression: sorted value tuples for
seconds, minutes, hours and months, an optional year set (EventBridge's sixth field), and the two
day fields as item lists evaluated per month. It answers two questions about NAIVE wall-clock times:
the first match after a time (:meth:`CronFields.next_wall`) and how many matches lie in a closed
range (:meth:`CronFields.count_walls`, per-day arithmetic, no enumeration). Time zones and
daylight saving are the caller's business (``jobsched.schedule.engine``).

The dialect (Vixie cron plus the Quartz/Cronos/cronsim extensions, one rule each):

- Fields: second (6-field form only, first), minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or
  ``jan``-``dec``, day-of-week 0-7 or ``sun``-``sat`` (0 and 7 are Sunday). Case-insensitive.
- ``*``; ``a``; ``a-b``; ``*/n``; ``a-b/n``; ``a/n`` (from ``a`` to the field's maximum); lists
  ``x,y,z`` are the union of their items, whatever the items are.
- Wrap-around ranges: ``a-b`` with ``a > b`` runs from ``a`` up to the field's maximum and on from
  its minimum to ``b``; a step counts from ``a`` across the wrap: ``23-3/2`` hours is 23, 1, 3;
  ``sat-tue`` is Saturday, Sunday, Monday, Tuesday (Quartz's reading of ``FRI-MON``).
- Steps are between 1 and the field's maximum (cronie's rule: ``*/60`` minutes is refused).
- Day-of-month items: ``L`` (last day), ``n-L`` (day n to the last day, croniter's form; with a step,
  ``1-L/8``, the days 1, 9, 17, 25 of ``1-31/8`` that the month has), ``L-n`` (n
  days before the last day, none if that is before the 1st), ``nW`` (the weekday, Monday to Friday, nearest to day n without leaving the month; none
  in a month without day n), ``LW`` (the last weekday of the month), ``L-nW``.
- Day-of-week items: ``d#n`` (the n-th weekday d of the month, n 1-5), ``dL`` (the last weekday d; also
  written ``Ld``, croniter's spelling: ``L5`` is ``5L``).
- croniter's other spellings are refused, saying what to write: ``w15`` (write ``15W``) and a range with
  ``#n`` (``mon-wed#2``: write ``mon#2,tue#2,wed#2``).
- Vixie cron's day rule: when both day fields are restricted a day matches if EITHER matches, unless
  either field starts with ``*`` or ``?`` (``*/10``), in which case both must match.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

__all__ = ["FIELD_MAX", "CronFieldError", "CronFields", "DayFields", "parse_field_values"]

_SECONDS_PER_DAY = 86400
_CALENDAR_CYCLE_YEARS = 400  # the Gregorian calendar (dates and weekdays) repeats every 400 years
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")

FIELD_MIN = {
    "second": 0,
    "minute": 0,
    "hour": 0,
    "day-of-month": 1,
    "month": 1,
    "day-of-week": 0,
    "year": 1970,
}
FIELD_MAX = {
    "second": 59,
    "minute": 59,
    "hour": 23,
    "day-of-month": 31,
    "month": 12,
    "day-of-week": 7,
    "year": 2199,
}
"""Bounds of each field's values; day-of-week 7 is Sunday again. Years are EventBridge's 1970-2199."""

_NUMBER = re.compile(r"^[0-9]{1,4}$")
_STEP = re.compile(r"^(?P<base>.*)/(?P<step>[0-9]+)$")
_DOM_LAST = re.compile(r"^l(?:-(?P<offset>[0-9]{1,2}))?(?P<weekday>w)?$")
_DOM_NEAREST = re.compile(r"^(?P<day>[0-9]{1,2})w$")
_DOM_TO_LAST = re.compile(r"^(?P<day>[0-9]{1,2})-l(?P<step>/[0-9]+)?$")
_DOM_W_FIRST = re.compile(r"^w(?P<day>[0-9]{1,2})$")  # croniter's w15, refused
_DOW_NTH = re.compile(r"^(?P<day>[a-z0-9]+)#(?P<nth>[0-9])$")
_DOW_RANGE_NTH = re.compile(
    r"^(?P<range>[a-z0-9]+-[a-z0-9]+)#(?P<nth>[0-9])$"
)  # croniter's mon-wed#2, refused
_DOW_LAST = re.compile(r"^(?:(?P<day>[a-z0-9]+)l|l(?P<first>[a-z0-9]+))$")


ALLOWED = {
    "second": "0-59",
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31, L, n-L (n-L/s), L-n, nW, LW or L-nW",
    "month": "1-12 or jan-dec",
    "day-of-week": "0-7 or sun-sat (0 and 7 are Sunday), d#n or dL (also Ld)",
    "year": "1970-2199",
}
"""What each field accepts, for error messages."""


class CronFieldError(ValueError):
    """A field that is not valid: ``name`` is the field (``"minute"``, ...); ``reason`` completes the phrase
    "the <name> field '<text>' ..." (``str(error)`` is ``reason``)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(reason)
        self.name = name
        self.reason = reason


def _invalid(name: str, detail: str) -> CronFieldError:
    return CronFieldError(
        name, f"is not valid: {detail} (allowed: {ALLOWED[name]}, with lists, ranges and steps)"
    )


def _number(name: str, text: str, names: tuple[str, ...] = ()) -> int:
    """One value of field ``name``: digits, or a month/weekday name. Raises CronFieldError."""
    if text in names:
        return names.index(text) + (1 if name == "month" else 0)
    if not _NUMBER.match(text):
        raise _invalid(name, f"{text!r} is not a number")
    value = int(text)
    if not FIELD_MIN[name] <= value <= FIELD_MAX[name]:
        raise _invalid(name, f"{value} is outside {FIELD_MIN[name]}-{FIELD_MAX[name]}")
    return value


def _names(name: str) -> tuple[str, ...]:
    return _MONTHS if name == "month" else _WEEKDAYS if name == "day-of-week" else ()


def _cycle(name: str) -> tuple[int, int]:
    """The values a wrap-around range cycles through: day-of-week wraps after Saturday (6)."""
    return FIELD_MIN[name], (6 if name == "day-of-week" else FIELD_MAX[name])


def _range_values(name: str, item: str) -> list[int]:
    """Values of one list item without special characters: ``*``, ``a``, ``a-b``, each with ``/n``."""
    step_match = _STEP.match(item)
    base, step = (step_match["base"], step_match["step"]) if step_match else (item, None)
    step_value = 1
    if step is not None:
        step_value = int(step) if len(step) <= 3 else 0
        if not 1 <= step_value <= FIELD_MAX[name]:
            raise CronFieldError(
                name, f"has a step of {step}; the {name} step must be between 1 and {FIELD_MAX[name]}"
            )
    low, high = _cycle(name)
    names = _names(name)
    if base == "*" or (base == "?" and name in ("day-of-month", "day-of-week")):
        start, end = FIELD_MIN[name], FIELD_MAX[name]
        if name == "day-of-week":
            end = 6
    elif "-" in base:
        first, _, last = base.partition("-")
        start, end = _number(name, first, names), _number(name, last, names)
        if name == "day-of-week" and start == 7 and end != 7:  # 7-2 is Sunday to Tuesday; 7-7 Sunday
            start = 0
    else:
        start = _number(name, base, names)
        end = start if step is None else (6 if name == "day-of-week" and start != 7 else FIELD_MAX[name])
    if start <= end:
        span = list(range(start, end + 1))
    else:  # wrap-around: start .. top of the cycle, then bottom .. end
        span = list(range(start, high + 1)) + list(range(low, end + 1))
    values = span[::step_value]
    return [0 if name == "day-of-week" and value == 7 else value for value in values]


def parse_field_values(name: str, text: str) -> tuple[int, ...]:
    """The sorted values of a plain field (second, minute, hour, month, year, or a day field without
    ``L``/``W``/``#``). Raises CronFieldError naming ``name``."""
    values: set[int] = set()
    for item in text.lower().split(","):
        if not item:
            raise _invalid(name, "an empty list item")
        values.update(_range_values(name, item))
    return tuple(sorted(values))


@dataclass(frozen=True)
class DayFields:
    """The two day fields as items, evaluated per month (see the module docstring for each item)."""

    dom_days: frozenset[int] | None  # plain days of month; None: the field is unrestricted (``*``)
    dom_last: tuple[tuple[int, bool], ...]  # (n, weekday) for L-n / L-nW (n = 0 for L and LW)
    dom_nearest: tuple[int, ...]  # n of nW
    dow_days: frozenset[int] | None  # plain weekdays, 0 = Sunday; None: unrestricted
    dow_nth: tuple[tuple[int, int], ...]  # (weekday, n) of d#n
    dow_last: tuple[int, ...]  # weekday of dL
    day_or: bool  # Vixie: both restricted and neither starts with * or ?

    def days(self, year: int, month: int) -> tuple[int, ...]:
        """The matching days of ``month`` of ``year``, ascending (cached)."""
        return _month_days(self, year, month)

    def _dom(self, year: int, month: int, last: int) -> set[int] | None:
        if self.dom_days is None and not self.dom_last and not self.dom_nearest:
            return None
        found = {day for day in (self.dom_days or ()) if day <= last}
        for offset, weekday in self.dom_last:
            if last - offset >= 1:
                found.add(_nearest_weekday(year, month, last - offset, last) if weekday else last - offset)
        found.update(_nearest_weekday(year, month, day, last) for day in self.dom_nearest if day <= last)
        return found

    def _dow(self, year: int, month: int, last: int) -> set[int] | None:
        if self.dow_days is None and not self.dow_nth and not self.dow_last:
            return None
        first = (date(year, month, 1).weekday() + 1) % 7  # cron numbering: 0 = Sunday
        found = {day for day in range(1, last + 1) if (first + day - 1) % 7 in (self.dow_days or ())}
        for weekday, nth in self.dow_nth:
            day = 1 + (weekday - first) % 7 + 7 * (nth - 1)
            if day <= last:
                found.add(day)
        for weekday in self.dow_last:
            found.add(last - ((first + last - 1) - weekday) % 7)
        return found


def _nearest_weekday(year: int, month: int, day: int, last: int) -> int:
    """The Monday-to-Friday day nearest to ``day`` within the month (Quartz's ``W``)."""
    weekday = date(year, month, day).weekday()  # Monday = 0
    if weekday == 5:  # Saturday: the Friday before, or the Monday after on the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday: the Monday after, or the Friday before on the last day
        return day + 1 if day < last else day - 2
    return day


@lru_cache(maxsize=65536)
def _month_days(fields: DayFields, year: int, month: int) -> tuple[int, ...]:
    last = calendar.monthrange(year, month)[1]
    dom, dow = fields._dom(year, month, last), fields._dow(year, month, last)
    if dom is None and dow is None:
        return tuple(range(1, last + 1))
    if dom is None or dow is None:
        chosen = dom if dow is None else dow
        assert chosen is not None
        return tuple(sorted(chosen))
    return tuple(sorted(dom | dow if fields.day_or else dom & dow))


def _parse_dom(text: str) -> tuple[frozenset[int] | None, tuple[tuple[int, bool], ...], tuple[int, ...]]:
    name = "day-of-month"
    if text in ("*", "?"):
        return None, (), ()
    plain: set[int] = set()
    last: list[tuple[int, bool]] = []
    nearest: list[int] = []
    for item in text.split(","):
        if (match := _DOM_LAST.match(item)) is not None:
            offset = int(match["offset"] or 0)
            if offset > 30:
                raise _invalid(name, "L-n needs n between 0 and 30")
            last.append((offset, match["weekday"] is not None))
        elif (match := _DOM_NEAREST.match(item)) is not None:
            nearest.append(_number(name, match["day"]))
        elif (match := _DOM_TO_LAST.match(item)) is not None:
            # n-L[/s]: day n to the last day of the month; the days of n-31[/s] the month has
            plain.update(_range_values(name, f"{match['day']}-31{match['step'] or ''}"))
        elif (match := _DOM_W_FIRST.match(item)) is not None:
            raise CronFieldError(
                name,
                f"uses croniter's spelling {item!r}; write {int(match['day'])}W (the weekday nearest that day)",
            )
        elif not item:
            raise _invalid(name, "an empty list item")
        else:
            plain.update(_range_values(name, item))
    return frozenset(plain), tuple(last), tuple(nearest)


def _parse_dow(text: str) -> tuple[frozenset[int] | None, tuple[tuple[int, int], ...], tuple[int, ...]]:
    name = "day-of-week"
    if text in ("*", "?"):
        return None, (), ()
    plain: set[int] = set()
    nth: list[tuple[int, int]] = []
    last: list[int] = []
    for item in text.split(","):
        if (match := _DOW_NTH.match(item)) is not None:
            count = int(match["nth"])
            if not 1 <= count <= 5:
                raise _invalid(name, "d#n needs n between 1 and 5")
            nth.append((_number(name, match["day"], _WEEKDAYS) % 7, count))
        elif (match := _DOW_LAST.match(item)) is not None:  # dL, or croniter's Ld
            last.append(_number(name, match["day"] or match["first"], _WEEKDAYS) % 7)
        elif (match := _DOW_RANGE_NTH.match(item)) is not None:
            days = ",".join(f"{_WEEKDAYS[day]}#{match['nth']}" for day in _range_values(name, match["range"]))
            raise CronFieldError(
                name, f"uses croniter's range with #n {item!r}; write one d#n per day, such as {days}"
            )
        elif not item:
            raise _invalid(name, "an empty list item")
        else:
            plain.update(_range_values(name, item))
    return frozenset(plain), tuple(nth), tuple(last)


@dataclass(frozen=True)
class CronFields:
    """A parsed cron expression as value sets (see the module docstring for the dialect).

    ``seconds``, ``minutes``, ``hours``, ``months``: sorted values; ``years``: sorted allowed years or
    None (any); ``days``: the day fields; ``fixed_time``: ISC cron's "fixed-time entry" (the minute and
    hour fields do not start with ``*``), which decides the daylight-saving rule the caller applies.
    All times are naive wall-clock times, whole seconds.
    """

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    years: tuple[int, ...] | None
    days: DayFields
    fixed_time: bool

    @classmethod
    def parse(
        cls, second: str, minute: str, hour: str, dom: str, month: str, dow: str, year: str | None = None
    ) -> CronFields:
        """Parse the fields (lower-case text). Raises :class:`CronFieldError` naming the first bad field."""
        seconds = parse_field_values("second", second)
        minutes = parse_field_values("minute", minute)
        hours = parse_field_values("hour", hour)
        dom_days, dom_last, dom_nearest = _parse_dom(dom)
        months = parse_field_values("month", month)
        dow_days, dow_nth, dow_last = _parse_dow(dow)
        years = None if year in (None, "*", "?") else parse_field_values("year", year)
        days = DayFields(
            dom_days=dom_days,
            dom_last=dom_last,
            dom_nearest=dom_nearest,
            dow_days=dow_days,
            dow_nth=dow_nth,
            dow_last=dow_last,
            day_or=not dom.startswith(("*", "?")) and not dow.startswith(("*", "?")),
        )
        fixed = not minute.startswith("*") and not hour.startswith("*")
        return cls(seconds, minutes, hours, months, years, days, fixed)

    # --- times of day ------------------------------------------------------------------------

    @property
    def times_per_day(self) -> int:
        """Matching times in one matching day."""
        return len(self.hours) * len(self.minutes) * len(self.seconds)

    def first_time(self, threshold: int) -> int | None:
        """The first matching second of the day at or after ``threshold`` (0-86399), or None."""
        hour, minute, second = threshold // 3600, threshold // 60 % 60, threshold % 60
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        h = bisect_left(hours, hour)
        if h < len(hours) and hours[h] == hour:
            m = bisect_left(minutes, minute)
            if m < len(minutes) and minutes[m] == minute:
                s = bisect_left(seconds, second)
                if s < len(seconds):
                    return threshold - second + seconds[s]
                m += 1
            if m < len(minutes):
                return hour * 3600 + minutes[m] * 60 + seconds[0]
            h += 1
        if h < len(hours):
            return hours[h] * 3600 + minutes[0] * 60 + seconds[0]
        return None

    def times_up_to(self, second_of_day: int) -> int:
        """How many matching times of a day are at or before ``second_of_day`` (-1 to 86399)."""
        if second_of_day < 0:
            return 0
        hour, minute, second = second_of_day // 3600, second_of_day // 60 % 60, second_of_day % 60
        per_hour = len(self.minutes) * len(self.seconds)
        count = bisect_left(self.hours, hour) * per_hour
        if _contains(self.hours, hour):
            count += bisect_left(self.minutes, minute) * len(self.seconds)
            if _contains(self.minutes, minute):
                count += bisect_right(self.seconds, second)
        return count

    # --- dates -------------------------------------------------------------------------------

    def _years_from(self, year: int) -> Iterator[int]:
        if self.years is not None:
            yield from (value for value in self.years if value >= year)
            return
        # Without a year field the calendar repeats every 400 years: no match in 401 means none ever.
        yield from range(year, min(datetime.max.year, year + _CALENDAR_CYCLE_YEARS) + 1)

    def dates_from(self, start: date) -> Iterator[date]:
        """Matching dates at or after ``start``, ascending, up to year 9999."""
        for year in self._years_from(start.year):
            for month in self.months:
                if (year, month) < (start.year, start.month):
                    continue
                days = self.days.days(year, month)
                first = bisect_left(days, start.day) if (year, month) == (start.year, start.month) else 0
                for day in days[first:]:
                    yield date(year, month, day)

    def matches_date(self, day: date) -> bool:
        """Whether every date field matches ``day``."""
        if self.years is not None and not _contains(self.years, day.year):
            return False
        return _contains(self.months, day.month) and _contains(self.days.days(day.year, day.month), day.day)

    def next_wall(self, wall: datetime | None) -> datetime | None:
        """The first matching naive wall time strictly after ``wall`` (None: from 0001-01-01T00:00:00
        inclusive); None when there is none up to the end of year 9999."""
        if wall is None:
            start, threshold = date.min, 0
        else:
            start, threshold = wall.date(), wall.hour * 3600 + wall.minute * 60 + wall.second + 1
        for day in self.dates_from(start):
            found = self.first_time(threshold if day == start else 0)
            if found is not None:
                return datetime.combine(day, time()) + timedelta(seconds=found)
        return None

    def count_walls(self, low: datetime, high: datetime, cap: int) -> int:
        """How many matching naive wall times lie in ``[low, high]`` (inclusive), at most ``cap``.

        Per-day arithmetic: the cost is the number of months in the range plus two partial days,
        never the number of matches.
        """
        if high < low or cap <= 0:
            return 0
        first, last = low.date(), high.date()
        low_second = _ceil_second(low)
        high_second = high.hour * 3600 + high.minute * 60 + high.second
        per_day = self.times_per_day
        count = 0
        for day in self._partial_days(first, last):
            if day == first == last:
                count += self.times_up_to(high_second) - self.times_up_to(low_second - 1)
            elif day == first:
                count += per_day - self.times_up_to(low_second - 1)
            else:
                count += self.times_up_to(high_second)
        if (last - first).days >= 2:  # whole days between the partial first and last days
            inner_first, inner_last = first + timedelta(days=1), last - timedelta(days=1)
            count += per_day * self._count_dates(inner_first, inner_last, cap // per_day + 1)
        return min(count, cap)

    def _partial_days(self, first: date, last: date) -> list[date]:
        days = [first] if first == last else [first, last]
        return [day for day in days if self.matches_date(day)]

    def _count_dates(self, first: date, last: date, cap: int) -> int:
        """Matching dates in ``[first, last]``, counting no further than ``cap``."""
        count = 0
        for year in range(first.year, last.year + 1):
            if self.years is not None and not _contains(self.years, year):
                continue
            for month in self.months:
                if (year, month) < (first.year, first.month) or (year, month) > (last.year, last.month):
                    continue
                days = self.days.days(year, month)
                low = bisect_left(days, first.day) if (year, month) == (first.year, first.month) else 0
                high = bisect_right(days, last.day) if (year, month) == (last.year, last.month) else len(days)
                count += max(0, high - low)
                if count >= cap:
                    return count
        return count


def _contains(values: tuple[int, ...], value: int) -> bool:
    index = bisect_left(values, value)
    return index < len(values) and values[index] == value


def _ceil_second(moment: datetime) -> int:
    """The first whole second of the day at or after ``moment``'s time of day (may be 86400)."""
    seconds = moment.hour * 3600 + moment.minute * 60 + moment.second
    return seconds + (1 if moment.microsecond else 0)
