"""Fire planning (pure): which fires of a due job run now, which are skipped and which wait.

See ``jobsched.domain.tick`` for the tick that calls it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from jobsched.clock import from_ms, to_ms
from jobsched.models import MissedPolicy, Priority
from jobsched.ports.jobs import DueEntry, SchedulingState
from jobsched.schedule.engine import Schedule, parse_schedule

logger = logging.getLogger(__name__)

TICK_MS = 1_000
"""The scheduler loop ticks on each whole second of its clock (``jobsched.domain.loop``)."""

ON_TIME_TOLERANCE_MS = 2_000
"""A fire late by less than this is never treated as missed, whatever ``misfire_grace_s`` says: the poll
runs once a second, so an on-time fire is routinely found up to a tick (plus the tick's work) after its
dispatch instant. ``misfire_grace_s`` above this widens it (design §4.4: a fire late by less than the grace runs)."""


# --- limits ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TickLimits:
    """Bounds on one tick's work, so a backlog drains over several ticks instead of stalling one.

    ``max_jobs``: due jobs handled per tick, oldest dispatch first (the rest stay due for the next tick).
    ``max_runs_per_job``: fires one job runs per tick while catching up (a one-second job after an hour of
    downtime takes ~36 ticks and never holds up the other jobs). ``skip_rows_max``: up to this many skipped
    fires get one row each; more get one summary row with ``skipped_count`` (counted, never enumerated).
    ``backlog_buckets``: buckets read per tick when the watermark is far behind (the two newest are always
    read too). ``page_size``: Limit of each due-index query. ``threads``: parallel requests. ``read_ahead``: the
    entries a full tick reads at most (following pages past ``max_jobs``), so the fair rounds between owners
    (``dispatch_order``) cover that much of a backlog; the rest of what it reads is carried to the next ticks
    (``DueReader.keep_backlog``). At least ``max_jobs``; ``max_jobs`` reads no further than a tick's share.
    """

    max_jobs: int = 1000
    max_runs_per_job: int = 100
    skip_rows_max: int = 10
    backlog_buckets: int = 60
    page_size: int = 1000
    threads: int = 16
    read_ahead: int = 50_000


# --- planning (pure) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DueJob:
    """A due job's scheduling state, read consistently (not from the due index, which may lag behind an edit).

    Instants are epoch ms (UTC). ``next_run_at`` is the nominal fire (``scheduled_for`` of the next run);
    ``due`` is its current due-index entry and ``due_at = next_run_at + jitter_offset_ms`` the dispatch instant. ``version`` is bumped by every API
    rewrite of the item (None on items written before versions existed): a move lands only on the version it
    was planned from. ``on_time_from``: set by the API when it accepted a one-off whose instant was already past (the
    registration grace): that fire's lateness counts from then, so the missed policy never skips what the API
    just accepted. ``owner``: the job's owner when its state keeps it (for the skipped rows it records, and the
    fair share of its due entries); ``priority``: the job's (its next entry's lane, design §4.10).
    """

    job_id: str
    due: DueEntry
    due_at: int
    next_run_at: int
    schedule: str
    timezone: str
    anchor_at: int | None
    end_at: int | None
    missed: MissedPolicy
    catch_up_window_s: int
    misfire_grace_s: int
    jitter_offset_ms: int
    term: int
    version: int | None = None
    on_time_from: int | None = None
    owner: str | None = None
    alert_on_skipped: bool = False
    priority: Priority = Priority.NORMAL

    @classmethod
    def from_state(cls, state: SchedulingState) -> DueJob:
        """Build from a scheduling state in the due index. Raises ValueError when it is not (no ``due`` entry or
        no ``next_run_at``)."""
        if state.due is None or state.next_run_at is None:
            raise ValueError(f"job {state.job_id} is not in the due index")
        return cls(
            job_id=state.job_id,
            due=state.due,
            due_at=state.due.due_at,
            next_run_at=state.next_run_at,
            schedule=state.schedule,
            timezone=state.timezone,
            anchor_at=state.anchor_at,
            end_at=state.end_at,
            missed=state.missed,
            catch_up_window_s=state.catch_up_window_s,
            misfire_grace_s=state.misfire_grace_s,
            jitter_offset_ms=state.jitter_offset_ms,
            term=state.term,
            version=state.version,
            on_time_from=state.on_time_from,
            owner=state.owner,
            alert_on_skipped=state.alert_on_skipped,
            priority=state.priority,
        )

    def parsed_schedule(self) -> Schedule:
        """The job's Schedule (rates anchored at ``anchor_at``; no fire after ``end_at``). Raises
        ``ScheduleError`` if the stored schedule no longer parses (e.g. a zone dropped from tzdata)."""
        return parse_schedule(
            self.schedule,
            self.timezone,
            start_at=from_ms(self.anchor_at) if self.anchor_at is not None else None,
            end_at=from_ms(self.end_at) if self.end_at is not None else None,
        )


@dataclass(frozen=True)
class SkipRow:
    """Skipped fires recorded as one run row at ``scheduled_for`` (epoch ms): one fire (``count == 1``), or a
    summary of the ``count`` fires of the schedule in ``[scheduled_for, through]`` (``through``: epoch ms,
    inclusive; for one fire it equals ``scheduled_for``)."""

    scheduled_for: int
    count: int
    reason: str
    through: int


@dataclass(frozen=True)
class FirePlan:
    """What one tick does with one due job: rows to skip, fires to run (oldest first; epoch ms), and the
    job's new ``next_run_at`` (None: the schedule has ended and the job leaves the due index)."""

    job: DueJob
    skipped: tuple[SkipRow, ...]
    runs: tuple[int, ...]
    next_run_at: int | None

    @property
    def skipped_fires(self) -> int:
        return sum(row.count for row in self.skipped)


