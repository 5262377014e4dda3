"""Registering a job (pure): its id, where it lives (scheduler partition, due-index shard and bucket), its
anchor and first fire, and the scheduling state the API stores for it.

One definition, used by the API (``JobService``), the scheduler's moves (``jobsched.domain.tick``), the test
harnesses and the bench, so a job registered by a test is the job the API would have registered.
"""

from __future__ import annotations

import hashlib
import secrets

from jobsched.clock import from_ms, to_ms
from jobsched.models import Job, Priority
from jobsched.ports.jobs import HIGH_SHARD, DueEntry, SchedulingState, timer_lane
from jobsched.ports.limits import DueLayout
from jobsched.schedule.engine import Schedule, ScheduleError, jitter_offset_ms, parse_schedule


def new_job_id() -> str:
    """A fresh job id: ``j_`` + 20 random lowercase hex characters."""
    return "j_" + secrets.token_hex(10)


def stable_hash(value: str) -> int:
    """A hash of ``value`` that is the same in every process and version: the first 8 bytes of its SHA-256,
    big-endian, as an integer in ``[0, 2**64)``."""
    return int.from_bytes(hashlib.sha256(value.encode()).digest()[:8], "big")


def partition_of(job_id: str, partitions: int) -> int:
    """The scheduler partition a job is homed in, ``0..partitions-1`` (stable hash of its id)."""
    return stable_hash(job_id) % partitions


def shard_of(job_id: str, shards: int) -> int:
    """The due-index write shard of a job, ``0..shards-1`` (a different hash than the partition)."""
    return stable_hash("shard:" + job_id) % shards


TIMER_LEAD_MS = 15_000
"""An entry written at least this long before its due instant goes to the :data:`~jobsched.ports.jobs.EARLY`
lane, filed at its due instant; closer, to the :data:`~jobsched.ports.jobs.LATE` lane, filed at its writing.
It covers what the tick's ``WATERMARK_MARGIN_MS`` covers (a writer's clock slightly behind, a write that lands
a few seconds after it was sent): an early entry is stored long before a reader reaches its instant."""


def due_entry(
    job_id: str,
    due_at_ms: int,
    *,
    partition: int,
    shards: int,
    bucket_ms: int,
    now_ms: int,
    version: int | None = None,
    owner: str | None = None,
    priority: Priority = Priority.NORMAL,
) -> DueEntry:
    """The due-index entry of a job due at ``due_at_ms`` (epoch ms, its dispatch instant), written at
    ``now_ms`` for its scheduling state's ``version``.

    Its position is ``max(due_at_ms, now_ms)`` and its bucket that of the position (``bucket_ms`` wide): an
    entry written with a past due instant (a resumed job, a catch-up) lands at the current instant, never behind
    the scheduler's watermark or read position, and the poll's ``at <= now`` still finds it at once. Its lane
    is :data:`~jobsched.ports.jobs.EARLY` when it is written at least :data:`TIMER_LEAD_MS` ahead, else
    :data:`~jobsched.ports.jobs.LATE`, or their ``-high`` lanes for a ``high`` ``priority``
    (``ports.jobs.timer_lane``), always in shard ``HIGH_SHARD``. ``owner`` and ``priority`` order the due fires
    of a tick (design §4.10).
    """
    position = max(due_at_ms, now_ms)
    return DueEntry(
        job_id=job_id,
        partition=partition,
        bucket=position // bucket_ms,
        shard=HIGH_SHARD if priority is Priority.HIGH else shard_of(job_id, shards),
        due_at=due_at_ms,
        lane=timer_lane(early=due_at_ms - now_ms >= TIMER_LEAD_MS, priority=priority),
        position=position,
        version=version,
        owner=owner,
        priority=priority,
    )


def anchor_ms(job: Job) -> int:
    """A rate's anchor (and the bound before which nothing fires), epoch ms: ``start_at``, else creation."""
    return to_ms(job.start_at) if job.start_at is not None else to_ms(job.created_at)


