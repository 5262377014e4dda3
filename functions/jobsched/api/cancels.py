"""``POST /jobs/{id}/runs/{run_id}/cancel`` (``Cancels``): an operator ends an unfinished run (design §5.8).

One conditional write (``domain.cancels.cancel_run``) makes a ``queued``, ``retrying`` or ``running`` run
``cancelled``, with ``cancelled_by`` (the caller's principal), the optional ``reason`` and ``finished_at``. The
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
from jobsched.api.reruns import scheduled_for_of
from jobsched.api.run_views import run_detail
from jobsched.api.schemas import RunCancel
from jobsched.clock import Clock
from jobsched.domain.alerting import cancelled_alert, publish_best_effort
from jobsched.domain.cancels import cancel_run, stop_note, stop_of
from jobsched.models import Job, JobEventKind, RunStatus
from jobsched.observability import logger
from jobsched.ports.alerts import AlertSink
from jobsched.ports.errors import NotFound
from jobsched.ports.jobs import JobRepository
from jobsched.ports.run_stores import RunCancels
from jobsched.ports.runs import RunKey, RunRow


@dataclass(frozen=True)
class Cancels:
    """Cancels of the owners' runs (``jobs``: the job store, ``runs``: the run store), recorded in ``audit``,
    alerted on ``alerts`` (None: no alerts); ``heartbeat_interval_s``: how soon a worker learns of a cancel
    (for the answer's note); ``clock`` gives epoch ms (UTC)."""

    jobs: JobRepository
    runs: RunCancels
    audit: AuditTrail
    clock: Clock
    heartbeat_interval_s: int
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
        result = cancel_run(
            self.runs, RunKey(job_id, scheduled_for), now_ms=self.clock(), by=actor, reason=reason
        )
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
