"""The timing rules of the API's writes: a job's schedule validated at registration and on PATCH (naming the
field at fault), and where a re-timed job's next fire is taken from. Pure: no storage, no clock (instants
are passed in, epoch ms UTC); ``jobsched.api.service.JobService`` applies them.

- a PATCH giving any of :data:`TIMING_FIELDS` re-times the job: its ``next_run_at`` is the first fire of
  the new settings from :func:`retimed_since_ms`, so fires still pending (jitter not yet elapsed, or missed
  while the scheduler was down) are kept for the scheduler's ``missed`` policy (design §3, design §4);
- any other PATCH keeps the stored anchor (:func:`stored_anchor_ms`) and ``next_run_at``;
- ``validate_schedule`` names ``end_at`` for an empty window; :func:`blame_start_at` names ``start_at`` where
  that is the field the caller got wrong.
"""

from __future__ import annotations

from jobsched.models import Job, JobSettings, from_ms, to_ms
from jobsched.ports.jobs import SchedulingState
from jobsched.schedules import Schedule, ScheduleError, jitter_offset_ms, validate_schedule

TIMING_FIELDS = frozenset({"schedule", "timezone", "start_at", "end_at"})
"""PATCH fields that re-time a job: ``next_run_at`` is recomputed from now when any of them is given."""


def retimed_since_ms(job: Job, stored_next_run_at: int | None, now_ms: int, *, one_off: bool = False) -> int:
    """The instant (epoch ms) from which a re-timed job's first fire is taken: fires at or after it count.

    ``min(now - jitter offset, stored next_run_at)``, but never before the job's ``created_at`` unless the
    new schedule is a one-off (``one_off``). Fires whose dispatch instant (fire + the job's jitter
    offset, design §4) is still ahead of now are not dropped; nor is a stored ``next_run_at`` already
    past, i.e. a fire not yet run, or a backlog the scheduler missed while down or while the job was
    paused. Those come out as a past ``next_run_at``, so the scheduler runs them or records them
    ``skipped`` by the job's ``missed`` policy and catch-up window (``jobsched.domain.planning``); the unique
    run key ``(job_id, scheduled_for)`` keeps it from creating a run that already exists. Everything else
    is "from now on" (design §3). The floor: a stored ``next_run_at`` before the job's creation is a
    one-off accepted late; a recurring schedule replacing it has no fire from before the job existed
    (a fire of no schedule the job had), while a one-off keeps its instant as registration accepted it.
    """
    since_ms = now_ms - jitter_offset_ms(job.id, job.jitter_s)
    if stored_next_run_at is not None:
        since_ms = min(since_ms, stored_next_run_at)
    if not one_off:
        since_ms = max(since_ms, to_ms(job.created_at))
    return since_ms


def kept_on_time_from(state: SchedulingState | None, job: Job, now_ms: int) -> int | None:
    """The ``on_time_from`` (epoch ms) of a job rewritten at ``now_ms`` with its stored ``next_run_at`` kept.

    The stored one, except when ``job``'s jitter offset moves that fire's dispatch instant (fire + offset) from
    now or later to before now (a PATCH lowering ``jitter_s`` while the fire waits for its dispatch): the fire
    was pending, not missed, so its lateness counts from ``now_ms`` (``planning.skip_through_ms``) and the
    ``missed`` policy does not skip it. None when there is no state.
    """
    if state is None:
        return None
    fire = state.next_run_at
    if (
        fire is not None
        and fire + jitter_offset_ms(job.id, job.jitter_s) < now_ms <= fire + state.jitter_offset_ms
    ):
        return now_ms
    return state.on_time_from


def validated_schedule(
    job: JobSettings, now_ms: int, min_interval_s: float, *, changed: frozenset[str] = frozenset()
) -> Schedule:
    """The job's schedule, validated as at registration (at ``now_ms``, epoch ms; the deployment's
    ``min_interval_s``, seconds). ``changed``: the fields a PATCH gives, to name the one at fault (see
    :func:`blame_start_at`). Raises ``ScheduleError`` (field ``schedule``, ``timezone``, ``start_at`` or
    ``end_at``); a ``timezone`` with whitespace around it names ``timezone``: the zone check reads the name
    stripped, but the job would store and return it as given, which is not an IANA name."""
    if job.timezone != job.timezone.strip():
        raise ScheduleError(
            "timezone",
            f"timezone {job.timezone!r} has whitespace around it; use the IANA name alone, {job.timezone.strip()!r}",
        )
    try:
        return validate_schedule(
            job.schedule,
            job.timezone,
            now=from_ms(now_ms),
            start_at=job.start_at,
            end_at=job.end_at,
            min_interval_s=min_interval_s,
        )
    except ScheduleError as error:
        raise blame_start_at(error, job, changed) from None


def blame_start_at(error: ScheduleError, job: JobSettings, changed: frozenset[str]) -> ScheduleError:
    """``error`` naming ``start_at`` where that is the field at fault, else ``error`` itself.

    ``validate_schedule`` names ``end_at`` whenever the window ``[start_at, end_at]`` holds no fire, or ends
    before it starts. That is ``start_at``'s doing when there is no ``end_at`` (a start so late that no fire
    follows it, e.g. in year 9999), or when a PATCH moved ``start_at`` and left ``end_at`` as it was.
    """
    if error.field != "end_at" or job.start_at is None:
        return error
    if job.end_at is None:
        return ScheduleError(
            "start_at",
            "start_at is so late that the schedule has no fire after it, so the job would never run",
        )
    if "start_at" not in changed or "end_at" in changed:
        return error
    if job.start_at >= job.end_at:
        return ScheduleError("start_at", f"start_at must be before end_at ({job.end_at.isoformat()})")
    return ScheduleError(
        "start_at",
        f"start_at leaves no fire of the schedule before end_at ({job.end_at.isoformat()}), "
        "so the job would never run",
    )


def stored_anchor_ms(state: SchedulingState | None, job: Job) -> int:
    """The anchor (epoch ms) a job's state was stored with; its creation for a state stored without one."""
    return state.anchor_at if state and state.anchor_at is not None else to_ms(job.created_at)
