"""An oracle of jobsched's promises that is independent of the product: which fires each job must run, may run,
must not run and must record missed, computed from what the test itself did (each job's specs and pauses with
their instants, deletions, scheduler downtime and clean ticks, the owner's triggers, backfills and re-runs) and
from the schedule engine alone (``jobsched.schedule.engine``: fire enumeration and the jitter offset). It never reads
``next_run_at`` nor any answer of the API.

The product's behaviour is observed, not trusted: every try a target starts and ends (``try_started`` /
``try_ended``, fed by the test's executor), every message the scheduler sends (``sent``), and the run rows the
stores hold (the thing judged). ``safety`` judges rows and tries at any moment; ``liveness`` after the system
settled (every clean tick done, every message delivered).

Rules (``/work/shared/SPEC.md`` §1, §4, and the pause rule of §3):

- A job's spec in force at an instant is the one written last before it (an *era*). A scheduled run's
  ``scheduled_for`` is a fire of the era in force then (a one-off accepted up to 60 s late at its write: its own
  instant). A rate is anchored at the job's ``start_at``, else its creation instant.
- A fire that falls while the job is paused (``[paused, resumed]``) is neither run nor recorded missed; a backfill
  runs it on purpose. A fire after the job's deletion never runs.
- A backfill runs the fires in its window of the spec in force at its request (the last one written before it),
  those whose dispatch instant is not after the request; a fire of the job's schedule no clean tick found before
  the request is the scheduler's (run, or recorded missed, by the rules above).
- A tick finds a fire ``L`` ms late: with ``missed: skip`` it runs when ``L`` is under
  ``max(misfire_grace_s, ON_TIME_TOLERANCE_MS)``, else it is recorded skipped (until a backfill or a re-run
  runs it); with ``catch_up`` it runs within
  ``max(catch_up_window_s, misfire_grace_s, ON_TIME_TOLERANCE_MS)``. Near a threshold (a few ticks, and one more
  tick per ``max_runs_per_job`` fires caught up) either outcome is allowed. A fire the scheduler sent is
  dispatched: it runs, never recorded missed. The first *complete* clean tick at or after a fire (one that read
  every due entry: ``TickResult.lag_ms == 0``) finds it at the latest; a clean tick that read a slice of a
  backlog (after a downtime the ticks read the due index oldest buckets first, ``TickLimits.backlog_buckets``
  a tick, plus the newest two: design §4.1, "A rush fills ticks with its backlog, oldest due first") may find it
  earlier or not: the verdicts for the two lateness bounds are both allowed.
- Every try starts at or after the fire plus the job's jitter offset (scheduled and backfilled runs). A run
  succeeds at most once; a run with a successful try is never recorded dead or skipped; a run whose try started
  (in the current round: a re-run opens a new one) is never recorded skipped. Under ``overlap: skip`` and
  ``buffer_one`` (the spec in force when a try starts) no two tries of a job run at once; a try counts as running
  until its target returned. Under ``buffer_one`` a fire is recorded skipped for overlap only while another fire
  waits (its reason names the holder and the one that waits, never itself), and the one that waits runs after
  that: its first try from then on starts after the holder's try ended (design §5.4). Under ``replace`` a fire is
  never recorded skipped for overlap; a run it cancelled (``cancelled_by`` ``jobsched:replace``) owes no more.
- A manual run is keyed at its request's instant, never at a fire (design §2: its ``scheduled_for`` never
  collides with a scheduled fire): a PATCH in the same millisecond has no fire at that instant.
- A trigger runs once (or is recorded skipped as a backfilled fire may be, below); a backfill runs each fire of ``[start, end)`` of the eras in force, dispatchable by the
  request (fire plus offset at or before it), that had no try before it, unless ``overlap: skip`` recorded it
  skipped beside a try of the run its reason names (design §5.4); a re-run runs its run once more.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from jobsched.clock import from_ms, to_ms
from jobsched.domain.planning import ON_TIME_TOLERANCE_MS, TickLimits
from jobsched.domain.worker import MAX_GIVE_BACK_DELAY_S
from jobsched.ports.runs import RunRow, run_id
from jobsched.schedule.engine import Schedule, jitter_offset_ms, parse_schedule

LATE_ONE_OFF_MS = 60_000
"""A one-off this far in the past at its write is accepted and runs once (design §1)."""
BAND_MS = 5_000
"""Around a lateness threshold either outcome is allowed (up to half the threshold): the ticks after a downtime
read the due backlog a bounded slice at a time."""
EDGE_MS = ON_TIME_TOLERANCE_MS
"""A fire this close before a pause, a PATCH or a deletion may have been dispatched or not."""
DELETED_QUEUE_MS = 5 * MAX_GIVE_BACK_DELAY_S * 1000
"""A fire this long before its job's deletion may still have been waiting on the queue when the job was deleted,
and a run that finds its job deleted is recorded skipped, never run (design §2): the run queue's 5 receives,
each handed back for at most ``MAX_GIVE_BACK_DELAY_S``."""
FINISHED = ("succeeded", "dead")
LOCKING = ("skip", "buffer_one", "replace")
"""The ``overlap`` policies under which no two tries of a job run together."""
HOLDER = re.compile(r"run (\S+) of this job is still running")
"""The run an ``overlap`` skip's reason names as holding the job's lock (or running without it)."""
WAITING = re.compile(r"run (\S+) of this job is still running and run (\S+) waits for it")
"""The reason of a fire skipped under ``buffer_one``: the holder's run id and that of the fire that waits."""
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Spec:
    """What of a job's spec the oracle judges by: the schedule as written, its zone and anchor (epoch ms), the
    missed-fire policy, overlap, jitter and attempts."""

    schedule: str
    timezone: str = "UTC"
    start_at: int | None = None
    missed: str = "catch_up"
    grace_s: int = 60
    window_s: int = 86400
    overlap: str = "allow"
    jitter_s: int = 0
    max_attempts: int = 4

    @property
    def one_off(self) -> bool:
        return self.schedule.strip().lower().startswith("at")

    def threshold_ms(self) -> int:
        """The lateness (ms) up to which a fire found late still runs."""
        grace = max(self.grace_s * 1000, ON_TIME_TOLERANCE_MS)
        return max(grace, self.window_s * 1000) if self.missed == "catch_up" else grace


