"""Schedule parsing and next-fire computation: the one module that owns jobsched's schedule rules.

Pure: no AWS, no clock reads, no environment. ``jobsched.schedule.cron_fields`` does the cron field arithmetic
on naive *wall-clock* times (the dialect is described there); this module owns every convention on
top of it:

- 6-field cron reads SECONDS FIRST; EventBridge Scheduler's ``cron(min hour dom month dow year)`` is
  read verbatim (day-of-week 1-7 with 1 = Sunday, ``?`` in exactly one day field, years honoured).
- ISC cron daylight-saving convention, applied when mapping wall-clock times to instants:
  a fixed-time entry (minute and hour fields do not start with ``*``) fires once at the first
  instant after a spring-forward gap and only on the first pass of a repeated (fall-back) time;
  a wildcard entry follows the wall clock: never in the gap, on both passes of a repeated time.
- A skipped local date (Pacific/Apia skipped 2011-12-30): a fixed-time entry's fire moved out of a
  gap happens only when the gap ends on the same local date as the matched time, so an entry runs
  at most once per local calendar day, and a date that does not exist has no run of its own. One
  instant is never two runs.
- Rates are fixed intervals of real time from an anchor (``start_at``), unaffected by DST.
- Time zones are IANA names only (see :func:`get_zone`).
- The supported range is Python's: 0001-01-01T00:00:00 to 9999-12-31T23:59:59.999999, both as UTC
  instants and as local wall times; a fire must be representable in both, and an instant outside the
  range is a ``ScheduleError`` naming its field.

All instants handed out are aware datetimes in the schedule's zone; inputs may be aware
datetimes in any zone (naive ones are refused, except where a function says otherwise).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, time, timedelta
from functools import cache, cached_property, lru_cache
from itertools import pairwise
from typing import Protocol
from zoneinfo import ZoneInfo, available_timezones

from jobsched.schedule.cron_fields import ALLOWED, CronFieldError, CronFields
from jobsched.schedule.fire_count import count_cron_fires

__all__ = [
    "MAX_RATE_INTERVAL_S",
    "ONE_OFF_GRACE_S",
    "Schedule",
    "ScheduleError",
    "get_zone",
    "jitter_offset_ms",
    "localize",
    "parse_in_range",
    "parse_instant",
    "parse_schedule",
    "validate_schedule",
]

ONE_OFF_GRACE_S = 60.0
"""A one-off less than this many seconds in the past at registration runs once, now (design §1)."""

_EPSILON = timedelta(microseconds=1)
_FIRST_FIRE_TOLERANCE = timedelta(milliseconds=1)
_INTERVAL_SAMPLE_SIZE = 64
_REFERENCE_WALL = datetime(2000, 1, 1)  # a leap year; any fixed naive start for samples and searches

_FORMS_HELP = (
    "expected a cron expression (5 fields, or 6 with seconds first), an EventBridge cron(0 12 * * ? *), "
    "a macro such as @daily, rate(5 minutes) or every 5 minutes, daily 02:00, or at 2026-12-04T18:00:00"
)


class ScheduleError(ValueError):
    """Bad schedule input, raised at parse or registration time (never at run time).

    ``field`` names the API field concerned: ``"schedule"``, ``"timezone"``, ``"start_at"`` or
    ``"end_at"``; ``message`` is one sentence a person can act on. ``str(error)`` is the message.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# ---------------------------------------------------------------------------------------------
# Time zones
# ---------------------------------------------------------------------------------------------

_ZONE_HINTS = {
    # abbreviations (ambiguous: IST is India, Ireland or Israel; CST is US Central or China)
    "PST": "America/Los_Angeles",
    "PDT": "America/Los_Angeles",
    "MST": "America/Denver",
    "MDT": "America/Denver",
    "CST": "America/Chicago",
    "CDT": "America/Chicago",
    "EST": "America/New_York",
    "EDT": "America/New_York",
    "HST": "Pacific/Honolulu",
    "BST": "Europe/London",
    "CET": "Europe/Berlin",
    "CEST": "Europe/Berlin",
    "EET": "Europe/Athens",
    "WET": "Europe/Lisbon",
    "IST": "Asia/Kolkata, Europe/Dublin or Asia/Jerusalem",
    "JST": "Asia/Tokyo",
    "AEST": "Australia/Sydney",
    # Windows names
    "PACIFIC STANDARD TIME": "America/Los_Angeles",
    "MOUNTAIN STANDARD TIME": "America/Denver",
    "CENTRAL STANDARD TIME": "America/Chicago",
    "EASTERN STANDARD TIME": "America/New_York",
    "GMT STANDARD TIME": "Europe/London",
    "W. EUROPE STANDARD TIME": "Europe/Berlin",
    "INDIA STANDARD TIME": "Asia/Kolkata",
    "TOKYO STANDARD TIME": "Asia/Tokyo",
    "AUS EASTERN STANDARD TIME": "Australia/Sydney",
}


_SINGLE_WORD_ZONES = frozenset({"UTC", "GMT"})
"""The IANA names without a ``/`` that are accepted: the links to ``Etc/UTC`` and ``Etc/GMT``, which is how
people name those zones. Every other single-word name tzdata ships is an abbreviation or POSIX-style rule
(``EST``, ``HST``, ``CET``, ``EST5EDT``), or a country link (``Japan``)."""


@cache
def _iana_names() -> dict[str, str]:
    """Accepted zone names, keyed by their lower-case spelling (for a did-you-mean hint)."""
    names = {
        name
        for name in available_timezones()
        if name in _SINGLE_WORD_ZONES or ("/" in name and not name.startswith(("posix/", "right/")))
    }
    return {name.lower(): name for name in names}