def first_fire_ms(job: Job, since_ms: int, *, schedule: Schedule | None = None) -> int | None:
    """The job's first fire at or after ``since_ms`` (epoch ms), or None when it has none.

    ``schedule``: the job's schedule as already validated (``schedules.validate_schedule``); parsed from the
    job when not given. Rates without ``start_at`` are anchored at the job's creation (:func:`anchor_ms`).
    Raises ``ScheduleError`` when the schedule does not parse. None for a job without a schedule (it runs after
    another job: design §2.1).
    """
    if job.schedule is None:
        return None
    anchored = from_ms(anchor_ms(job))
    if schedule is None:
        schedule = parse_schedule(job.schedule, job.timezone, start_at=anchored, end_at=job.end_at)
        if schedule.kind != "rate":  # only a rate needs the anchor; nothing else is bounded by creation
            schedule = parse_schedule(job.schedule, job.timezone, start_at=job.start_at, end_at=job.end_at)
    elif schedule.kind == "rate" and job.start_at is None:
        schedule = parse_schedule(job.schedule, job.timezone, start_at=anchored, end_at=job.end_at)
    first = schedule.first_fire(from_ms(since_ms))
    return to_ms(first) if first is not None else None


def on_time_from_ms(job: Job, next_run_at_ms: int | None, now_ms: int) -> int | None:
    """``now_ms`` when the job is a one-off whose fire (plus jitter) is accepted already past (the registration
    grace), else None: the scheduler then counts that fire's lateness from ``now_ms``, so its missed policy
    never skips the run the API just accepted (``planning.skip_through_ms``)."""
    if (
        job.schedule is None
        or next_run_at_ms is None
        or next_run_at_ms + jitter_offset_ms(job.id, job.jitter_s) >= now_ms
    ):
        return None
    try:
        kind = parse_schedule(job.schedule, job.timezone).kind
    except ScheduleError:
        return None
    return now_ms if kind == "once" else None


def scheduling_state(
    job: Job,
    *,
    anchor_at_ms: int,
    next_run_at_ms: int | None,
    partition: int,
    settings: DueLayout,
    now_ms: int,
    term: int = 0,
    version: int = 1,
    on_time_from: int | None = None,
) -> SchedulingState:
    """The scheduling state of ``job`` written at ``now_ms``: in the due index (``due``) iff not paused and
    ``next_run_at_ms`` is set; ``schedule`` empty for a job that runs after another (design §2.1: it is never
    due). ``settings`` gives the due index's shards and bucket width."""
    offset = jitter_offset_ms(job.id, job.jitter_s)
    due = None
    if next_run_at_ms is not None and not job.paused:
        due = due_entry(
            job.id,
            next_run_at_ms + offset,
            partition=partition,
            shards=settings.due_shards,
            bucket_ms=settings.due_bucket_s * 1000,
            now_ms=now_ms,
            version=version,
            owner=job.owner,
            priority=job.priority,
        )
    return SchedulingState(
        job_id=job.id,
        partition=partition,
        schedule=job.schedule or "",
        timezone=job.timezone,
        anchor_at=anchor_at_ms,
        end_at=to_ms(job.end_at) if job.end_at is not None else None,
        missed=job.missed,
        catch_up_window_s=job.catch_up_window_s,
        misfire_grace_s=job.misfire_grace_s,
        jitter_offset_ms=offset,
        paused=job.paused,
        term=term,
        version=version,
        next_run_at=next_run_at_ms,
        on_time_from=on_time_from,
        due=due,
        owner=job.owner,
        alert_on_skipped=job.alerts.on_skipped,
        priority=job.priority,
    )


def register(
    job: Job, *, settings: DueLayout, now_ms: int, schedule: Schedule | None = None
) -> SchedulingState:
    """The scheduling state the API stores for a new ``job`` registered at ``now_ms`` (epoch ms): anchored at
    ``start_at`` or its creation, first fire from now, homed in ``partition_of(job.id, scheduler_partitions)``,
    term 0, version 1, ``on_time_from`` set for a one-off accepted already past.

    ``schedule``: the job's validated schedule (the API validates it first); parsed when not given. Raises
    ``ScheduleError`` when the schedule does not parse.
    """
    next_run_at = first_fire_ms(job, now_ms, schedule=schedule)
    return scheduling_state(
        job,
        anchor_at_ms=anchor_ms(job),
        next_run_at_ms=next_run_at,
        partition=partition_of(job.id, settings.scheduler_partitions),
        settings=settings,
        now_ms=now_ms,
        on_time_from=on_time_from_ms(job, next_run_at, now_ms),
    )