@dataclass
class Era:
    """One spec of a job, in force from ``since`` (epoch ms, its write) until ``until`` (the next write)."""

    spec: Spec
    since: int
    until: int | None
    anchor: int

    @cached_property
    def schedule(self) -> Schedule:
        """The era's schedule, parsed by the schedule engine."""
        anchor = self.spec.start_at if self.spec.start_at is not None else self.anchor
        if self.spec.one_off:  # its own instant, which may lie before its write
            return parse_schedule(self.spec.schedule, self.spec.timezone)
        return parse_schedule(self.spec.schedule, self.spec.timezone, start_at=from_ms(anchor))

    @cached_property
    def unbounded(self) -> Schedule:
        """The era's schedule as a backfill reads it: a rate keeps its anchor, any other schedule is bounded by
        the job's ``start_at`` alone (its fires before the job existed count)."""
        if self.schedule.kind == "rate":
            return self.schedule
        start = from_ms(self.spec.start_at) if self.spec.start_at is not None else None
        return parse_schedule(self.spec.schedule, self.spec.timezone, start_at=start)

    def fires(self, start: int, end: int, limit: int = 20_000) -> list[int]:
        """This era's schedule's fires in ``[start, end]`` (epoch ms), by the schedule engine."""
        if end < start:
            return []
        return [to_ms(f) for f in self.schedule.fires(from_ms(start - 1), from_ms(end), limit)]

    def in_force(self, instant: int) -> bool:
        return self.since <= instant and (self.until is None or instant < self.until)

    def owns(self, fire: int) -> bool:
        """Whether ``fire`` is a fire of this era's schedule that fell due while it was in force."""
        start = self.since - LATE_ONE_OFF_MS if self.spec.one_off else self.since
        if fire < start or (self.until is not None and fire >= self.until):
            return False
        return bool(self.fires(fire, fire, 1))


@dataclass(frozen=True)
class Backfill:
    """An owner's backfill of ``[start, end)`` (epoch ms) asked at ``asked``, of the spec of ``era`` (the one in
    force at the request: a backfill runs the window's fires of the job's schedule as it is then, design §3.3)."""

    start: int
    end: int
    asked: int
    era: Era


@dataclass
class Try:
    """One try a target ran: its run, start and end (epoch ms), success, and the round (re-runs asked before)."""

    job_id: str
    run: str
    started: int
    round: int
    ended: int | None = None
    ok: bool | None = None