@lru_cache(maxsize=1024)
def get_zone(name: str) -> ZoneInfo:
    """Return the ZoneInfo for an IANA time zone name, or raise ``ScheduleError("timezone", ...)``.

    Rule (design §1, "IANA names only"): a name is accepted when tzdata knows it AND it is
    ``UTC``, ``GMT`` or has the IANA ``Area/Location`` shape. That accepts canonical names
    (``Europe/Berlin``), legacy links (``US/Pacific``), the ``Etc/*`` zones (``Etc/UTC``, ``Etc/GMT+5``:
    POSIX sign, five hours west of Greenwich), ``UTC`` and ``GMT`` (IANA links to ``Etc/UTC`` and
    ``Etc/GMT``); it rejects abbreviations and POSIX-style names that tzdata happens to ship (``EST``,
    ``MST``, ``HST``, ``CET``, ``EST5EDT``, ``GMT0``), other single-word links (``Japan``), Windows names
    (``Pacific Standard Time``), empty and unknown names. Matching is case-sensitive; a wrong case
    gets a did-you-mean hint. Never falls back to UTC.
    """
    stripped = name.strip() if isinstance(name, str) else ""
    if not stripped:
        raise ScheduleError("timezone", "timezone is empty; use an IANA name such as Europe/Berlin or UTC")
    names = _iana_names()
    if names.get(stripped.lower()) == stripped:
        return ZoneInfo(stripped)
    hint = _ZONE_HINTS.get(stripped.upper())
    if hint is not None:
        kind = "a Windows time zone name" if " " in stripped else "an abbreviation"
        raise ScheduleError(
            "timezone",
            f"timezone {name!r} is {kind}, not an IANA time zone name; use an IANA name such as {hint}",
        )
    suggestion = names.get(stripped.lower())
    if suggestion is not None:
        raise ScheduleError(
            "timezone", f"unknown timezone {name!r}; names are case-sensitive: did you mean {suggestion}?"
        )
    raise ScheduleError(
        "timezone",
        f"unknown timezone {name!r}; use an IANA name of the form Area/Location such as "
        "Europe/Berlin or America/New_York, or UTC",
    )


# ---------------------------------------------------------------------------------------------
# Instants and wall-clock times
# ---------------------------------------------------------------------------------------------


_RANGE_TEXT = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z"