def skip_through_ms(job: DueJob, now_ms: int) -> int:
    """The latest nominal fire (epoch ms) that ``job`` skips at ``now_ms``: fires at or before it are missed.

    A fire's lateness is ``now - (fire + jitter offset)``. Rule (docs/design.md, "Missed fires"): a fire late
    by less than ``misfire_grace_s`` (never less than ``ON_TIME_TOLERANCE_MS``) always runs; under
    ``catch_up`` a fire late by at most ``catch_up_window_s`` runs too; every other fire is skipped. A fire the
    API accepted already late (``on_time_from``) is late only from then on.
    """
    if job.on_time_from is not None and job.next_run_at + job.jitter_offset_ms < job.on_time_from:
        # the one fire accepted late: its lateness runs from its acceptance, not from its instant
        now_ms -= job.on_time_from - (job.next_run_at + job.jitter_offset_ms)
    grace_ms = max(job.misfire_grace_s * 1000, ON_TIME_TOLERANCE_MS)
    window_ms = job.catch_up_window_s * 1000
    if job.missed is MissedPolicy.CATCH_UP and window_ms >= grace_ms:
        return now_ms - job.jitter_offset_ms - window_ms - 1  # skipped iff lateness > window
    return now_ms - job.jitter_offset_ms - grace_ms  # skipped iff lateness >= grace


def _skip_reason(job: DueJob) -> str:
    if job.missed is MissedPolicy.SKIP:
        return f"missed: policy skip (late by more than the misfire grace of {job.misfire_grace_s} s)"
    return f"missed: older than the catch-up window of {job.catch_up_window_s} s"


def _ms(value: datetime | None) -> int | None:
    return to_ms(value) if value is not None else None


def next_fire_ms(schedule: Schedule, after_ms: int, *, job_id: str = "") -> int | None:
    """The schedule's first fire strictly after ``after_ms`` (epoch ms), or None when it has none.

    Guards the scheduler against a schedule that yields a fire not later than ``after_ms`` (which would keep a
    job in the due index forever, re-planning the same fire each tick): such a schedule is treated as ended.
    """
    fire = _ms(schedule.next_fire(from_ms(after_ms)))
    if fire is not None and fire <= after_ms:
        logger.error(
            "schedule yielded no later fire; the job leaves the due index",
            extra={"job_id": job_id, "at": after_ms},
        )
        return None
    return fire


