"""Alert policies (design §5.6): what a job's owner hears about, besides a dead run's alert, and the pause a
job gives itself after too many dead runs in a row.

Each alert goes on the alerts topic with ``owner``, ``job_id`` and ``kind`` attributes (``late``, ``skipped``,
``cancelled``, ``failures``, ``auto_paused``; ``dead`` is sent with the dead-run message). Alerts are best effort after the
run's state is recorded: a publish that fails is logged and never changes the run's outcome. The streak of
dead runs is read from the job's own history (newest first; runs still open or skipped neither count nor
break it; a resume starts a new streak), so it needs no counter of its own and costs nothing on the happy path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Protocol

from jobsched.clock import Clock, from_ms, iso_utc, to_ms
from jobsched.models import Job, JobEventKind, RunStatus, paused_fields
from jobsched.ports.alerts import Alert, AlertSink
from jobsched.ports.errors import Conflict, NotFound
from jobsched.ports.jobs import AuditEvent, JobRepository, Rewrite, change_key
from jobsched.ports.runs import RunRow

logger = logging.getLogger(__name__)

SYSTEM_ACTOR = "jobsched"
"""The actor of what jobsched does by itself (``paused_by`` of an automatic pause, its audit event)."""
STREAK_WINDOW = 101
"""Runs read to measure a streak: one more than the largest threshold a policy may set (100)."""


class RecentRuns(Protocol):
    """A job's history, newest first (the run store)."""

    def list_for_job(self, job_id: str, limit: int) -> tuple[list[RunRow], int | None]: ...


def alert(kind: str, job_id: str, owner: str, subject: str, body: str) -> Alert:
    """An alert with a one-line printable ASCII subject of at most 100 characters (``jobsched: <subject>``)."""
    line = "".join(c if c.isprintable() and c.isascii() else "?" for c in f"jobsched: {subject}")
    return Alert(kind, job_id, owner, line[:100], body)


def skipped_fires_alert(job_id: str, owner: str, count: int, reason: str) -> Alert:
    """The ``skipped`` alert of ``count`` fires the scheduler recorded skipped for job ``job_id`` (``reason``:
    the first skipped row's, e.g. missed while the scheduler was down)."""
    return alert(
        "skipped",
        job_id,
        owner,
        f"{count} fire(s) of {job_id} skipped",
        f"The scheduler recorded {count} fire(s) of job {job_id} as skipped: {reason}. They are in the job's "
        "run history (status skipped); POST /jobs/{id}/backfill runs them if they are still wanted.",
    )


def cancelled_alert(job: Job, row: RunRow) -> Alert:
    """The ``cancelled`` alert of ``job``'s run ``row``, cancelled by an operator (sent when the job's
    ``alerts.on_cancelled`` asks)."""
    why = f" ({row.cancel_reason})" if row.cancel_reason else ""
    return alert(
        "cancelled",
        job.id,
        job.owner,
        f"run of {job.name} cancelled",
        f"The run {row.run_id} of job {job.name} ({job.id}) was cancelled by {row.cancelled_by}{why} while "
        f"{(row.cancelled_from or row.status).value}.",
    )


def publish_best_effort(sink: AlertSink, alert: Alert) -> None:
    """Publish ``alert`` on ``sink``, logging (not raising) when it cannot be: alerts are best effort, the state
    they tell of (a run, a skipped fire) is recorded before them and never undone or blocked by them."""
    try:
        sink.publish(alert)
    except Exception as error:
        logger.error(
            "alert not published", extra={"job_id": alert.job_id, "kind": alert.kind, "error": str(error)}
        )


def dead_streak(rows: list[RunRow]) -> int:
    """How many runs in a row ended ``dead``, from the newest (``rows`` newest first): runs not finished yet
    (queued, running, retrying) and skipped ones are passed over; a succeeded run ends the streak."""
    streak = 0
    for row in rows:
        if row.status is RunStatus.DEAD:
            streak += 1
        elif row.status is RunStatus.SUCCEEDED:
            break
    return streak