@dataclass
class JobHistory:
    """What the test did to one job, with instants (epoch ms)."""

    job_id: str
    created: int
    eras: list[Era] = field(default_factory=list)
    pauses: list[list[int | None]] = field(default_factory=list)
    deleted: int | None = None
    triggers: int = 0
    trigger_keys: set[str] = field(default_factory=set)
    triggered_at: set[int] = field(default_factory=set)
    backfills: list[Backfill] = field(default_factory=list)
    reruns: dict[int, list[int]] = field(default_factory=dict)  # scheduled_for -> asked at

    def era_at(self, instant: int) -> Era | None:
        return next((e for e in self.eras if e.in_force(instant)), None)

    def owner_of(self, fire: int) -> Era | None:
        return next((e for e in self.eras if e.owns(fire)), None)

    def paused_over(self, fire: int) -> bool:
        """Whether ``fire`` fell while the job was paused (``[paused, resumed]``)."""
        return any(p <= fire and (r is None or fire <= r) for p, r in self.pauses)

    def near_a_pause(self, fire: int) -> bool:
        return any(p - EDGE_MS <= fire < p for p, _ in self.pauses)

    def paused_between(self, start: int, end: int) -> bool:
        return any(start <= p <= end for p, _ in self.pauses)

    def requested(self, fire: int) -> bool:
        """Whether a backfill or a re-run asked for ``fire`` (then a paused-over fire may run)."""
        return fire in self.reruns or any(b.start <= fire < b.end for b in self.backfills)


