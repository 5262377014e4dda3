"""The API's use cases on one run (``Reruns``): read it with its tries, and re-run a failed one.

- ``GET /jobs/{id}/runs/{run_id}``: the run with ``attempts`` (its current round's tries) and
  ``previous_attempts`` (earlier rounds'). ``run_id`` is ``<job_id>@<scheduled_for epoch ms>``
  (``ports.runs.run_id``); a malformed id, another job's, or a job of another owner answers 404 as an absent
  run does. A deleted job's runs stay readable by its owner until retention, as in the listing.
- ``POST /jobs/{id}/runs/{run_id}/retry``: a ``dead`` or ``skipped`` run goes back on the queue with the same run
  id and ``scheduled_for`` (so its target gets the same idempotency key) and a fresh set of attempts: one
  conditional write (``RunHistory.rerun``), then its message; if the message cannot be sent the run stays
  ``queued`` in the sweep index and the sweeper sends it. The earlier tries stay in the run's history
  (``previous_attempts``, each with its ``round``). A ``succeeded``, ``queued``, ``running`` or ``retrying`` run
  answers 409, as does a dead run whose dead-run notification is still being sent (for about a minute at most;
  re-running it then would lose its alert) and a summary row of several skipped fires. An ``run_retried`` audit
  event names the caller. With ``Idempotency-Key`` a repeat returns the first answer: the stored response while
  the key's record lasts (24 h), and in any case the run itself, which carries a digest of the last re-run's key
  written with the re-run (a repeat after a failure past that write is a replay, not a 409).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from jobsched.api import triggers
from jobsched.api.exceptions import RunNotFound, RunNotRetryable
from jobsched.api.owned import OwnersRuns
from jobsched.api.run_views import run_detail
from jobsched.domain.runs import rerun_request
from jobsched.models import JobEventKind, RunDetail, RunStatus
from jobsched.observability import logger
from jobsched.ports.runs import RunKey, RunRow

RUN_ID_PATTERN = re.compile(r"^(j_[0-9a-f]{20})@(0|[1-9][0-9]{0,14})$")
"""A run id as ``ports.runs.run_id`` makes it: the job id, ``@``, the ``scheduled_for`` epoch ms in ASCII digits
without a leading zero, matched whole (``fullmatch``): no other spelling of the number names the run."""


@dataclass(frozen=True)
class RetryResult:
    """The re-run run, and whether it is the stored answer of an earlier request with the same key."""

    run: RunDetail
    replayed: bool = False


def scheduled_for_of(job_id: str, run_id: str) -> int:
    """The ``scheduled_for`` (epoch ms) named by ``run_id`` of job ``job_id``. Raises ``RunNotFound`` for a
    malformed id or one of another job."""
    matched = RUN_ID_PATTERN.fullmatch(run_id)
    if matched is None or matched.group(1) != job_id:
        raise RunNotFound(job_id, run_id)
    return int(matched.group(2))


@dataclass(frozen=True)
class Reruns(OwnersRuns):
    """Reads and re-runs of the runs of the owners' jobs, on the parts ``OwnersRuns`` names."""

    def get_run(self, owner: str, job_id: str, run_id: str) -> RunDetail:
        """The owner's run ``run_id`` of job ``job_id`` with its tries. Raises ``RunNotFound``."""
        scheduled_for = scheduled_for_of(job_id, run_id)
        if self.owned.jobs.history_owner(job_id) != owner:
            raise RunNotFound(job_id, run_id)
        row = self.runs.get(job_id, scheduled_for)
        if row is None:
            raise RunNotFound(job_id, run_id)
        return run_detail(row)

    def retry_run(
        self,
        owner: str,
        job_id: str,
        run_id: str,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
    ) -> RetryResult:
        """Re-run the owner's ``dead`` or ``skipped`` run (see the module docstring), by ``actor`` (default: the
        owner). Raises ``JobNotFound`` (the job is absent, deleted or another owner's), ``RunNotFound``,
        ``RunNotRetryable`` (409), and the idempotency errors of ``IdempotencyKeys.run``."""
        by = actor or owner
        if idempotency_key is None:
            return RetryResult(self._retry(owner, job_id, run_id, by, None))
        outcome = self.owned.keys().run(
            owner,
            idempotency_key,
            {"op": "retry_run", "job_id": job_id, "run_id": run_id},
            lambda: {
                "run": self._retry(owner, job_id, run_id, by, _digest(owner, idempotency_key)).model_dump(
                    mode="json"
                )
            },
        )
        return RetryResult(RunDetail.model_validate(outcome.result["run"]), replayed=outcome.replayed)

    def _retry(self, owner: str, job_id: str, run_id: str, actor: str, key_digest: str | None) -> RunDetail:
        """Re-run the run once (``RunHistory.rerun``) and send it; ``key_digest``: the digest of the request's
        key, written with the re-run (None without a key). Raises as :meth:`retry_run`."""
        self.owned.load(owner, job_id)
        scheduled_for = scheduled_for_of(job_id, run_id)
        now = self.clock()
        result = self.runs.rerun(
            rerun_request(
                RunKey(job_id, scheduled_for),
                now_ms=now,
                sweep_at_ms=now + self.settings.sweep_queued_after_s * 1000,
                retention_days=self.settings.retention_days,
                key_digest=key_digest,
            )
        )
        row = result.row
        if row is None:
            raise RunNotFound(job_id, run_id)
        if not result.done:
            if key_digest is None or row.rerun_key != key_digest:
                raise _refusal(row, now)
            logger.info("run retry replayed from its key", run_id=run_id)
        detail = run_detail(row)
        if row.status is RunStatus.QUEUED:
            triggers.send_manual(self.queue, detail)
        # a replay's event lands on the first one
        at = row.enqueued_at if row.enqueued_at is not None else now
        key = f"{run_id}#{row.reruns}"
        self.audit.record(
            self.audit.event(job_id, at, key, JobEventKind.RUN_RETRIED, actor, {"run_id": run_id})
        )
        logger.info("run retried", job_id=job_id, run_id=run_id, owner=owner, reruns=row.reruns)
        return detail