def horizon_ms(now_ms: int, lookahead_ms: int) -> int:
    """The last dispatch instant (epoch ms) a tick at ``now_ms`` looks at: ``now_ms`` itself, or with a
    look-ahead the instant before the next tick (the next whole second, ``TICK_MS``), at most
    ``lookahead_ms`` ahead. A fire on a whole second is so found by the tick of its own second, and one
    between two ticks is seen by the tick before it, which tells its loop to tick again at that instant
    (``TickResult.next_due_at``; design §4.9). Raises ValueError for a negative ``lookahead_ms``.
    """
    if lookahead_ms < 0:
        raise ValueError(f"lookahead_ms must be >= 0, not {lookahead_ms}")
    next_tick = (now_ms // TICK_MS + 1) * TICK_MS
    return max(now_ms, min(now_ms + lookahead_ms, next_tick - 1))


@dataclass(frozen=True)
class Dispatched:
    """What an earlier tick may have sent of a job whose move did not land: every fire from its ``next_run_at``
    whose dispatch instant (fire + jitter offset) is at or before ``through`` (epoch ms), except those inside
    the ``recorded`` rows (``(first fire, last fire)`` ranges, epoch ms: fires an earlier tick recorded skipped
    rather than sent, or whose run a claim already made)."""

    through: int
    recorded: tuple[tuple[int, int], ...] = ()

    def recorded_through(self, fire: int) -> int | None:
        """The last fire (epoch ms) of the recorded skipped row holding ``fire``, or None when none holds it."""
        return max((last for first, last in self.recorded if first <= fire <= last), default=None)


def plan_fires(
    job: DueJob,
    now_ms: int,
    limits: TickLimits,
    schedule: Schedule | None = None,
    *,
    dispatched: Dispatched | None = None,
) -> FirePlan:
    """Decide a due job's fires at ``now_ms`` (epoch ms). Pure; cost bounded by ``limits``.

    Fires are ``job.next_run_at`` and its successors by ``Schedule.next_fire`` (always from the previous
    fire, never from now, so delays never shift a job). The missed prefix (:func:`skip_through_ms`) becomes
    skipped rows; the fires due by now (``fire + jitter offset <= now``) that remain run, oldest first, at
    most ``limits.max_runs_per_job``. A job whose ``next_run_at`` is past ``end_at`` ends without running.
    Raises ``ScheduleError`` when the stored schedule cannot be parsed.

    A fire that was dispatched on time is not missed (design §4.4: every fire runs, never zero times): the fires
    from ``next_run_at`` an earlier tick may have sent (``dispatched``: an earlier term's, up to the end of its
    lease, or this term's whose move did not land) are never skipped however late they are now: they are sent
    again (the claim takes one message per ``(job_id, scheduled_for)`` and drops the others), except those
    already recorded (skipped, or run), which are passed over as they are. Only the fires after them are judged
    missed. It costs no write: the bound comes from the lease and the tick's memory.
    """
    schedule = schedule or job.parsed_schedule()
    if job.end_at is not None and job.next_run_at > job.end_at:
        return FirePlan(job, (), (), None)
    through = skip_through_ms(job, now_ms)
    skipped: tuple[SkipRow, ...] = ()
    cursor: int | None = job.next_run_at
    runs: list[int] = []
    if dispatched is not None:
        while (
            cursor is not None
            and cursor <= through
            and cursor + job.jitter_offset_ms <= dispatched.through
            and len(runs) < limits.max_runs_per_job
        ):
            recorded = dispatched.recorded_through(cursor)
            if recorded is None:
                runs.append(cursor)
            cursor = next_fire_ms(schedule, max(cursor, recorded or cursor), job_id=job.job_id)
        if len(runs) >= limits.max_runs_per_job:
            return FirePlan(job, (), tuple(runs), cursor)
    if cursor is not None and cursor <= through:
        skipped, cursor = _skip_prefix(job, schedule, through, limits, cursor)
    while (
        cursor is not None
        and cursor > through
        and cursor + job.jitter_offset_ms <= now_ms
        and len(runs) < limits.max_runs_per_job
    ):
        runs.append(cursor)
        cursor = next_fire_ms(schedule, cursor, job_id=job.job_id)
    return FirePlan(job, skipped, tuple(runs), cursor)


def _skip_prefix(
    job: DueJob, schedule: Schedule, through: int, limits: TickLimits, first: int
) -> tuple[tuple[SkipRow, ...], int | None]:
    """The skipped rows for the fires in ``[first, through]`` and the first fire after ``through``.

    Bounded work whatever the backlog: the job jumps straight to its first fire after ``through``
    (``Schedule.next_fire``), and the skipped fires are counted (``Schedule.count_fires``: arithmetic for
    rates, per day for cron), not planned one by one. Up to ``limits.skip_rows_max`` fires get a row each;
    more get one summary row covering ``[first, through]``.
    """
    reason = _skip_reason(job)
    count = 1 + schedule.count_fires(from_ms(first), from_ms(through), cap=2**62)
    following = next_fire_ms(schedule, through, job_id=job.job_id)
    if count <= limits.skip_rows_max:
        listed = [first] + [
            to_ms(f) for f in schedule.fires(from_ms(first), from_ms(through), limits.skip_rows_max)
        ]
        return tuple(SkipRow(fire, 1, reason, fire) for fire in listed[:count]), following
    return (SkipRow(first, count, reason, through),), following
