"""Failed tries (shared by the worker and the sweeper): retry with backoff, or ``dead`` with its dead-run
message and owner alert."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from enum import StrEnum

from jobsched.clock import Clock, iso_utc
from jobsched.domain.alerting import Alerting
from jobsched.domain.chains import Chains
from jobsched.domain.outcomes import OutcomeWrite, write_once
from jobsched.domain.tries import with_try
from jobsched.models import Job, RunStatus
from jobsched.ports.limits import RunLimits
from jobsched.ports.metrics import RunMetrics
from jobsched.ports.run_messages import MAX_DELAY_S, DeadRun, RunMessage
from jobsched.ports.run_stores import DeadRunSink, RunSender, RunTransitions
from jobsched.ports.runs import DeadTransition, Owned, RetryTransition, RunRow
from jobsched.ports.targets import truncate
from jobsched.ports.tries import TryRecord

logger = logging.getLogger(__name__)

NOTIFY_RETRY_MS = 120_000
"""A dead run whose notifications are not confirmed within this is re-notified by the sweeper. Longer than a live
worker can still be sending them: its dead write, dead-run message, alert and notified mark are four calls, each
bounded by ``jobsched.aws.DEFAULT_CALLS`` (27 s with retries), 108 s in all; a shorter wait sent the owner a
second message and alert while the worker's were still on their way."""


DEAD_LETTER_WORKER = "sweeper:dead-letter"
"""The ``worker`` of the claim by which the sweeper records dead a run whose message was dead-lettered."""


class Outcome(StrEnum):
    """What one delivery did (the record handler's result)."""

    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    DEAD = "dead"
    SKIPPED = "skipped"
    DROPPED = "dropped"  # lost the claim: a duplicate or late delivery
    LOST = "lost"  # the run stopped being ours mid-try (the sweeper or a redelivery took it over)
    CANCELLED = "cancelled"  # an operator cancelled the run mid-try: the try was stopped (design §5.8)
    DEFERRED = "deferred"  # handed back to SQS: not claimed (too little time left), or the claim given back


def lost_worker_error(attempt: int, heartbeat_at: int | None, stale_s: int) -> str:
    """The error recorded for a try whose worker stopped beating (it counts as a failed try)."""
    since = f" since {iso_utc(heartbeat_at)}" if heartbeat_at is not None else ""
    return f"worker lost during attempt {attempt}: no heartbeat{since} (over {stale_s} s)"


def with_lost_try(row: RunRow, error: str, now_ms: int) -> tuple[TryRecord, ...]:
    """``row``'s tries with the try of its current claim recorded as failed with ``error`` at ``now_ms`` (epoch
    ms): a lost worker's try (attempt ``row.attempt``, started at ``row.started_at`` by ``row.worker``, in the
    row's round). It counts as a try, so it is recorded like one, whoever takes the run over (the redelivery's
    claim or the sweeper)."""
    record = TryRecord(row.attempt, row.started_at, now_ms, row.worker, error, round=row.reruns)
    return with_try(row.tries, record)


def dead_run(owned: Owned, job: Job | None, error: str, attempts: int, now_ms: int) -> DeadRun:
    """The ``DeadRun`` (dead-letter envelope + alert facts) of a run; ``job`` None when it was deleted."""
    return DeadRun(
        run_id=owned.run_id,
        job_id=owned.job_id,
        scheduled_for_ms=owned.scheduled_for,
        attempts=attempts,
        error=error,
        dead_at_ms=now_ms,
        owner=job.owner if job else owned.owner,
        job_name=job.name if job else None,
        schedule=job.schedule if job else None,
        timezone=job.timezone if job else None,
        target_type=job.target.type if job else None,
        alert=job.alerts.on_dead if job else True,
        input=job.input if job else None,
    )


# --- failed tries: retry with backoff, or dead with notifications (shared with the sweeper) ------------


