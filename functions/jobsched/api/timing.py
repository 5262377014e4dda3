"""The timing rules of the API's writes: a job's schedule validated at registration and on PATCH (naming the
field at fault), and where a re-timed job's next fire is taken from. Pure: no storage, no clock (instants
are passed in, epoch ms UTC); ``jobsched.api.service.JobService`` applies them.

- a PATCH giving any of :data:`TIMING_FIELDS` re-times the job: its ``next_run_at`` is the first fire of
  the new settings from :func:`retimed_since_ms`: from now on, keeping fires still pending (jitter not yet
  elapsed, or missed while the scheduler was down) only where the new settings fire when the old ones did
  (design §4.4);
- a resume continues with the first fire after the resume instant (:func:`resumed_next_run_at`): fires that
  fell while the job was paused are neither run nor recorded missed (design §4.4);
- any other PATCH keeps the stored anchor (:func:`stored_anchor_ms`) and ``next_run_at``;
- ``validate_schedule`` names ``end_at`` for an empty window; :func:`blame_start_at` names ``start_at`` where
  that is the field the caller got wrong.
"""

from __future__ import annotations

from jobsched.clock import from_ms, to_ms
from jobsched.domain.fires import state_schedule
from jobsched.domain.planning import next_fire_ms
from jobsched.domain.registration import anchor_ms
from jobsched.models import Job, JobSettings
from jobsched.ports.jobs import SchedulingState
from jobsched.schedule.engine import (
    Schedule,
    ScheduleError,
    jitter_offset_ms,
    parse_schedule,
    validate_schedule,
)

TIMING_FIELDS = frozenset({"schedule", "timezone", "start_at", "end_at"})
"""PATCH fields that re-time a job: ``next_run_at`` is recomputed from now when any of them is given."""


KEPT_FIRES_MAX = 10_000
"""Most past fires of a re-timed job :func:`retimed_since_ms` checks against its previous schedule; a longer
backlog is not kept (the new settings count from now on)."""


def retimed_since_ms(
    new: Schedule, old: Schedule | None, stored_next_run_at: int | None, now_ms: int, *, created_ms: int
) -> int:
    """The instant (epoch ms) from which a re-timed job's first fire is taken: fires at or after it count.

    ``new``: the schedule the scheduler will run for the new settings (:func:`settings_schedule`); ``old``: the
    one in force until now (``fires.state_schedule`` of the stored state; None: none).

    Rule (design §4.4, "PATCH recomputes ``next_run_at`` from now on"; a fire of a schedule the job did not have
    when the fire fell due never runs): fires of the new settings from ``now_ms`` on, except that the fires
    from a stored ``next_run_at`` already past (a fire waiting for its jitter offset, or a backlog the
    scheduler missed while down) are kept from the first one after which every fire of ``new`` up to now is
    also a fire of ``old``: the scheduler then runs them or records them ``skipped`` by the job's ``missed``
    policy (``jobsched.domain.planning``). So an edit of ``end_at`` keeps a backlog, while ``*/5`` replacing
    an hourly schedule at 15:00:30 first fires at 15:05. At most :data:`KEPT_FIRES_MAX` past fires are checked
    (a longer backlog counts from now). Never a kept fire before the job's creation (``created_ms``): a stored
    one-off accepted late fired before the job existed, and a recurring schedule replacing it has no fire then.
    Raises nothing.
    """
    if stored_next_run_at is None or old is None or stored_next_run_at >= now_ms:
        return now_ms
    backlog = new.count_fires(from_ms(stored_next_run_at - 1), from_ms(now_ms - 1), cap=KEPT_FIRES_MAX + 1)
    if backlog > KEPT_FIRES_MAX:  # counted without walking them (``Schedule.count_fires``)
        return now_ms
    since_ms = max(stored_next_run_at, min(created_ms, now_ms))
    fire = new.first_fire(from_ms(stored_next_run_at), grace_s=0)
    while fire is not None and to_ms(fire) < now_ms:
        at = to_ms(fire)
        previous = old.next_fire(from_ms(at - 1))
        if previous is None or to_ms(previous) != at:  # not a fire of the schedule in force then
            since_ms = at + 1
        fire = new.next_fire(fire)
    return since_ms


def settings_schedule(job: Job) -> Schedule:
    """The schedule the scheduler runs for ``job``'s settings (as ``registration.scheduling_state`` stores
    them): bounded below by its anchor (``registration.anchor_ms``: ``start_at``, else creation; a rate's
    phase), above by ``end_at``. Raises ``ScheduleError`` when it does not parse."""
    return parse_schedule(job.schedule, job.timezone, start_at=from_ms(anchor_ms(job)), end_at=job.end_at)


def resumed_next_run_at(state: SchedulingState | None, now_ms: int) -> int | None:
    """The ``next_run_at`` (epoch ms) of a job resumed at ``now_ms``: the first fire of its stored schedule
    strictly after the resume instant, or None when it has none (ended). None without a state.

    Rule (design §4.4, pause/resume): fires that fall while a job is paused are neither run nor recorded missed,
    and a resume continues with the first fire after the resume instant; ``backfill`` runs a paused-over
    window on purpose. A fire not yet dispatched when the job was paused (one waiting for its jitter offset)
    is not run either. Raises ``ScheduleError`` when the stored schedule no longer parses.
    """
    if state is None:
        return None
    return next_fire_ms(state_schedule(state), now_ms, job_id=state.job_id)


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


def stored_schedule(state: SchedulingState | None) -> Schedule | None:
    """The schedule in force for ``state`` (``fires.state_schedule``); None without a state or when it no
    longer parses (nothing of it is then kept)."""
    if state is None:
        return None
    try:
        return state_schedule(state)
    except ScheduleError:
        return None