class Oracle:
    """The expected behaviour of every job the test made (see the module docstring).

    ``retention_ms``: rows older than this may have expired (their fires are not required any more)."""

    def __init__(self, *, retention_ms: int | None = None, limits: TickLimits | None = None) -> None:
        self.jobs: dict[str, JobHistory] = {}
        self.retention_ms = retention_ms
        self.limits = limits or TickLimits()
        self.clean_ticks: list[int] = []  # complete ones: every due entry read
        self.reading_ticks: list[int] = []  # every clean tick, complete or reading a slice of a backlog
        self.sends: dict[tuple[str, int], int] = {}
        self.tries: list[Try] = []
        self.open: dict[str, list[Try]] = {}
        self.by_run: dict[str, list[Try]] = {}
        self.violations: list[str] = []

    # --- what the test did ---------------------------------------------------------------------------

    def created(self, job_id: str, spec: Spec, at: int) -> None:
        job = JobHistory(job_id, at)
        job.eras.append(Era(spec, at, None, at))
        self.jobs[job_id] = job

    def changed(self, job_id: str, at: int, **changes: Any) -> None:
        """A PATCH of ``changes`` (``Spec`` fields) accepted at ``at``."""
        job = self.jobs[job_id]
        current = job.eras[-1]
        current.until = at
        job.eras.append(Era(replace(current.spec, **changes), at, None, current.anchor))

    def paused(self, job_id: str, at: int) -> None:
        job = self.jobs[job_id]
        if not job.pauses or job.pauses[-1][1] is not None:
            job.pauses.append([at, None])

    def resumed(self, job_id: str, at: int) -> None:
        job = self.jobs[job_id]
        if job.pauses and job.pauses[-1][1] is None:
            job.pauses[-1][1] = at

    def deleted(self, job_id: str, at: int) -> None:
        self.jobs[job_id].deleted = at

    def triggered(self, job_id: str, key: str | None = None, at: int | None = None) -> None:
        """A manual trigger asked at ``at`` (epoch ms; None: not known), with Idempotency-Key ``key``."""
        job = self.jobs[job_id]
        if at is not None:
            job.triggered_at.add(at)
        if key is None:
            job.triggers += 1
        else:
            job.trigger_keys.add(key)

    def backfilled(self, job_id: str, start: int, end: int, at: int) -> None:
        """A backfill of ``[start, end)`` asked at ``at``, of the spec in force then (the last one written:
        a PATCH in the same millisecond after it does not change what it asked for)."""
        job = self.jobs[job_id]
        job.backfills.append(Backfill(start, end, at, job.eras[-1]))

    def rerun(self, job_id: str, scheduled_for: int, at: int) -> None:
        self.jobs[job_id].reruns.setdefault(scheduled_for, []).append(at)

    # --- what the product did -------------------------------------------------------------------------

    def ticked(self, at: int, *, complete: bool = True) -> None:
        """A tick with no fault, index lag or stall ran at ``at``. ``complete``: it read every due entry (its
        ``lag_ms`` is 0), so every job due by then was found; else it read a slice of a backlog and may have
        found any of them, or not (design §4.1)."""
        bisect.insort(self.reading_ticks, at)
        if complete:
            bisect.insort(self.clean_ticks, at)

    def sent(self, job_id: str, scheduled_for: int, at: int) -> None:
        """The scheduler sent the message of fire ``scheduled_for`` at ``at``."""
        self.sends.setdefault((job_id, scheduled_for), at)

    def try_started(self, job_id: str, rid: str, at: int) -> Try:
        """A target started a try of run ``rid`` at ``at``: checks overlap and a fire after a deletion."""
        job = self.jobs.get(job_id)
        scheduled_for = int(rid.rpartition("@")[2]) if rid.rpartition("@")[2].isdigit() else None
        rounds = (
            len(job.reruns.get(scheduled_for, [])) if job is not None and scheduled_for is not None else 0
        )
        started = Try(job_id, rid, at, rounds)
        running = [t for t in self.open.get(job_id, []) if t.ended is None]
        era = job.era_at(at) if job is not None else None
        if era is not None and era.spec.overlap in LOCKING and running:
            self.violations.append(
                f"overlap: a try of {rid} started at {from_ms(at)} while {running[0].run} runs"
                f" (overlap: {era.spec.overlap})"
            )
        self.open.setdefault(job_id, []).append(started)
        self.tries.append(started)
        self.by_run.setdefault(rid, []).append(started)
        return started

    def try_ended(self, started: Try, ok: bool, at: int) -> None:
        started.ended, started.ok = at, ok

    # --- judgement -------------------------------------------------------------------------------------

    def tries_of(self, rid: str) -> list[Try]:
        return self.by_run.get(rid, [])

    def classify(self, job: JobHistory, era: Era, fire: int, now: int) -> str:
        """``run`` (must run once), ``skip`` (must be recorded missed, never run), ``none`` (must neither run nor
        be recorded: paused over or deleted), ``either`` (may run once or be recorded missed), or ``pending``."""
        if job.deleted is not None and fire >= job.deleted - EDGE_MS:
            return "none" if fire > job.deleted else "either"
        if job.deleted is not None and fire >= job.deleted - DELETED_QUEUE_MS:
            return "either"  # its message may have waited on the queue until the job was deleted
        if job.paused_over(fire):
            return "none"
        if fire == era.since and fire in job.triggered_at and era is not job.eras[0]:
            return "none"  # a manual run holds the instant: the PATCH's schedule starts after it (design §2)
        if job.near_a_pause(fire) or (era.until is not None and fire >= era.until - EDGE_MS):
            return "either"
        sent = self.sends.get((job.job_id, fire))
        if sent is not None:
            return "either" if job.paused_between(fire, now) else "run"
        due = max(fire, era.since) if era.spec.one_off else fire
        index = bisect.bisect_right(self.clean_ticks, due)  # a tick at the same instant may precede the write
        if index == len(self.clean_ticks):
            return "pending"
        tick = self.clean_ticks[index]
        if (
            job.paused_between(fire, tick)
            or (era.until is not None and era.until <= tick)
            or (job.deleted is not None and job.deleted <= tick)  # deleted before any tick could find it
        ):
            return "either"
        earliest = self.reading_ticks[bisect.bisect_right(self.reading_ticks, due)]
        verdicts = {self._by_lateness(era, fire, late) for late in (earliest - due, tick - due)}
        return verdicts.pop() if len(verdicts) == 1 else "either"

    def _by_lateness(self, era: Era, fire: int, late: int) -> str:
        """``run``, ``skip`` or ``either`` for ``fire`` of ``era`` found ``late`` ms after its dispatch instant."""
        threshold = era.spec.threshold_ms()
        if late < threshold // 2:
            return "run"
        if late > threshold + threshold // 2:
            return "skip"
        backlog = len(era.fires(fire - threshold, fire)) // self.limits.max_runs_per_job
        band = min(BAND_MS + 1000 * (backlog + 1), threshold // 2)
        if late < threshold - band:
            return "run"
        if late > threshold + band:
            return "skip"
        return "either"

    def safety(self, rows: list[RunRow], now: int) -> list[str]:
        """Violations by the rows and tries so far (rows of jobs the oracle does not know are ignored)."""
        problems = list(self.violations)
        by_run = {row.run_id: row for row in rows}
        for row in rows:
            job = self.jobs.get(row.job_id)
            if job is not None:
                problems += self._row(job, row, now)
        succeeded: dict[str, int] = {}
        for t in self.tries:
            if t.ok:
                succeeded[t.run] = succeeded.get(t.run, 0) + 1
        for rid, count in succeeded.items():
            if count > 1:
                problems.append(f"{rid}: its target succeeded {count} times")
            row = by_run.get(rid)
            if row is not None and row.status.value in ("dead", "skipped"):
                problems.append(
                    f"{rid}: its try succeeded, the run is recorded {row.status.value}: {row.error}"
                )
        return problems

    def _row(self, job: JobHistory, row: RunRow, now: int) -> list[str]:
        fire, kind, status = row.scheduled_for, row.kind.value, row.status.value
        problems: list[str] = []
        tries = self.tries_of(row.run_id)
        if status == "skipped":
            round_ = len(job.reruns.get(fire, []))
            tried = [t for t in tries if t.round == round_]
            if tried:
                problems.append(
                    f"{row.run_id}: recorded skipped ({row.error}) after {len(tried)} tries of it ran"
                )
        if status == "skipped" and (row.error or "").startswith("overlap") and row.finished_at is not None:
            era_then = job.era_at(row.finished_at)
            waiting = WAITING.search(row.error or "")
            settled = (
                era_then is not None
                and era_then.since + EDGE_MS < row.finished_at  # not decided under the spec before a PATCH
            )
            overlap_then = era_then.spec.overlap if era_then is not None and settled else None
            if overlap_then == "replace":
                problems.append(f"{row.run_id}: skipped under replace: {row.error}")
            if overlap_then == "buffer_one" and (waiting is None or waiting.group(2) == row.run_id):
                problems.append(
                    f"{row.run_id}: skipped under buffer_one with no other fire waiting: {row.error}"
                )
        if kind == "manual":
            return problems
        era = job.owner_of(fire)
        if era is None and kind == "backfill":
            era = self._backfilled(job, fire)
        if era is None:
            problems.append(
                f"{row.run_id}: {from_ms(fire)} is a fire of no schedule the job had in force then ({status})"
            )
            return problems
        offset = jitter_offset_ms(job.job_id, era.spec.jitter_s)
        for t in tries:
            if t.started < fire + offset:
                problems.append(
                    f"{row.run_id}: a try started at {from_ms(t.started)}, before its fire plus jitter "
                    f"({from_ms(fire + offset)})"
                )
            if t.started > fire and job.paused_over(fire) and not job.requested(fire):
                problems.append(f"{row.run_id}: ran though the job was paused over its fire")
            if job.deleted is not None and fire > job.deleted:
                problems.append(f"{row.run_id}: ran a fire after the job's deletion")
        if status == "skipped" and (row.error or "").startswith("missed"):
            problems += self._missed(job, era, row, now)
        return problems

    @staticmethod
    def _backfilled(job: JobHistory, fire: int) -> Era | None:
        """The era a backfill asked for ``fire`` with: a window holding it, whose request's spec has that fire."""
        return next(
            (b.era for b in job.backfills if b.start <= fire < b.end and _is_fire(b.era.unbounded, fire)),
            None,
        )

    def _missed(self, job: JobHistory, era: Era, row: RunRow, now: int) -> list[str]:
        """A row (or summary) recording fires missed: none of them had to run, none was paused over."""
        problems = []
        last = row.skipped_through if row.skipped_through is not None else row.scheduled_for
        first = row.scheduled_for
        fires = era.fires(first, min(first + 200_000, last), 200) + era.fires(
            max(first, last - 200_000), last, 200
        )
        for fire in sorted(set(fires)):
            verdict = self.classify(job, era, fire, now)
            if verdict == "run":
                sent = self.sends.get((job.job_id, fire))
                why = (
                    f"it was sent at {from_ms(sent)}" if sent is not None else "a clean tick found it in time"
                )
                problems.append(f"{run_id(job.job_id, fire)}: recorded missed ({row.error}), but {why}")
            if verdict == "none" and job.paused_over(fire) and fire == first:
                problems.append(f"{run_id(job.job_id, fire)}: recorded missed while the job was paused")
        return problems

    def _owed(self, job: JobHistory, backfill: Backfill) -> list[int]:
        """The fires ``backfill`` must run: its spec's fires in the window dispatchable by the request (fire +
        jitter offset at or before it) that fell before its spec was written or that a schedule in force then
        had too, except a fire of the job's schedule no clean tick found before the request: the scheduler still
        holds it (it runs it or records it missed, judged by ``classify``), design §3.3."""
        era = backfill.era
        offset = jitter_offset_ms(job.job_id, era.spec.jitter_s)
        found = era.unbounded.fires(from_ms(backfill.start - 1), from_ms(backfill.end - 1), 20_000)
        owed = []
        for fire in (to_ms(f) for f in found):
            if fire + offset > backfill.asked:
                continue
            scheduled = any(e.owns(fire) for e in job.eras)
            index = bisect.bisect_right(self.clean_ticks, fire + offset)
            found_by_a_tick = index < len(self.clean_ticks) and self.clean_ticks[index] <= backfill.asked
            if (fire < era.since or scheduled) and (not scheduled or found_by_a_tick):
                owed.append(fire)
        return owed

    def liveness(self, rows: list[RunRow], now: int, *, settled_ms: int = 2_000) -> list[str]:
        """After the system settled: each fire that must run ran (a try, and a finished row), each that must be
        recorded missed is (a row or a summary's range), each trigger, backfill and re-run ran."""
        problems: list[str] = []
        for job in self.jobs.values():
            mine = [r for r in rows if r.job_id == job.job_id]
            by_fire = {r.scheduled_for: r for r in mine}
            ranges = [
                (r.scheduled_for, r.skipped_through if r.skipped_through is not None else r.scheduled_for)
                for r in mine
                if r.status.value == "skipped"
            ]
            oldest = now - self.retention_ms + 60_000 if self.retention_ms is not None else 0
            for era in job.eras:
                start = max(era.since - (LATE_ONE_OFF_MS if era.spec.one_off else 0), oldest)
                end = min(era.until if era.until is not None else now, now - settled_ms)
                for fire in _judged_fires(era, start, end):
                    verdict = self.classify(job, era, fire, now)
                    rid = run_id(job.job_id, fire)
                    row = by_fire.get(fire)
                    if row is not None and row.kind.value == "manual" and (job.job_id, fire) in self.sends:
                        problems.append(f"{rid}: a fire of the schedule was sent under a manual run's key")
                    if verdict == "run" and (
                        self._skipped_beside(by_fire.get(fire)) or _replaced(by_fire.get(fire))
                    ):
                        continue  # ``overlap: skip``: another try of the job ran then; ``replace``: a later fire ran
                    if verdict == "run" and not self.tries_of(rid) and not _dead_letter(by_fire.get(fire)):
                        problems.append(f"{rid}: a fire that must run ({era.spec.schedule}) never ran")
                    elif verdict == "run" and (row := by_fire.get(fire)) and row.status.value not in FINISHED:
                        problems.append(f"{rid}: must run; settled {row.status.value}")
                    recorded = any(a <= fire <= b for a, b in ranges)
                    if verdict == "skip" and not recorded and not _run_on_request(job, fire, by_fire):
                        problems.append(f"{rid}: a fire missed by {era.spec.missed} has no skipped record")
            problems += self._requests(job, by_fire)
            problems += self._waited(job, mine)
        return problems

    def _waited(self, job: JobHistory, rows: list[RunRow]) -> list[str]:
        """Under ``buffer_one``: each fire named as the one that waits when another was skipped ran after that skip
        (unless it ended without a try: dead-lettered, or its job deleted), and its first try from then on started
        after the holder's try then running had ended."""
        problems: list[str] = []
        by_run = {row.run_id: row for row in rows}
        for row in rows:
            found = WAITING.search(row.error or "") if _overlapped(row) else None
            if found is None or row.finished_at is None:
                continue
            holder, waiting = found.groups()
            later = sorted(t.started for t in self.tries_of(waiting) if t.started >= row.finished_at)
            if not later:
                ended = by_run.get(waiting)
                if (
                    job.deleted is None
                    and not _dead_letter(ended)
                    and waiting not in {t.run for t in self.tries}
                ):
                    problems.append(f"{waiting}: waited for the lock (buffer_one) and never ran")
                continue
            for t in self.tries_of(holder):
                if t.started <= later[0] and t.ended is not None and t.ended > later[0]:
                    problems.append(f"{waiting}: ran at {from_ms(later[0])} beside its holder {holder}")
        return problems

    def _skipped_beside(self, row: RunRow | None) -> bool:
        """A run recorded skipped by ``overlap: skip`` whose reason holds: the run it names as still running
        (``HOLDER``) had a try that started at or before the skip was recorded (design §5.4: a run of a job under
        ``skip`` that finds another run of the job running is recorded skipped, a backfilled one too)."""
        if not _overlapped(row) or row is None or row.finished_at is None:
            return False
        named = HOLDER.search(row.error or "")
        if named is None:
            return True  # the try that may yet start is described, not named: its lock was held then
        skipped_at = row.finished_at
        return any(t.started <= skipped_at for t in self.tries_of(named.group(1)))

    def _requests(self, job: JobHistory, by_fire: dict[int, RunRow]) -> list[str]:
        problems = []
        if job.deleted is not None:
            return problems
        manual = {t.run for t in self.tries if t.job_id == job.job_id and _manual(job, t.run)}
        manual |= {row.run_id for row in by_fire.values() if _dead_letter(row) and _manual(job, row.run_id)}
        manual |= {
            r.run_id
            for r in by_fire.values()
            if r.kind.value == "manual" and (self.tries_of(r.run_id) or self._skipped_beside(r))
        }
        if len(manual) < job.triggers + len(job.trigger_keys):
            problems.append(
                f"{job.job_id}: {len(manual)} manual runs ran for {job.triggers} triggers and "
                f"{len(job.trigger_keys)} keys"
            )
        for fire, asked in job.reruns.items():
            rid = run_id(job.job_id, fire)
            if not any(t.started >= asked[-1] for t in self.tries_of(rid)):
                problems.append(f"{rid}: re-run asked at {from_ms(asked[-1])} never ran")
            elif (row := by_fire.get(fire)) is None or row.status.value not in FINISHED:
                problems.append(f"{rid}: re-run ran but its run is {row.status.value if row else 'gone'}")
        for backfill in job.backfills:
            for fire in self._owed(job, backfill):
                tries = self.tries_of(run_id(job.job_id, fire))
                if any(t.started < backfill.asked for t in tries) or self._skipped_beside(by_fire.get(fire)):
                    continue
                if not any(t.started >= backfill.asked for t in tries):
                    problems.append(
                        f"{run_id(job.job_id, fire)}: backfilled at {from_ms(backfill.asked)} and never ran"
                    )
        return problems


def _is_fire(schedule: Schedule, instant: int) -> bool:
    return bool(schedule.fires(from_ms(instant - 1), from_ms(instant), 1))


def _judged_fires(era: Era, start: int, end: int) -> list[int]:
    """The era's fires in ``[start, end]`` liveness judges: all, or for a span over two hours its first and last
    hour (a downtime of days is judged at its edges, where the thresholds fall)."""
    if end - start <= 2 * HOUR_MS:
        return era.fires(start, end)
    return era.fires(start, start + HOUR_MS) + era.fires(end - HOUR_MS, end)


def _run_on_request(job: JobHistory, fire: int, by_fire: dict[int, RunRow]) -> bool:
    """A fire a backfill or a re-run asked for whose row is a run now, no longer its skipped record (whether it
    ran is judged with the requests)."""
    row = by_fire.get(fire)
    return job.requested(fire) and row is not None and row.status.value != "skipped"


def _replaced(row: RunRow | None) -> bool:
    """A run cancelled by a later fire of its job (``overlap: replace``)."""
    return row is not None and row.status.value == "cancelled" and row.cancelled_by == "jobsched:replace"


def _overlapped(row: RunRow | None) -> bool:
    """A run recorded skipped by ``overlap: skip`` (another try of its job was running)."""
    return row is not None and row.status.value == "skipped" and (row.error or "").startswith("overlap")


def _dead_letter(row: RunRow | None) -> bool:
    """A run SQS gave up on (dead-lettered) and the drain recorded dead: a visible failure, not a lost fire."""
    return row is not None and row.status.value == "dead" and "dead-letter" in (row.error or "")


def _manual(job: JobHistory, rid: str) -> bool:
    """Whether ``rid`` names no fire of the job's schedules (a manual trigger's run)."""
    tail = rid.rpartition("@")[2]
    return tail.isdigit() and job.owner_of(int(tail)) is None
