"""What will run next (design §3.1): a job's next fires as the scheduler will dispatch them. Pure.

The scheduler runs a job's fires from its stored ``next_run_at`` onwards, each one ``Schedule.next_fire`` of the
one before (design §1), and dispatches each at ``scheduled_for + jitter_offset_ms`` (design §4.5). This module
lists them from the same scheduling state with the same rules (rates anchored at ``anchor_at``, no fire after
``end_at``), so the list is the scheduler's plan, not a re-computation from "now" that could disagree with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.clock import from_ms, to_ms
from jobsched.models import Fire, Fires
from jobsched.ports.jobs import SchedulingState
from jobsched.schedule.engine import Schedule, ScheduleError, get_zone, parse_schedule

MAX_FIRES = 100
"""Most fires one listing returns (``GET /jobs/{id}/fires?count=N``, N at most this)."""


@dataclass(frozen=True)
class UpcomingFire:
    """One fire to come: nominal instant ``scheduled_for`` and the ``dispatch_at`` instant the scheduler hands it
    to a worker (``scheduled_for`` + the job's jitter offset), both epoch ms (UTC); ``note``: why daylight saving
    moves or merges it (``Schedule.dst_note``), or that it is already overdue, else None."""

    scheduled_for: int
    dispatch_at: int
    note: str | None = None


@dataclass(frozen=True)
class UpcomingFires:
    """The next fires, oldest first, and ``reason``: why there are none, or fewer than asked (None otherwise)."""

    fires: tuple[UpcomingFire, ...]
    reason: str | None = None


def state_schedule(state: SchedulingState) -> Schedule:
    """The schedule the scheduler runs for ``state``: rates anchored at ``anchor_at``, no fire after ``end_at``.
    Raises ``ScheduleError`` when the stored schedule no longer parses (e.g. a zone dropped from tzdata)."""
    return parse_schedule(
        state.schedule,
        state.timezone,
        start_at=from_ms(state.anchor_at) if state.anchor_at is not None else None,
        end_at=from_ms(state.end_at) if state.end_at is not None else None,
    )


def upcoming_fires(state: SchedulingState, count: int, now_ms: int) -> UpcomingFires:
    """The next ``count`` fires (1 to :data:`MAX_FIRES`) of a job in ``state`` at ``now_ms`` (epoch ms).

    None for a paused job (``reason`` "paused": the fires that fall while it is paused never run, and a resume
    continues with the first fire after the resume instant, design §4.4), a job whose schedule has ended or has no further fire (one-off
    already run, past ``end_at``), or a stored schedule that no longer parses; fewer than ``count`` when the
    schedule ends first. A first fire whose dispatch instant is already past is listed with a note: the
    scheduler runs or skips it by the job's ``missed`` policy. Raises ValueError for ``count`` out of range.
    """
    if not 1 <= count <= MAX_FIRES:
        raise ValueError(f"count must be 1 to {MAX_FIRES}, got {count}")
    if state.paused:
        return UpcomingFires(
            (),
            "paused: no fire runs while the job is paused; a resume continues with the first fire after it",
        )
    if not state.schedule:
        return UpcomingFires((), "runs after another job (after): it has no schedule of its own")
    if state.next_run_at is None:
        return UpcomingFires((), "ended: the schedule has no further fire")
    try:
        schedule = state_schedule(state)
    except ScheduleError as error:
        return UpcomingFires((), f"the stored schedule no longer parses: {error.message}")
    fires: list[UpcomingFire] = []
    cursor = from_ms(state.next_run_at)
    if state.end_at is None or state.next_run_at <= state.end_at:
        fires.append(_fire(schedule, state, state.next_run_at, now_ms))
        fires.extend(
            _fire(schedule, state, fire, now_ms)
            for fire in (to_ms(f) for f in schedule.fires(cursor, _LAST, count - 1))
        )
    if len(fires) < count:
        return UpcomingFires(tuple(fires), "ended: the schedule has no further fire")
    return UpcomingFires(tuple(fires))


def listing(state: SchedulingState, count: int, now_ms: int) -> Fires:
    """:func:`upcoming_fires` as the API answers it: instants as UTC datetimes, each fire's ``local_time`` in
    the job's zone. Raises ValueError for ``count`` out of range."""
    upcoming = upcoming_fires(state, count, now_ms)
    zone = get_zone(state.timezone)
    items = [
        Fire(
            scheduled_for=from_ms(fire.scheduled_for),
            dispatch_at=from_ms(fire.dispatch_at),
            local_time=from_ms(fire.scheduled_for).astimezone(zone).isoformat(),
            note=fire.note,
        )
        for fire in upcoming.fires
    ]
    return Fires(items=items, reason=upcoming.reason)


_LAST = from_ms(253402300799999)  # 9999-12-31T23:59:59.999Z, the last instant there is


def _fire(schedule: Schedule, state: SchedulingState, scheduled_for: int, now_ms: int) -> UpcomingFire:
    dispatch_at = scheduled_for + state.jitter_offset_ms
    note = schedule.dst_note(from_ms(scheduled_for))
    if dispatch_at < now_ms:
        overdue = "overdue: the scheduler runs or skips it by the job's missed policy"
        note = f"{overdue}; {note}" if note else overdue
    return UpcomingFire(scheduled_for, dispatch_at, note)