@dataclass(kw_only=True, eq=False)
class Failures:
    """What happens after a failed try, for the worker and the sweeper alike.

    With attempts left (``attempt < retry.max_attempts``): ``retrying`` with ``retry_at = now + delay``,
    ``delay = min(backoff_s * 2**(attempt-1), max_backoff_s)`` seconds (``RetryPolicy.delay_s``, SQS caps
    it at 900 s), then the retry message with that SQS delay. Otherwise ``dead``, then (with ``chains``) the
    runs of the job's downstream jobs (design §2.1), then the dead-run message and the alert. State first,
    messages second: a crash in between is repaired by the sweeper.
    """

    runs: RunTransitions
    queue: RunSender
    dead_runs: DeadRunSink
    settings: RunLimits
    clock: Clock
    metrics: RunMetrics
    alerting: Alerting | None = None
    chains: Chains | None = None

    def failed_try(
        self,
        owned: Owned,
        job: Job,
        error: str,
        *,
        tries: tuple[TryRecord, ...] | None = None,
        write: OutcomeWrite = write_once,
        read_at_ms: int | None = None,
    ) -> Outcome:
        """Record the failed try ``owned.attempt`` of ``job``'s run: ``RETRYING``, ``DEAD``, or ``LOST``
        when the run is no longer ``owned`` (someone else moved it on). The run is recorded under the job's
        owner, so it is listed among the owner's failed runs (design §3.4). ``tries``: the run's tries with this
        one (written in the same write; None leaves them as stored). ``write`` performs the run-row write (the
        worker's retries it on transient errors: ``domain.outcomes``)."""
        error = truncate(error)
        owned = replace(owned, owner=job.owner)
        if owned.attempt >= job.retry.max_attempts:
            return self.dead(
                owned, job, error, attempts=owned.attempt, tries=tries, write=write, read_at_ms=read_at_ms
            )
        now = self.clock()
        delay_s = min(job.retry.delay_s(owned.attempt), MAX_DELAY_S)
        retry_at = now + delay_s * 1000
        change = RetryTransition(
            error=error,
            retry_at_ms=retry_at,
            sweep_at_ms=retry_at + self.settings.sweep_queued_after_s * 1000,
            tries=tries,
        )
        recorded = write(
            lambda: self.runs.retry(owned, change), status=RunStatus.RETRYING, attempt=owned.attempt
        )
        if not recorded:
            logger.warning(
                "failed try not recorded: the run is no longer ours", extra={"run_id": owned.run_id}
            )
            return Outcome.LOST
        self.metrics.run_retried()
        logger.warning(
            "run failed; retrying",
            extra={
                "run_id": owned.run_id,
                "job_id": owned.job_id,
                "attempt": owned.attempt,
                "max_attempts": job.retry.max_attempts,
                "retry_in_s": delay_s,
                "error": error,
            },
        )
        try:
            self.queue.send([RunMessage(owned.job_id, owned.scheduled_for, delay_s=delay_s, enqueued_at=now)])
        except Exception:
            logger.exception(
                "retry not enqueued; the sweeper re-enqueues it when due", extra={"run_id": owned.run_id}
            )
        return Outcome.RETRYING

    def dead_lettered(
        self, owned: Owned, job: Job, claim_attempt: int, deliveries: int | str | None = None
    ) -> Outcome:
        """Record dead a run whose message SQS dead-lettered, under a claim of the sweeper's own
        (``DEAD_LETTER_WORKER``, attempt ``claim_attempt``): that claim runs no try, so the run is recorded with
        the tries made before it (never taken for a lost worker's try, nor retried). ``owned``: the claim the
        run is recorded under: the sweeper's as it settles the letter (``deliveries``: how many SQS made, for
        the error), or, when a pass stopped between that claim and the dead write, the claim of whoever finds it
        stale (the sweeper's index pass, a worker given another copy of the message)."""
        made = claim_attempt - 1
        after = "" if deliveries is None else f" after {deliveries} deliveries"
        error = f"run message dead-lettered{after}" + (" without a try" if made == 0 else "")
        return self.dead(owned, job, error, attempts=made)

    def dead(
        self,
        owned: Owned,
        job: Job,
        error: str,
        *,
        attempts: int,
        tries: tuple[TryRecord, ...] | None = None,
        write: OutcomeWrite = write_once,
        read_at_ms: int | None = None,
    ) -> Outcome:
        """Record the run ``dead`` after ``attempts`` tries (``tries``: its tries with the last one, None: left
        as stored), then make its downstream runs (``Chains.dependents_of``: ``job`` as read at ``read_at_ms``,
        epoch ms, None: unknown, so read) and send its dead-run message and alert. Like a failed try, it is recorded under the job's
        owner (so it is listed among the owner's failed runs). ``write``: as in ``failed_try``."""
        error = truncate(error)
        owned = replace(owned, owner=job.owner)
        now = self.clock()
        change = DeadTransition(
            now_ms=now,
            error=error,
            final_attempt=attempts,
            notify_at_ms=now + NOTIFY_RETRY_MS,
            tries=tries,
        )
        recorded = write(lambda: self.runs.dead(owned, change), status=RunStatus.DEAD, attempt=attempts)
        if not recorded:
            logger.warning("dead run not recorded: the run is no longer ours", extra={"run_id": owned.run_id})
            return Outcome.LOST
        self.metrics.run_dead()
        logger.error(
            "run dead: out of attempts",
            extra={
                "run_id": owned.run_id,
                "job_id": owned.job_id,
                "owner": job.owner,
                "attempts": attempts,
                "error": error,
            },
        )
        if self.chains is None or self.chains.settle(
            owned.job_id, owned.scheduled_for, RunStatus.DEAD, self.chains.dependents_of(job, read_at_ms)
        ):
            self.notify(dead_run(owned, job, error, attempts, now))
        if self.alerting is not None:
            try:
                self.alerting.dead(job, owned.run_id)
            except Exception as failure:  # the run is recorded dead; its policy's extras are best effort
                logger.error(
                    "alert policy not applied", extra={"run_id": owned.run_id, "error": str(failure)}
                )
        return Outcome.DEAD

    def notify(self, dead: DeadRun) -> bool:
        """Send a dead run's dead-run message and alert, then clear its ``notify_pending`` mark.

        False when something failed (logged): the mark stays and the sweeper sends again (at least once).
        """
        try:
            self.dead_runs.notify(dead)
            self.runs.notified(dead.job_id, dead.scheduled_for_ms)
        except Exception:
            logger.exception(
                "dead-run notification failed; the sweeper will resend it", extra={"run_id": dead.run_id}
            )
            return False
        return True
