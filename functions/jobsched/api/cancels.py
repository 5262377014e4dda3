"""``POST /jobs/{id}/runs/{run_id}/cancel`` (``Cancels``): an operator ends an unfinished run (design §5.8).

One conditional write (``domain.cancels.cancel_run``) makes a ``queued``, ``retrying`` or ``running`` run
``cancelled``, with ``cancelled_by`` (the caller's principal), the optional ``reason`` and ``finished_at``; a
fire listed ``queued`` with no row yet (dispatched, not claimed: ``QueuedRuns``) first gets the row its claim
would make, so the claim of its message is refused and no try of it starts. The
answer is the run with ``stop``/``note`` saying what becomes of its try (``domain.cancels.Stop``): none starts,
a running ``shell``/``command`` try is terminated and an ``http`` one aborted by its worker within one heartbeat
interval, a ``lambda`` or ``sqs`` target cannot be recalled. A finished run (``succeeded``, ``dead``,
``skipped``) answers 409; a cancelled one answers as the first cancel did (idempotent, nothing written). A
``run_cancelled`` audit event names the caller, and an ``on_cancelled`` alert goes out when the job's policy
asks for it. The runs of a deleted job can be cancelled by its owner too (as they can be read).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.api.audit import AuditTrail
from jobsched.api.exceptions import RunNotCancellable, RunNotFound
from jobsched.api.queued_runs import QueuedRuns
from jobsched.api.reruns import scheduled_for_of
from jobsched.api.run_views import run_detail
from jobsched.api.schemas import RunCancel
from jobsched.clock import Clock
from jobsched.domain.alerting import cancelled_alert, publish_best_effort
from jobsched.domain.cancels import cancel_run, stop_note, stop_of
from jobsched.domain.runs import new_run
from jobsched.models import Job, JobEventKind, RunStatus
from jobsched.observability import logger
from jobsched.ports.alerts import AlertSink
from jobsched.ports.errors import NotFound
from jobsched.ports.jobs import JobRepository
from jobsched.ports.run_stores import RunHistory
from jobsched.ports.runs import RunFilter, RunKey, RunRow


@dataclass(frozen=True)
class Cancels:
    """Cancels of the owners' runs (``jobs``: the job store, ``runs``: the run store), recorded in ``audit``,
    alerted on ``alerts`` (None: no alerts); ``heartbeat_interval_s``: how soon a worker learns of a cancel
    (for the answer's note); ``retention_days``: how long the row of a cancelled queued fire is kept (a fire
    listed ``queued`` has no row until a claim: its cancel makes it); ``clock`` gives epoch ms (UTC)."""

    jobs: JobRepository
    runs: RunHistory
    audit: AuditTrail
    clock: Clock
    heartbeat_interval_s: int
    retention_days: int
    alerts: AlertSink | None = None

    def cancel_run(
        self, owner: str, job_id: str, run_id: str, *, actor: str, reason: str | None
    ) -> RunCancel:
        """Cancel the owner's run ``run_id`` of job ``job_id`` by ``actor`` with ``reason`` (see the module
        docstring). Raises ``RunNotFound`` (a malformed id, an absent run, another owner's job) and
        ``RunNotCancellable`` (409: the run has finished)."""
        scheduled_for = scheduled_for_of(job_id, run_id)
        if self.jobs.history_owner(job_id) != owner:
            raise RunNotFound(job_id, run_id)
        key = RunKey(job_id, scheduled_for)
        result = cancel_run(self.runs, key, now_ms=self.clock(), by=actor, reason=reason)
        if result.row is None and self._queue_listed(key):
            result = cancel_run(self.runs, key, now_ms=self.clock(), by=actor, reason=reason)
        row = result.row
        if row is None:
            raise RunNotFound(job_id, run_id)
        if row.status is not RunStatus.CANCELLED:
            raise RunNotCancellable(
                f"run {run_id} is {row.status.value}; only a queued, retrying or running run can be cancelled"
            )
        job = self._job(job_id)
        if result.done:
            self._record(row, job, actor)
        stop = stop_of(row, job)
        return RunCancel(
            **run_detail(row).model_dump(),
            stop=stop,
            note=stop_note(stop, row, job, heartbeat_interval_s=self.heartbeat_interval_s),
        )

    def _queue_listed(self, key: RunKey) -> bool:
        """Give run ``key`` its ``queued`` row when it has none and the job's listing shows it queued (a fire
        dispatched that no worker has claimed, ``QueuedRuns``), so that the cancel has a row to end; the row is
        the one the worker's claim would make (``enqueued_at`` its dispatch, which its message's send follows;
        kept ``retention_days``; out of the sweep index: its message is its record). Whether such a fire was found; one read of the job and of its rows about the fire, one
        conditional insert (a claim that made the row first wins: the cancel then finds that row)."""
        try:
            stored = self.jobs.get(key.job_id)
        except NotFound:
            return False
        where = RunFilter(since_ms=key.scheduled_for, until_ms=key.scheduled_for + 1)
        listed = QueuedRuns(self.runs, self.clock).of(stored, where, before_ms=None, floor_ms=None)
        if not listed:
            return False
        fire = listed[0]
        row = new_run(
            key.job_id,
            key.scheduled_for,
            now_ms=fire.dispatch_at if fire.dispatch_at is not None else self.clock(),
            retention_days=self.retention_days,
            dispatch_at_ms=fire.dispatch_at,
            sweep_after_ms=None,
            term=fire.term,
            owner=fire.owner,
        )
        self.runs.put_new(row)
        return True

    def _job(self, job_id: str) -> Job | None:
        """The job (None: deleted since)."""
        try:
            return self.jobs.get(job_id).job
        except NotFound:
            return None

    def _record(self, row: RunRow, job: Job | None, actor: str) -> None:
        """After a cancel: its audit event (once per run: keyed by the run) and, when the job asks, its alert."""
        at = row.finished_at if row.finished_at is not None else self.clock()
        detail = {"run_id": row.run_id, **({"reason": row.cancel_reason} if row.cancel_reason else {})}
        self.audit.record(
            self.audit.event(
                row.job_id, at, f"{row.run_id}#cancel", JobEventKind.RUN_CANCELLED, actor, detail
            )
        )
        if job is not None and job.alerts.on_cancelled and self.alerts is not None:
            publish_best_effort(self.alerts, cancelled_alert(job, row))
        logger.info(
            "run cancelled", job_id=row.job_id, run_id=row.run_id, actor=actor, was=row.cancelled_from
        )
