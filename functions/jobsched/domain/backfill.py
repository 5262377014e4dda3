"""Backfill planning (design §3.3), pure: which fires of a job a backfill window holds, and when each run goes.

A backfill runs the job's fires in ``[start, end)`` as its schedule defines them now (its zone, its rate's
anchor, its ``start_at``/``end_at``; a cron job's fires from before its creation count, a rate has none before
its anchor). Only the past: fires after now belong to the scheduler. At most :data:`MAX_BACKFILL_FIRES` per
call, so a call's work and its answer stay bounded; the runs are spread at ``rate_per_s`` rather than
dispatched as one rush.
"""

from __future__ import annotations

from jobsched.clock import from_ms, to_ms
from jobsched.models import Job
from jobsched.ports.jobs import SchedulingState
from jobsched.ports.run_messages import MAX_DELAY_S
from jobsched.schedule.engine import Schedule, ScheduleError, parse_schedule

MAX_BACKFILL_FIRES = 1000
"""Most fires one backfill call may cover (``end`` is refused past that)."""


class BackfillWindowError(ValueError):
    """A backfill window that cannot be run: ``field`` (``start``/``end``) and a message saying what to send."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def backfill_schedule(job: Job, anchor_ms: int) -> Schedule:
    """The job's schedule as a backfill reads it: bounded by the job's own ``start_at``/``end_at``; a rate keeps
    its phase (``anchor_ms``, epoch ms: fires at anchor + k x interval, none before it). Raises
    ``ScheduleError`` when the stored schedule no longer parses, or naming ``schedule`` when the job has none (it
    runs after another job: design §2.1)."""
    if job.schedule is None:
        raise ScheduleError(
            "schedule", "the job runs after another job and has no schedule of its own: backfill its upstream"
        )
    # parsed with the anchor first: a rate without start_at does not parse without one
    anchored = parse_schedule(job.schedule, job.timezone, start_at=from_ms(anchor_ms), end_at=job.end_at)
    if anchored.kind == "rate":
        return anchored
    return parse_schedule(job.schedule, job.timezone, start_at=job.start_at, end_at=job.end_at)


def backfill_fires(schedule: Schedule, start_ms: int, end_ms: int, now_ms: int) -> tuple[int, ...]:
    """The schedule's fires in ``[start_ms, end_ms)`` (epoch ms), oldest first.

    Raises :class:`BackfillWindowError` naming ``start`` when it is before 1970 (run ids and rows hold
    non-negative epoch ms), or naming ``end`` when it is not after ``start``, is after ``now_ms`` (a
    backfill runs past fires only), or leaves more than :data:`MAX_BACKFILL_FIRES` fires in the window (the
    message gives the last ``end`` that fits).
    """
    if start_ms < 0:
        raise BackfillWindowError("start", "start must not be before 1970-01-01T00:00:00Z (epoch ms 0)")
    if end_ms <= start_ms:
        raise BackfillWindowError("end", "end must be after start")
    if end_ms > now_ms:
        raise BackfillWindowError(
            "end", f"a backfill runs past fires only: end must not be after now ({_iso(now_ms)})"
        )
    found = schedule.fires(from_ms(start_ms - 1), from_ms(end_ms - 1), MAX_BACKFILL_FIRES + 1)
    fires = tuple(to_ms(fire) for fire in found)
    if len(fires) > MAX_BACKFILL_FIRES:
        fits = fires[MAX_BACKFILL_FIRES - 1] + 1
        raise BackfillWindowError(
            "end",
            f"a backfill covers at most {MAX_BACKFILL_FIRES} fires and this window has more: end it at "
            f"{_iso(fits)} or earlier, then backfill the rest from there",
        )
    return fires


def split_scheduler_fires(
    fires: tuple[int, ...], state: SchedulingState | None, now_ms: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``fires`` (epoch ms, oldest first) split into ``(backfill's, the scheduler's)``.

    Rule (design §4.5, jitter: a run is dispatched at ``scheduled_for + offset``, never early; a fire not yet
    dispatched is the scheduler's, not backfill's): a fire is the scheduler's when its dispatch instant (fire +
    the job's jitter offset) is after ``now_ms``, or when the job is in the due index (not paused, not ended)
    and the fire is at or after its stored ``next_run_at`` (the scheduler has not dispatched it yet). A paused
    job's fires up to now are backfill's: a resume continues after the resume instant, so the scheduler never
    dispatches them. Without a state every fire due by now is backfill's.
    """
    offset = state.jitter_offset_ms if state is not None else 0
    pending_from = state.next_run_at if state is not None and not state.paused else None

    def backfills(fire: int) -> bool:
        return fire + offset <= now_ms and (pending_from is None or fire < pending_from)

    return tuple(f for f in fires if backfills(f)), tuple(f for f in fires if not backfills(f))


def dispatch_delay_s(index: int, rate_per_s: int) -> int:
    """The delivery delay (seconds) of a backfill's ``index``-th run (0-based): ``rate_per_s`` runs a second,
    never more than SQS's longest delay (:data:`MAX_DELAY_S`)."""
    return min(MAX_DELAY_S, index // rate_per_s)


def _iso(ms: int) -> str:
    return from_ms(ms).isoformat().replace("+00:00", "Z")
