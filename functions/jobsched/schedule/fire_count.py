"""Counting a cron schedule's fires in a time range by arithmetic, without enumerating them.

``Schedule.count_fires`` uses :func:`count_cron_fires` so that a catch-up or skip decision over a long
downtime costs time bounded by the number of local days in the range (plus a few steps per
daylight-saving transition), not by the number of fires: ``* * * * * *`` over two days (172,800
fires) is counted in about a millisecond.

Method. The range ``(after, until]`` of UTC instants is cut into intervals of constant UTC offset
(found by probing the zone every hour and bisecting each change to the second). Within one interval,
instants and local wall times correspond one to one (``wall = instant + offset``), so its fires are the
matching wall times of a wall-time range, counted per day by :meth:`CronFields.count_walls`. The ISC
daylight-saving rules that ``Schedule.next_fire`` applies are applied at the transitions:

- a wildcard entry fires at every existing occurrence of a matching wall time: nothing more to do
  (gap wall times belong to no interval; a repeated wall time belongs to both);
- a fixed-time entry fires only on the first pass of a repeated range: after a fall-back transition
  the interval's wall times start at the wall time the clock had reached before it;
- a fixed-time entry fires once at the end of a spring-forward gap when the gap holds a match on the
  local date the gap ends on, unless the wall time at the end of the gap matches itself (one instant
  is one run).

The result equals counting ``Schedule.next_fire`` steps (a property test checks this against
enumeration across zones, transitions and the L/W/# forms).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from jobsched.schedule.cron_fields import CronFields

__all__ = ["count_cron_fires"]

_PROBE = timedelta(hours=1)  # tzdata offset changes are always more than an hour apart
_LOOKBACK = timedelta(days=1)  # longer than any repeated (fall-back) range
_MICROSECOND = timedelta(microseconds=1)
_FIRST = datetime.min.replace(tzinfo=UTC)
_LAST = datetime.max.replace(tzinfo=UTC)
_FIRST_WALL, _LAST_WALL = datetime.min, datetime.max


@dataclass(frozen=True)
class _Interval:
    """UTC instants ``[start, end)`` at one offset (None: the local time is outside years 1-9999);
    ``previous`` is the offset before ``start`` (None for the first interval looked at)."""

    start: datetime
    end: datetime
    offset: timedelta | None
    previous: timedelta | None


def _offset_at(zone: ZoneInfo, instant: datetime) -> timedelta | None:
    try:
        return instant.astimezone(zone).utcoffset()
    except OverflowError:
        return None


def _intervals(zone: ZoneInfo, start: datetime, end: datetime) -> Iterator[_Interval]:
    """Constant-offset intervals covering ``[start, end]`` (UTC), oldest first."""
    offset = _offset_at(zone, start)
    previous: timedelta | None = None
    low = start
    probe = start
    while probe < end:
        step = min(_PROBE, end - probe)
        later = probe + step
        if _offset_at(zone, later) == offset:
            probe = later
            continue
        # an offset change in (probe, later]: bisect to the first whole second with the new offset
        base = probe.replace(microsecond=0)
        lo, hi = 0, -(-(later - base) // timedelta(seconds=1))
        while hi - lo > 1:
            middle = (lo + hi) // 2
            if _offset_at(zone, base + timedelta(seconds=middle)) == offset:
                lo = middle
            else:
                hi = middle
        change = min(base + timedelta(seconds=hi), end)
        yield _Interval(low, change, offset, previous)
        previous, offset, low, probe = offset, _offset_at(zone, change), change, change
    yield _Interval(low, _LAST if end == _LAST else end + _MICROSECOND, offset, previous)


def _wall(instant: datetime, offset: timedelta) -> datetime:
    """``instant + offset`` as a naive wall time, clamped to years 1-9999."""
    naive = instant.replace(tzinfo=None)
    try:
        return naive + offset
    except OverflowError:
        return _FIRST_WALL if offset < timedelta(0) else _LAST_WALL


def count_cron_fires(
    fields: CronFields,
    zone: ZoneInfo,
    after: datetime,
    until: datetime,
    cap: int,
    gap_fires: Callable[[datetime, datetime], bool],
) -> int:
    """Number of fires of ``fields`` in ``zone`` in the UTC range ``(after, until]``, at most ``cap``.

    ``after``/``until``: aware UTC datetimes (start_at/end_at already applied by the caller).
    ``gap_fires(wall_before, wall_after)``: whether a fixed-time entry fires at the end of the
    spring-forward gap that runs from naive ``wall_before`` to ``wall_after`` (the schedule's rule, see
    ``jobsched.schedule.engine``). Cost: the number of local days in the range plus a bisection per
    daylight-saving transition, independent of the number of fires.
    """
    if until <= after or cap <= 0:
        return 0
    look_from = after - _LOOKBACK if after - _FIRST > _LOOKBACK else _FIRST
    count = 0
    for interval in _intervals(zone, look_from, until):
        if interval.end <= after or interval.offset is None:
            continue
        offset = interval.offset
        low = max(after + _MICROSECOND, interval.start)
        high = min(until, interval.end - _MICROSECOND)
        if fields.fixed_time and interval.previous is not None:
            if interval.previous > offset:  # fall back: the repeated walls fired on the first pass
                low = max(low, interval.start + (interval.previous - offset))
            elif interval.previous < offset and interval.start > after:  # spring forward
                wall_before = _wall(interval.start, interval.previous)
                wall_after = _wall(interval.start, offset)
                if gap_fires(wall_before, wall_after) and not _matches(fields, wall_after):
                    count += 1
        if low <= high:
            count += fields.count_walls(_wall(low, offset), _wall(high, offset), cap - count)
        if count >= cap:
            return cap
    return count


def _matches(fields: CronFields, wall: datetime) -> bool:
    """Whether naive ``wall`` (a whole second) is a match of ``fields``."""
    return fields.count_walls(wall, wall, 1) == 1