NOTIFICATION_WAIT_S = 60
"""The sweeper's period (s): it is started once a minute, and sends a dead run's owed notifications at the first
pass once the row's ``sweep_at`` is due (``domain.retries.NOTIFY_RETRY_MS`` after the dead write)."""


def _refusal(row: RunRow, now_ms: int) -> RunNotRetryable:
    """Why ``row`` cannot be re-run at ``now_ms`` (epoch ms) (the 409), temporary (with ``retry_after_s``) only
    while a dead run's notification is still being sent: then ask again after its ``sweep_at`` (when the sweeper
    resends it, if the worker could not) plus one sweeper period."""
    if row.status is RunStatus.DEAD:
        due_in_s = (
            -(-(row.sweep_at - now_ms) // 1000) if row.sweep_at is not None and row.sweep_at > now_ms else 0
        )
        wait_s = due_in_s + NOTIFICATION_WAIT_S
        return RunNotRetryable(
            f"run {row.run_id} is dead but its dead-run notification is still being sent; retry in {wait_s} s",
            retry_after_s=wait_s,
        )
    if row.status is RunStatus.SKIPPED:
        return RunNotRetryable(
            f"run {row.run_id} stands for {row.skipped_count} skipped fires through its skipped_through; "
            "only one run can be retried"
        )
    return RunNotRetryable(
        f"run {row.run_id} is {row.status.value}; only a dead or skipped run can be retried"
    )


def _digest(owner: str, idempotency_key: str) -> str:
    """What the run keeps of the re-run's ``Idempotency-Key``: 16 hex digits of ``sha256(owner, key)``."""
    return hashlib.sha256(f"{owner}\0{idempotency_key}".encode()).hexdigest()[:16]