@dataclass(kw_only=True, eq=False)
class Alerting:
    """Applies each job's ``alerts`` policy: ``sink`` publishes, ``runs`` gives the history a streak is read
    from, ``jobs`` takes the automatic pause (a conditional rewrite, with its audit event kept
    ``retention_days``). ``clock`` gives epoch ms (UTC)."""

    sink: AlertSink
    runs: RecentRuns
    jobs: JobRepository
    clock: Clock
    retention_days: int

    def started(self, job: Job, run_id: str, scheduled_for_ms: int, lateness_ms: int) -> None:
        """A run's first try started ``lateness_ms`` after ``scheduled_for``: a ``late`` alert past the policy's
        ``late_after_s``."""
        late_after_s = job.alerts.late_after_s
        if late_after_s is None or lateness_ms <= late_after_s * 1000:
            return
        self._publish(
            job,
            "late",
            f"run of {job.name} started {lateness_ms / 1000:.1f} s late",
            f"The run {run_id} of job {job.name} ({job.id}), scheduled for {iso_utc(scheduled_for_ms)}, started "
            f"{lateness_ms / 1000:.1f} s after its time (the job alerts past {late_after_s} s).",
        )

    def skipped(self, job: Job, run_id: str, reason: str) -> None:
        """A run of ``job`` was skipped by a worker: a ``skipped`` alert when the policy asks for one."""
        if job.alerts.on_skipped:
            self._publish(
                job,
                "skipped",
                f"run of {job.name} skipped",
                f"The run {run_id} of job {job.name} ({job.id}) was skipped: {reason}.",
            )

    def dead(self, job: Job, run_id: str) -> None:
        """After a run of ``job`` ended dead: the ``failures`` alert when the streak of dead runs reaches the
        policy's ``after_consecutive_failures``, and the automatic pause (with one ``auto_paused`` alert) once
        it reaches ``pause_after_consecutive_dead``. Reads the job's recent runs, and its recent events (for the
        last resume) only when the runs hold enough dead ones to reach a threshold."""
        policy = job.alerts
        if policy.after_consecutive_failures is None and policy.pause_after_consecutive_dead is None:
            return
        rows = self.runs.list_for_job(job.id, STREAK_WINDOW)[0]
        thresholds = [
            t
            for t in (policy.after_consecutive_failures, policy.pause_after_consecutive_dead)
            if t is not None
        ]
        if sum(row.status is RunStatus.DEAD for row in rows) < min(thresholds):
            return  # no streak among these rows can reach a threshold: skip reading the job's events
        resumed_at = self._resumed_at(job.id)
        streak = dead_streak(_since(rows, resumed_at))
        if streak == policy.after_consecutive_failures:
            self._publish(
                job,
                "failures",
                f"{job.name}: {streak} dead runs in a row",
                f"Job {job.name} ({job.id}) has had {streak} dead runs in a row; the last is {run_id}.",
            )
        threshold = policy.pause_after_consecutive_dead
        if threshold is not None and streak >= threshold and self._pause(job, rows):
            self._publish(
                job,
                "auto_paused",
                f"{job.name} paused after {streak} dead runs",
                f"Job {job.name} ({job.id}) paused itself after {streak} dead runs in a row (its alerts policy "
                f"pauses after {threshold}); the last is {run_id}. Resume it once the cause is fixed.",
            )

    def _resumed_at(self, job_id: str) -> int | None:
        """When the job was last resumed (epoch ms; its newest ``resumed`` event among the recent ones), or None."""
        events, _ = self.jobs.list_events(job_id, STREAK_WINDOW)
        return next((event.at for event in events if event.kind is JobEventKind.RESUMED), None)

    def _pause(self, job: Job, rows: list[RunRow]) -> bool:
        """Pause the job as ``jobsched`` for the streak of dead runs in ``rows`` (the job's history, newest
        first), unless it is paused or gone already, or its stored policy no longer pauses at that streak; True
        when this call paused it.

        The pause is conditioned on the streak it measures: after the job is read, its last resume is read
        (again), and only runs of ``rows`` that ended after it count (a resume that landed after ``rows`` or the
        first events were read restarts the streak). The rewrite is conditional on the job as read (its ``updated_at``),
        so a resume landing after that second read makes it fail and the loop measure again: an automatic pause
        never undoes a resume with dead runs that ended before it. Retried when a scheduler or an edit got
        between."""
        for _ in range(3):
            try:
                stored = self.jobs.get(job.id)
            except NotFound:
                return False
            current, state = stored.job, stored.state
            threshold = current.alerts.pause_after_consecutive_dead  # the owner may have changed it since
            if current.paused or state is None or threshold is None:
                return False
            resumed_at = self._resumed_at(job.id)
            streak = dead_streak(_since(rows, resumed_at))
            if streak < threshold:
                return False
            reason = f"paused by jobsched after {streak} dead runs in a row"
            now = self.clock()
            updated = max(now, to_ms(current.updated_at) + 1)
            paused = current.model_copy(
                update={
                    **paused_fields(SYSTEM_ACTOR, now, reason),
                    "updated_at": from_ms(updated),
                    "updated_by": SYSTEM_ACTOR,
                }
            )
            version = (state.version or 0) + 1
            event = AuditEvent(
                job.id,
                updated,
                change_key(version),
                JobEventKind.AUTO_PAUSED,
                SYSTEM_ACTOR,
                {"reason": reason, "dead_in_a_row": streak},
                updated // 1000 + self.retention_days * 86400,
            )
            try:
                self.jobs.replace(
                    Rewrite(
                        paused,
                        replace(state, paused=True, due=None, version=version),
                        to_ms(current.updated_at),
                        expected_state=(state.next_run_at, state.term),
                        event=event,
                    )
                )
            except Conflict:
                continue
            logger.warning("job paused itself", extra={"job_id": job.id, "dead_in_a_row": streak})
            return True
        return False

    def _publish(self, job: Job, kind: str, subject: str, body: str) -> None:
        publish_best_effort(self.sink, alert(kind, job.id, job.owner, subject, body))


def _since(rows: list[RunRow], resumed_at: int | None) -> list[RunRow]:
    """``rows`` that ended at or after a resume at ``resumed_at`` (epoch ms; None: all): a resume starts a new
    streak, so runs that ended before it do not count."""
    if resumed_at is None:
        return rows
    return [row for row in rows if (row.finished_at or row.scheduled_for) >= resumed_at]