def _utc(moment: datetime, name: str) -> datetime:
    """``moment`` (aware, any zone) as a UTC datetime; naive input is a programming error.

    Raises ``ScheduleError(name, ...)`` when the instant is outside the supported range (such as
    9999-12-31T23:00:00-12:00, which is in year 10000 in UTC).
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {moment!r}")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ScheduleError(
            name, f"{moment.isoformat()} is outside the supported range {_RANGE_TEXT}"
        ) from None


def _minus(moment: datetime, delta: timedelta) -> datetime:
    """``moment - delta``, or the first instant there is (0001-01-01T00:00:00Z) if that is earlier."""
    floor = datetime.min.replace(tzinfo=UTC)
    return floor if moment - floor <= delta else moment - delta


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    """The naive local wall-clock time of an instant in ``zone``."""
    return instant.astimezone(zone).replace(tzinfo=None)


def _clock(wall: datetime) -> str:
    """A wall time of day as ``HH:MM``, or ``HH:MM:SS`` when it has seconds."""
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


def _occurrences(wall: datetime, zone: ZoneInfo) -> list[datetime]:
    """The UTC instants at which naive local time ``wall`` occurs in ``zone``, oldest first.

    Empty in a spring-forward gap, two in a fall-back repetition, one otherwise.
    """
    found: list[datetime] = []
    for fold in (0, 1):
        try:
            instant = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
            if _wall(instant, zone) == wall and instant not in found:
                found.append(instant)
        except OverflowError:  # outside years 1-9999 as an instant or as a wall time
            continue
    return found


def _converts(wall: datetime, zone: ZoneInfo) -> bool:
    """Whether both readings of naive ``wall`` in ``zone`` are instants within years 1-9999."""
    try:
        for fold in (0, 1):
            wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
    except OverflowError:
        return False
    return True


def _first_wall(zone: ZoneInfo) -> datetime:
    """The local wall time of the first instant there is (0001-01-01T00:00:00Z) in ``zone``."""
    try:
        return _wall(datetime.min.replace(tzinfo=UTC), zone)
    except OverflowError:  # a zone west of Greenwich: the first instant is before year 1 locally
        return datetime.min


@dataclass(frozen=True)
class _Transition:
    """A UTC-offset change of a zone: at ``at`` (UTC) the offset goes from ``before`` to ``after``."""

    at: datetime
    before: timedelta
    after: timedelta

    @property
    def wall_after(self) -> datetime:
        """First wall time after the change: the end of a gap, the start of a repeated range."""
        return (self.at + self.after).replace(tzinfo=None)

    @property
    def wall_before(self) -> datetime:
        """Wall time the clock had reached at the change: gap start, end of a repeated range."""
        return (self.at + self.before).replace(tzinfo=None)


def _transition_near(wall: datetime, zone: ZoneInfo) -> _Transition:
    """The offset change that makes naive ``wall`` nonexistent or ambiguous in ``zone``.

    Python maps such a wall time with the offset before the change (fold=0) and after it
    (fold=1); the change lies between the two readings. Binary search to the second (tzdata
    transitions fall on whole seconds). Only called near transitions, never on the common path.
    """

    def offset(timestamp: int) -> timedelta | None:
        return datetime.fromtimestamp(timestamp, zone).utcoffset()

    low, high = sorted(int(wall.replace(tzinfo=zone, fold=fold).timestamp()) for fold in (0, 1))
    before, after = offset(low), offset(high)
    while high - low > 1:
        middle = (low + high) // 2
        if offset(middle) == after:
            high = middle
        else:
            low = middle
    at = datetime.fromtimestamp(high, UTC)
    assert before is not None and after is not None  # ZoneInfo always has an offset
    return _Transition(at=at, before=before, after=after)


def localize(wall: datetime, zone: ZoneInfo) -> datetime:
    """Give a naive local wall time its instant in ``zone`` (an aware datetime in ``zone``).

    ISC cron convention, as for fixed-time cron entries: a wall time that does not exist (spring
    forward) maps to the first instant after the gap; one that occurs twice (fall back) maps to
    the first occurrence. An aware ``wall`` is converted to ``zone`` unchanged in instant. Raises
    OverflowError when the instant or its wall time in ``zone`` is outside years 1-9999.
    """
    if wall.tzinfo is not None:
        return wall.astimezone(UTC).astimezone(zone)
    found = _occurrences(wall, zone)
    if not found and not _converts(wall, zone):
        raise OverflowError(f"{wall.isoformat()} in {zone.key} is outside years 1-9999 as an instant")
    instant = found[0] if found else _transition_near(wall, zone).at
    return instant.astimezone(zone)


def ceil_to_ms(value: datetime) -> datetime:
    """``value`` rounded up to a whole millisecond (unchanged when it is one).

    Every instant jobsched stores is whole epoch milliseconds; an instant typed with microseconds is rounded up,
    never down, so a fire is never before the instant its owner wrote. Raises OverflowError past year 9999.
    """
    extra = value.microsecond % 1000
    return value if extra == 0 else value + timedelta(microseconds=1000 - extra)


def parse_instant(text: str, zone: ZoneInfo, *, field: str, whole_ms: bool = True) -> datetime:
    """Parse an ISO 8601 date-time (``2026-12-04T18:00:00``, ``...+01:00``, ``...Z``).

    An offset or ``Z`` is honoured; a naive time is a wall time in ``zone`` (see
    :func:`localize`). With ``whole_ms`` (an instant something fires at), sub-millisecond digits are rounded
    up to a whole millisecond (:func:`ceil_to_ms`); a bound that fires are counted after keeps them.
    Returns an aware datetime in ``zone``. Raises ``ScheduleError(field, ...)``, and OverflowError past
    year 9999 (see :func:`parse_in_range`).
    """
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleError(
            field,
            f"{text!r} is not an ISO 8601 date-time such as 2026-12-04T18:00:00 or 2026-12-04T18:00:00Z",
        ) from None
    return localize(ceil_to_ms(parsed) if whole_ms else parsed, zone)


def parse_in_range(text: str, zone: ZoneInfo, *, field: str, whole_ms: bool = True) -> datetime:
    """:func:`parse_instant`, with an instant outside the supported range (years 1-9999 both in UTC and
    in ``zone``) refused as ``ScheduleError(field, ...)`` instead of an OverflowError."""
    try:
        return parse_instant(text, zone, field=field, whole_ms=whole_ms)
    except OverflowError:
        raise ScheduleError(
            field,
            f"{text.strip()!r} is outside the supported range {_RANGE_TEXT} as an instant or as local time "
            f"in {zone.key}",
        ) from None


# ---------------------------------------------------------------------------------------------
# Cron
# ---------------------------------------------------------------------------------------------

_CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_SECONDS_FIELD = "second"
_EVENTBRIDGE_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week", "year")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_HASHED = re.compile(r"(?:^|[,\s(])[hr](?:$|[,\s()/-])")  # Jenkins-style hashed (H) and random (R) values
_EVENTBRIDGE = re.compile(r"^cron\s*\((?P<body>.*)\)$")
_EB_DOW_ITEM = re.compile(r"^(?P<day>[0-9]+)(?P<rest>(?:#[0-9]+|l)?)$")


def _eventbridge_dow(text: str, expression: str) -> str:
    """EventBridge's day-of-week (1-7, 1 = Sunday; ``L`` alone = Saturday) in Vixie numbering (0 = Sunday).

    Names, ``*`` and ``?`` are the same in both; each number n becomes n - 1, in ranges, steps' starts,
    ``d#n`` and ``dL``. Raises ScheduleError for a number outside 1-7.
    """

    def convert(number: str) -> str:
        value = int(number) if re.fullmatch(r"[0-9]{1,2}", number) else 0
        if not 1 <= value <= 7:
            raise ScheduleError(
                "schedule",
                f"EventBridge schedule {expression.strip()!r}: the day-of-week field {text!r} uses {number}; "
                "inside cron(...) days of the week are 1-7 with 1 = Sunday (or SUN-SAT)",
            )
        return str(value - 1)

    items = []
    for item in text.split(","):
        base, slash, step = item.partition("/")
        if base == "l":
            items.append("6" + slash + step)
            continue
        if re.fullmatch(r"l[0-9a-z]+|[0-9a-z]+-[0-9a-z]+#[0-9]+", base):
            raise ScheduleError(
                "schedule",
                f"EventBridge schedule {expression.strip()!r}: the day-of-week item {base!r} is croniter's "
                "spelling; inside cron(...) write the last Friday as 6L and one d#n per day (MON#2,TUE#2)",
            )
        if (match := _EB_DOW_ITEM.match(base)) is not None:
            base = convert(match["day"]) + match["rest"]
        elif "-" in base:
            first, _, last = base.partition("-")
            base = "-".join(
                convert(part) if re.fullmatch(r"[0-9]+", part) else part for part in (first, last)
            )
        items.append(base + slash + step)
    return ",".join(items)


def _unsupported_cron(text: str, expression: str) -> ScheduleError | None:
    """A clear error for the cron dialects jobsched does not read, saying what to write instead."""
    shown = expression.strip()
    if text.startswith("@every"):
        return ScheduleError(
            "schedule", f"{shown!r}: @every is not supported; write every 5 minutes or rate(5 minutes)"
        )
    if _HASHED.search(text):
        return ScheduleError(
            "schedule",
            f"cron schedule {shown!r} uses H or R (hashed or random values), which are not supported; "
            "write a fixed value such as 17, a list (5,35) or a range with a step (0-59/15)",
        )
    return None


def every_year(expression: str) -> str:
    """``expression`` with an EventBridge cron's year field read as every year (``cron(0 12 * * ? 2027)`` ->
    ``cron(0 12 * * ? *)``): the schedule's fires in any year it fires. Any other expression is returned as
    is."""
    stripped = expression.strip()
    if _EVENTBRIDGE.match(stripped.lower()) is None:
        return expression
    fields = stripped[stripped.index("(") + 1 : stripped.rindex(")")].split()
    if len(fields) != len(_EVENTBRIDGE_FIELDS):
        return expression
    return f"cron({' '.join(fields[:-1])} *)"


def _eventbridge_fields(body: str, expression: str) -> CronFields:
    """The fields of an EventBridge Scheduler ``cron(minutes hours day-of-month month day-of-week year)``."""
    fields = body.split()
    shown = expression.strip()
    if len(fields) != 6:
        raise ScheduleError(
            "schedule",
            f"EventBridge schedule {shown!r} has {len(fields)} fields inside cron(...); it needs 6: "
            "minutes hours day-of-month month day-of-week year, such as cron(0 12 * * ? *)",
        )
    minute, hour, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise ScheduleError(
            "schedule",
            f"EventBridge schedule {shown!r}: put ? in exactly one of day-of-month and day-of-week "
            "(EventBridge's rule), such as cron(0 12 * * ? *) or cron(0 12 ? * MON-FRI *)",
        )
    try:
        return CronFields.parse("0", minute, hour, dom, month, _eventbridge_dow(dow, expression), year)
    except CronFieldError as error:
        written = (
            _EVENTBRIDGE.match(shown.lower()) and shown[shown.index("(") + 1 : shown.rindex(")")].split()
        )
        value = dict(zip(_EVENTBRIDGE_FIELDS, written or fields, strict=True))[error.name]
        reason = error.reason.replace(ALLOWED["day-of-week"], "1-7 or sun-sat (1 = Sunday), d#n, dL or L")
        raise ScheduleError(
            "schedule", f"EventBridge schedule {shown!r}: the {error.name} field {value!r} {reason}"
        ) from None


@lru_cache(maxsize=4096)
def _compile_cron(text: str) -> CronFields:
    """Compile a 5- or 6-field cron text (or EventBridge ``cron(...)``) into fields. Cached per text."""
    lowered = text.lower()
    unsupported = _unsupported_cron(lowered, text)
    if unsupported is not None:
        raise unsupported
    if (eventbridge := _EVENTBRIDGE.match(lowered)) is not None:
        return _eventbridge_fields(eventbridge["body"], text)
    if re.match(r"^cron\s*\(", lowered):
        raise ScheduleError(
            "schedule",
            f"{text!r} is not an EventBridge cron expression: write cron(minutes hours day-of-month month "
            "day-of-week year), such as cron(0 12 * * ? *), with nothing after the closing parenthesis",
        )
    fields = lowered.split()
    if len(fields) == 7:
        raise ScheduleError(
            "schedule",
            f"cron schedule {text!r} has 7 fields; a year is read only in the EventBridge form "
            "cron(minutes hours day-of-month month day-of-week year), such as cron(0 12 * * ? 2027); "
            "otherwise drop the year",
        )
    if len(fields) not in (5, 6):
        raise ScheduleError(
            "schedule",
            f"cron schedule {text!r} has {len(fields)} fields; a cron schedule has 5 "
            "(minute hour day-of-month month day-of-week) or 6 (second first, then those 5)",
        )
    names = _CRON_FIELDS if len(fields) == 5 else (_SECONDS_FIELD, *_CRON_FIELDS)
    try:
        return CronFields.parse(*(fields if len(fields) == 6 else ["0", *fields]))
    except CronFieldError as error:
        value = dict(zip(names, text.split(), strict=True))[error.name]
        raise ScheduleError(
            "schedule", f"cron schedule {text!r}: the {error.name} field {value!r} {error.reason}"
        ) from None


# ---------------------------------------------------------------------------------------------
# Rules: the unbounded fire sequence of each kind, in UTC
# ---------------------------------------------------------------------------------------------


class _Rule(Protocol):
    def next_after(self, after: datetime) -> datetime | None:
        """First fire strictly after UTC ``after`` (UTC), ignoring start_at/end_at."""
        ...

    def min_interval_s(self) -> float | None:
        """Smallest gap between consecutive fires in seconds, None for a single fire."""
        ...


@dataclass(frozen=True)
class _CronRule:
    """Cron fires in a zone with the ISC daylight-saving convention."""

    spec: CronFields
    zone: ZoneInfo

    def next_after(self, after: datetime) -> datetime | None:
        try:
            local = after.astimezone(self.zone)
        except OverflowError:  # the local time is outside years 1-9999
            if after.year > 1:
                return None  # past the last wall time there is
            return self._forward_fire(None, after)
        wall = local.replace(tzinfo=None)
        second_pass = self._second_pass_fire(wall, local.fold, after)
        candidate = self._forward_fire(wall, after)
        if second_pass is not None and (candidate is None or second_pass < candidate):
            return second_pass
        return candidate

    def _second_pass_fire(self, wall: datetime, fold: int, after: datetime) -> datetime | None:
        """A wildcard entry's fire on the second pass of a repeated range that ``after`` is in.

        When ``after`` is on the first pass, wall times up to ``wall`` will come round again;
        the earliest match among them fires on the second pass.
        """
        if self.spec.fixed_time or fold == 1 or len(_occurrences(wall, self.zone)) < 2:
            return None
        transition = _transition_near(wall, self.zone)
        match = self.spec.next_wall(transition.wall_after - _EPSILON)
        if match is None or match > wall:
            return None
        return _occurrences(match, self.zone)[-1]

    def gap_fires(self, wall_before: datetime, wall_after: datetime) -> bool:
        """Whether a fixed-time entry fires at the end of a spring-forward gap: the clock jumped from
        naive ``wall_before`` to ``wall_after``.

        ISC cron moves the matches inside a gap to its end, once; jobsched does so only for a match on
        the local date the gap ends on (a date the gap swallowed, or its part before the gap, has no
        run of its own: at most one run per local calendar day).
        """
        end = wall_after
        low = max(wall_before, datetime.combine(end.date(), time()))
        match = self.spec.next_wall(low - _EPSILON) if low > datetime.min else self.spec.next_wall(None)
        return match is not None and match < end

    def _forward_fire(self, wall: datetime | None, after: datetime) -> datetime | None:
        """The first fire > ``after`` among matches of wall times strictly after ``wall`` (None: from
        the first wall time there is)."""
        cursor = wall
        while (match := self.spec.next_wall(cursor)) is not None:
            found = _occurrences(match, self.zone)
            if not found:
                if not _converts(match, self.zone):  # the instant is outside years 1-9999
                    if match.year > 1:
                        return None
                    cursor = max(match, _first_wall(self.zone) - _EPSILON)
                    continue
                # in a spring-forward gap
                transition = _transition_near(match, self.zone)
                if (
                    self.spec.fixed_time
                    and transition.at > after
                    and self.gap_fires(transition.wall_before, transition.wall_after)
                ):
                    return transition.at  # ISC: once, at the first instant after the gap
                cursor = max(transition.wall_after - _EPSILON, match)
                continue
            # ISC: a fixed-time entry fires on the first pass of a repeated time only.
            eligible = found[:1] if self.spec.fixed_time else found
            later = [instant for instant in eligible if instant > after]
            if later:
                return later[0]
            # Skip the rest of a repeated range already fired on its first pass (fixed-time entries).
            cursor = (
                max(_transition_near(match, self.zone).wall_before - _EPSILON, match)
                if len(found) > 1
                else match
            )
        return None

    def dst_note(self, fire: datetime) -> str | None:
        """Why daylight saving moves or merges ``fire`` (one of this rule's fires), or None when it does not.

        ISC convention (module docstring): a fixed-time entry's matches inside a spring-forward gap run once,
        at the first instant after it (moved; several matches are merged into that one run); a repeated
        (fall-back) time runs a fixed-time entry on its first pass only, a wildcard entry on both passes.
        """
        instant = fire.astimezone(UTC)
        wall = _wall(instant, self.zone)
        day, clock = wall.date().isoformat(), _clock(wall)
        if len(found := _occurrences(wall, self.zone)) == 2:
            if self.spec.fixed_time:
                return f"clocks go back on {day}: {clock} occurs twice and runs once, on its first pass"
            which = "first" if instant == found[0] else "second"
            return f"clocks go back on {day}: {clock} occurs twice; this run is on its {which} pass"
        if not self.spec.fixed_time or self.spec.next_wall(wall - _EPSILON) == wall:
            return None  # a wall time the entry matches: not moved
        before = (instant - timedelta(seconds=1)).astimezone(self.zone).utcoffset()
        after = instant.astimezone(self.zone).utcoffset()
        if before is None or after is None or before >= after:
            return None  # not the first instant after a spring-forward gap
        gap_start = (instant + before).replace(tzinfo=None)
        low = max(gap_start, datetime.combine(wall.date(), time()))
        moved: list[datetime] = []
        while (
            match := self.spec.next_wall(moved[-1] if moved else low - _EPSILON)
        ) is not None and match < wall:
            moved.append(match)
        shift = f"clocks go forward on {day} from {_clock(gap_start)} to {clock}"
        if len(moved) == 1:
            return f"{shift}: {_clock(moved[0])} does not exist and runs at {clock}"
        return f"{shift}: the {len(moved)} fires from {_clock(moved[0])} to {_clock(moved[-1])} run once, at {clock}"

    def min_interval_s(self) -> float | None:
        walls: list[datetime] = []
        cursor: datetime | None = _REFERENCE_WALL
        while len(walls) < _INTERVAL_SAMPLE_SIZE and cursor is not None:
            cursor = self.spec.next_wall(cursor)
            if cursor is not None:
                walls.append(cursor)
        gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(walls)]
        return min(gaps, default=None)


@dataclass(frozen=True)
class _RateRule:
    """Fires at ``anchor + k * interval`` for k = 0, 1, 2, ...: real time, DST-blind."""

    anchor: datetime
    interval: timedelta

    def index_after(self, after: datetime) -> int:
        """Smallest k with ``anchor + k * interval > after``."""
        if after < self.anchor:
            return 0
        return (after - self.anchor) // self.interval + 1

    def next_after(self, after: datetime) -> datetime | None:
        return self.anchor + self.index_after(after) * self.interval

    def min_interval_s(self) -> float | None:
        return self.interval.total_seconds()


@dataclass(frozen=True)
class _OnceRule:
    """A single fire at ``at``."""

    at: datetime

    def next_after(self, after: datetime) -> datetime | None:
        return self.at if self.at > after else None

    def min_interval_s(self) -> float | None:
        return None


# ---------------------------------------------------------------------------------------------
# Schedule
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule. Build it with :func:`parse_schedule` or :func:`validate_schedule`.

    ``expression`` is exactly as the owner wrote it; ``timezone`` the IANA zone name; ``kind``
    one of ``"cron"`` (cron, macros, ``daily``), ``"rate"`` or ``"once"``. ``start_at``/``end_at``
    (aware, UTC) bound the fires: none before ``start_at`` nor after ``end_at``; a rate's
    ``start_at`` is its anchor. Every instant returned is an aware datetime in ``timezone``.
    """

    expression: str
    timezone: str
    kind: str
    start_at: datetime | None = None
    end_at: datetime | None = None
    _rule: _Rule = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's ZoneInfo."""
        return get_zone(self.timezone)

    def next_fire(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after`` (aware, any zone), in the schedule's zone.

        None when there is no further fire: a one-off already past, a fire beyond ``end_at``, or
        a cron that matches no date. The scheduler passes the previous ``scheduled_for`` (never
        "now"), so delays never shift a job. Raises ValueError for a naive ``after``.

        Note: Python compares two datetimes of the SAME zone by wall time, ignoring ``fold``; the
        two passes of a repeated hour differ only in ``fold``, so compare fires in UTC (or as
        epoch values).
        """
        moment = _utc(after, "after")
        if self.start_at is not None and moment < self.start_at:
            moment = _minus(self.start_at, _EPSILON)
        try:
            fire = self._rule.next_after(moment)
            if fire is None or (self.end_at is not None and fire > self.end_at):
                return None
            return fire.astimezone(self.zone)
        except OverflowError:  # past year 9999, in UTC or in the schedule's zone
            return None

    def first_fire(self, now: datetime, *, grace_s: float = ONE_OFF_GRACE_S) -> datetime | None:
        """The first fire a newly registered or updated job gets, in the schedule's zone.

        One-off at T: T itself if ``T >= now - grace_s`` (a one-off less than 60 s in the past
        runs once, now: the scheduler sees it due), else None. Rate and cron: the first fire at or
        after ``now`` (1 ms tolerance), never before ``start_at``; a rate's anchor is its first
        fire. None if the schedule has no such fire (e.g. ``end_at`` already passed).
        """
        moment = _utc(now, "now")
        if isinstance(self._rule, _OnceRule):
            moment = _minus(moment, timedelta(seconds=grace_s))
        earliest = _minus(moment, _FIRST_FIRE_TOLERANCE)
        at_first_instant = (
            earliest == datetime.min.replace(tzinfo=UTC)
            and isinstance(self._rule, _OnceRule)
            and self._rule.at == earliest
            and (self.end_at is None or earliest <= self.end_at)
        )
        if at_first_instant:  # the first instant there is: nothing is "strictly before" it to search from
            return earliest.astimezone(self.zone)
        return self.next_fire(earliest)

    def _iter_fires(self, after: datetime, until: datetime) -> Callable[[], datetime | None]:
        """A step function returning successive fires in (after, until], then None."""
        cursor = after
        end = _utc(until, "until")

        def step() -> datetime | None:
            nonlocal cursor
            fire = self.next_fire(cursor)
            if fire is None or fire > end:
                return None
            cursor = fire
            return fire

        return step

    def fires(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """Fires in the half-open interval ``(after, until]``, oldest first, at most ``limit``.

        Cost is proportional to the number returned, never to the length of the interval: a
        one-second job over a day of downtime with ``limit=100`` computes 100 fires.
        """
        step = self._iter_fires(after, until)
        found: list[datetime] = []
        while len(found) < limit and (fire := step()) is not None:
            found.append(fire)
        return found

    def count_fires(self, after: datetime, until: datetime, cap: int) -> int:
        """Number of fires in ``(after, until]`` (aware, any zone), counting no further than ``cap``.

        Same fires as :meth:`fires` (start_at/end_at respected). Rates are counted arithmetically
        (O(1)); cron by per-day arithmetic (``jobsched.schedule.fire_count``: cost bounded by the local days
        in the range, whatever the number of fires); a one-off is 0 or 1.
        """
        start, end = _utc(after, "after"), _utc(until, "until")
        if isinstance(self._rule, _RateRule):
            return self._count_rate(self._rule, start, end, cap)
        if isinstance(self._rule, _CronRule):
            if self.start_at is not None:
                start = max(start, _minus(self.start_at, _EPSILON))
            if self.end_at is not None:
                end = min(end, self.end_at)
            rule = self._rule
            return count_cron_fires(rule.spec, rule.zone, start, end, cap, rule.gap_fires)
        step = self._iter_fires(after, until)
        count = 0
        while count < cap and step() is not None:
            count += 1
        return count

    def _count_rate(self, rule: _RateRule, after: datetime, until: datetime, cap: int) -> int:
        if self.start_at is not None:
            after = max(after, self.start_at - _EPSILON)
        if self.end_at is not None:
            until = min(until, self.end_at)
        # as next_fire: no fire whose local time would fall past year 9999 (east of UTC, before the UTC end)
        last_local = datetime.max.replace(tzinfo=self.zone)
        offset = self.zone.utcoffset(datetime.max.replace(tzinfo=None) - timedelta(days=2))
        if offset is not None and offset > timedelta(0):
            until = min(until, (last_local.replace(tzinfo=None) - offset).replace(tzinfo=UTC))
        if until <= after:
            return 0
        return max(0, min(cap, rule.index_after(until) - rule.index_after(after)))

    def dst_note(self, fire: datetime) -> str | None:
        """Why daylight saving moves or merges ``fire`` (aware; one of this schedule's fires), or None.

        Only cron schedules have such notes (rates and one-offs are instants of real time): a fixed-time entry
        moved out of a spring-forward gap (several matches in the gap merged into one run), or a wall time the
        clocks repeat, run once (fixed-time) or on both passes (wildcard). Text in English, wall times in the
        schedule's zone, e.g. ``"clocks go forward on 2027-03-28 from 02:00 to 03:00: 02:30 does not exist and
        runs at 03:00"``.
        """
        if isinstance(self._rule, _CronRule):
            return self._rule.dst_note(_utc(fire, "fire"))
        return None

    @cached_property
    def min_interval_s(self) -> float | None:
        """Smallest gap between consecutive fires in seconds, or None for a one-off.

        Rates: the interval. Cron: the smallest gap among the first 64 wall-clock fires from
        2000-01-01 (a sample: exact for the sub-minute and regular schedules the minimum-interval
        rule is about). None when fewer than two fires exist.
        """
        return self._rule.min_interval_s()


# ---------------------------------------------------------------------------------------------
# Parsing and validation
# ---------------------------------------------------------------------------------------------

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
MAX_RATE_INTERVAL_S = 3650 * 86400
"""Longest rate interval: 3650 days (about 10 years). jobsched's own bound (EventBridge documents none): a
longer interval is a one-off in disguise, and unbounded counts overflow date arithmetic."""
_MAX_COUNT_DIGITS = 12
# ASCII digits only, as in cron fields ([0-9]: Python's \d and int() take any Unicode digit)
_RATE = re.compile(r"^rate\s*\(\s*(?P<count>[0-9]+)\s+(?P<unit>second|minute|hour|day)s?\s*\)$")
_EVERY = re.compile(r"^every\s+(?:(?P<count>[0-9]+)\s+)?(?P<unit>second|minute|hour|day)s?$")
_DAILY = re.compile(r"^daily\s+(?P<hour>[0-9]{1,2}):(?P<minute>[0-9]{2})(?::(?P<second>[0-9]{2}))?$")
_AT = re.compile(r"^at\s*\(.*\)$|^at\s+\S")


def _rate_rule(match: re.Match[str], expression: str, start_at: datetime | None) -> _RateRule:
    digits = match["count"] or "1"
    # Bounded before int(): a huge count would overflow timedelta (and very long digit strings int()).
    seconds = int(digits) * _UNITS[match["unit"]] if len(digits) <= _MAX_COUNT_DIGITS else None
    if seconds == 0:
        raise ScheduleError(
            "schedule", f"rate {expression!r} must have a positive interval, such as 5 minutes"
        )
    if seconds is None or seconds > MAX_RATE_INTERVAL_S:
        raise ScheduleError(
            "schedule",
            f"rate {expression!r} is too long an interval: at most {MAX_RATE_INTERVAL_S // 86400} days "
            "(about 10 years); for a single run use a one-off such as at 2030-01-01T00:00:00",
        )
    if start_at is None:
        raise ScheduleError(
            "start_at",
            f"rate {expression!r} needs an anchor: pass start_at (the job's creation time by default)",
        )
    return _RateRule(anchor=start_at, interval=timedelta(seconds=seconds))


def _daily_cron(match: re.Match[str], expression: str) -> str:
    hour, minute, second = int(match["hour"]), int(match["minute"]), int(match["second"] or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ScheduleError(
            "schedule", f"{expression!r} is not a time of day; use daily HH:MM or HH:MM:SS (24-hour)"
        )
    return f"{second} {minute} {hour} * * *"


def _cron_text(text: str, expression: str) -> str:
    """The cron text for a cron, macro or daily form, or a ScheduleError. ``text`` is normalized."""
    if text.startswith("@"):
        if text == "@reboot":
            raise ScheduleError(
                "schedule",
                "@reboot is not supported: jobsched has no machine start to run at; "
                "use a one-off (at 2026-12-04T18:00:00) or a cron schedule",
            )
        unsupported = _unsupported_cron(text, expression)
        if unsupported is not None:
            raise unsupported
        if text not in _MACROS:
            raise ScheduleError(
                "schedule", f"unknown macro {expression.strip()!r}; use one of {', '.join(sorted(_MACROS))}"
            )
        return _MACROS[text]
    if text.startswith("daily"):
        daily = _DAILY.match(text)
        if daily is None:
            raise ScheduleError("schedule", f"{expression!r} is not valid; use daily HH:MM or daily HH:MM:SS")
        return _daily_cron(daily, expression)
    if text.startswith(("rate", "every")):
        raise ScheduleError(
            "schedule",
            f"{expression!r} is not a valid rate; use rate(5 minutes) or every 5 minutes "
            "(a positive whole number of seconds, minutes, hours or days)",
        )
    if len(text.split()) < 3:
        raise ScheduleError("schedule", f"{expression!r} is not a schedule: {_FORMS_HELP}")
    return " ".join(expression.split())  # as written, for messages that quote it


def _bound(value: datetime | None, zone: ZoneInfo, name: str) -> datetime | None:
    """start_at/end_at as UTC; a naive value is a wall time in the job's zone. Raises
    ``ScheduleError(name, ...)`` for an instant outside the supported range."""
    if value is None:
        return None
    try:
        local = localize(value, zone)
    except OverflowError:
        raise ScheduleError(
            name,
            f"{value.isoformat()} is outside the supported range {_RANGE_TEXT} as an instant or as local time "
            f"in {zone.key}",
        ) from None
    return _utc(local, name)


def _normalized(expression: str) -> str:
    """Lower-cased, surrounding spaces stripped, inner runs of spaces collapsed."""
    return " ".join(expression.lower().split()) if isinstance(expression, str) else ""


def _rate_match(text: str) -> re.Match[str] | None:
    return _RATE.match(text) or _EVERY.match(text)


def _at_text(expression: str) -> str:
    """The date-time text of a one-off (``at X`` or ``at(X)``), original case kept."""
    body = expression.strip()[2:].strip()
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    return body


@lru_cache(maxsize=8192)
def _parse(expression: str, timezone: str, start_at: datetime | None, end_at: datetime | None) -> Schedule:
    zone = get_zone(timezone)
    start, end = _bound(start_at, zone, "start_at"), _bound(end_at, zone, "end_at")
    text = _normalized(expression)
    if not text:
        raise ScheduleError("schedule", f"schedule is empty: {_FORMS_HELP}")
    rule: _Rule
    if (rate := _rate_match(text)) is not None:
        kind, rule = "rate", _rate_rule(rate, expression, start)
    elif _AT.match(text) is not None:
        at = parse_in_range(_at_text(expression), zone, field="schedule")
        kind, rule = "once", _OnceRule(at.astimezone(UTC))
    else:
        kind, rule = "cron", _CronRule(_compile_cron(_cron_text(text, expression)), zone)
    return Schedule(expression, timezone.strip(), kind, start, end, rule)


def parse_schedule(
    expression: str,
    timezone: str = "UTC",
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> Schedule:
    """Parse any schedule form into a :class:`Schedule`. Cached per input.

    Forms (keywords case-insensitive, surrounding spaces ignored): 5-field cron, 6-field cron
    with seconds FIRST (the dialect: ``jobsched.schedule.cron_fields``), EventBridge Scheduler's
    ``cron(minutes hours day-of-month month day-of-week year)`` (day-of-week 1-7 with 1 = Sunday,
    ``?`` in exactly one day field, years 1970-2199 honoured), macros (``@hourly @daily @midnight @weekly @monthly @yearly @annually``),
    rates (``rate(5 minutes)``, ``every 30 seconds``; units second(s)/minute(s)/hour(s)/day(s); at most
    :data:`MAX_RATE_INTERVAL_S`), cron steps no larger than their field's maximum (cronie's rule),
    ``daily HH:MM[:SS]`` (same as cron) and one-offs (``at 2026-12-04T18:00:00``,
    ``at(...)``; naive = ``timezone``, an offset or ``Z`` honoured).

    ``timezone`` is an IANA name (:func:`get_zone`). ``start_at``/``end_at``: aware datetimes
    (naive ones are wall times in ``timezone``); no fires before ``start_at`` or after
    ``end_at``. A rate is anchored at ``start_at``, which is required for rates (callers pass
    start_at or created_at). Raises ``ScheduleError(field, message)`` for any bad input. Does
    not check whether the schedule ever fires; :func:`validate_schedule` does.
    """
    return _parse(expression, timezone, start_at, end_at)


def _describe_seconds(seconds: float) -> str:
    """A short human duration: '45 s', '5 minutes', '3 hours', '2 days'."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} s"


def validate_schedule(
    expression: str,
    timezone: str,
    *,
    now: datetime,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    min_interval_s: float = 1.0,
    grace_s: float = ONE_OFF_GRACE_S,
) -> Schedule:
    """Registration-time validation: parse, then refuse schedules that would misbehave later.

    Rates are anchored at ``start_at`` or, if absent, ``now``. Raises ``ScheduleError``:
    ``end_at`` not after ``start_at`` (field ``end_at``); a one-off more than ``grace_s`` in the
    past (``schedule``; design §1: one less than 60 s in the past runs once, now); a cron that matches
    no calendar date such as ``0 0 30 2 *`` (``schedule``; searched over a whole 400-year Gregorian
    cycle, so rare dates such as ``0 9 29 2 mon`` are valid); fires more often than
    ``min_interval_s``, the deployment's minimum interval (``schedule``); no fire before
    ``end_at`` (``end_at``); no fire left before the end of year 9999 (``start_at`` when it is given,
    else ``schedule``); a one-off before ``start_at`` (``start_at``). Returns the Schedule.
    """
    anchor = now if start_at is None and _rate_match(_normalized(expression)) else start_at
    schedule = parse_schedule(expression, timezone, start_at=anchor, end_at=end_at)
    if schedule.start_at is not None and schedule.end_at is not None and schedule.end_at <= schedule.start_at:
        if start_at is None:  # a rate anchored at now: the owner gave no start_at
            raise ScheduleError(
                "end_at",
                f"end_at {schedule.end_at.isoformat()} is not in the future, so the job would never run",
            )
        raise ScheduleError("end_at", "end_at must be after start_at")
    rule = schedule._rule
    moment = _utc(now, "now")
    if isinstance(rule, _OnceRule):
        late = (moment - rule.at).total_seconds()
        if late > grace_s:
            raise ScheduleError(
                "schedule",
                f"{expression.strip()!r} is {_describe_seconds(late)} in the past; one-off times must be in "
                f"the future (a time less than {grace_s:g} s in the past runs once, now)",
            )
        if schedule.start_at is not None and rule.at < schedule.start_at:
            raise ScheduleError("start_at", "start_at is after the one-off time, so the job would never run")
    if isinstance(rule, _CronRule) and rule.spec.next_wall(None) is None:
        raise ScheduleError(
            "schedule",
            f"cron schedule {expression.strip()!r} never fires: no calendar date matches its day-of-month, "
            "month and day-of-week fields",
        )
    interval = schedule.min_interval_s
    if interval is not None and interval < min_interval_s:
        raise ScheduleError(
            "schedule",
            f"{expression.strip()!r} fires every {_describe_seconds(interval)}, more often than this "
            f"deployment allows (at most once every {_describe_seconds(min_interval_s)})",
        )
    if schedule.first_fire(now, grace_s=grace_s) is None:
        if schedule.end_at is not None and replace(schedule, end_at=None).first_fire(now, grace_s=grace_s):
            raise ScheduleError(
                "end_at", "end_at is before the schedule's first fire, so the job would never run"
            )
        if start_at is not None and schedule.start_at is not None and schedule.start_at > moment:
            raise ScheduleError(
                "start_at",
                f"start_at is so late that {expression.strip()!r} has no fire after it before the end of "
                "the supported range (9999-12-31T23:59:59Z), so the job would never run",
            )
        raise ScheduleError(
            "schedule",
            f"{expression.strip()!r} has no fire at or after {moment.isoformat()} before the end of the "
            "supported range (9999-12-31T23:59:59Z), so the job would never run",
        )
    return schedule


def jitter_offset_ms(job_id: str, jitter_s: int) -> int:
    """A job's fixed dispatch offset in milliseconds, uniform in ``[0, jitter_s * 1000)``.

    Stable per job: derived from the SHA-256 of ``job_id`` (no randomness, no clock), so every
    scheduler computes the same value. 0 when ``jitter_s`` is 0. Raises ValueError if negative.
    """
    if jitter_s < 0:
        raise ValueError(f"jitter_s must be >= 0, got {jitter_s}")
    if jitter_s == 0:
        return 0
    digest = int.from_bytes(hashlib.sha256(job_id.encode("utf-8")).digest(), "big")
    return digest % (jitter_s * 1000)
