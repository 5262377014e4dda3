"""The sweeper (design §4.7): every minute, the runs nobody is looking after.

Unfinished runs carry ``sweep_pk``/``sweep_at`` (the sparse ``sweep`` index of the runs table, sharded
``sweep#0..SWEEP_SHARDS-1``); ``sweep_at`` is when the sweeper should next look at the run. Each pass reads
the index for ``sweep_at <= now`` (keys only), reads those rows consistently, and for each:

- ``queued`` overdue (``settings.sweep_queued_after_s`` past ``max(enqueued_at, dispatch_at)``: the scheduler
  crashed between saving and enqueueing, or the message was lost) or ``retrying`` overdue (that long past
  ``retry_at``: the retry message never came) -> re-enqueue. An extra copy is harmless: claims are
  conditional. The next look backs off (x2 per re-enqueue, at most ``MAX_SWEEP_BACKOFF_MS``), so a long
  queue backlog is not flooded with copies.
- ``running`` whose heartbeat stopped for ``settings.heartbeat_stale_s`` -> the worker is lost, which counts
  as a failed try: ``retrying`` with backoff (re-enqueued with the SQS delay) or ``dead`` when that was the
  last attempt (so a run that kills its worker ends dead, not looping). A deleted job's run is ``skipped``.
- fine (fresh heartbeat, retry not yet due) -> ``sweep_at`` pushed to when it could next need help.
- ``succeeded`` or ``dead`` -> first the runs of the job's downstream jobs (design §2.1: the worker stopped
  between the run's outcome and them; made once, by their key), then as below.
- ``dead`` with ``notify_pending`` (the worker died before its dead-run message/alert went out) -> send them.
- other finished rows still carrying sweep keys -> remove the keys.

Scheduled runs are not in the index on their happy path (design §4.7): a run's message is its record until a
worker's claim makes its row, and a lost worker's run is taken over by the redelivery of its message (the claim
keeps it invisible for the heartbeat's stale time only). What SQS gives up on ends in the run queue's
dead-letter queue (``maxReceiveCount`` deliveries), which each pass also drains (``dead_letters``, at most
``MAX_DEAD_LETTERS_PER_PASS``): a letter sent for an earlier round of its run (its ``enqueued_at`` before the
row's: the owner re-ran the run, or backfilled its fire, since; ``domain.runs.message_round_began``) is deleted
without effect, as that round's own message and the sweep index look after the run; otherwise a run with no row
or still ``queued`` is recorded ``dead`` (attempts as made, under a claim conditioned on the letter's round,
with its dead-run message and alert: a fire is never silently lost), a ``running`` one whose heartbeat is
stale is a lost worker's (as above), one still beating is looked at again next pass, and anything else (a
finished run, a ``retrying`` one the index covers) needs nothing: the letter is deleted. A ``running`` run under
the sweeper's own claim (``DEAD_LETTER_WORKER``: a pass stopped between that claim and the dead write) ran no try
under it: wherever it is found stale, it is recorded ``dead`` (never retried as a lost worker's).

Every write is conditioned on the state read, so a worker's concurrent claim or beat wins. Bounded work:
at most ``max_rows`` rows per pass (the rest wait for the next minute, oldest first). Metric ``RunsSwept``:
runs re-enqueued or taken from a lost worker.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from jobsched.clock import Clock
from jobsched.domain.retries import (
    DEAD_LETTER_WORKER,
    Failures,
    Outcome,
    dead_run,
    lost_worker_error,
    with_lost_try,
)
from jobsched.domain.runs import claim_message, message_round_began
from jobsched.models import Job, RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.limits import RunLimits
from jobsched.ports.metrics import RunMetrics
from jobsched.ports.run_messages import DeadLetter, RunMessage
from jobsched.ports.run_stores import DeadLetters, JobSpecs, RunSender, SweepRows
from jobsched.ports.runs import SWEEP_SHARDS, Owned, RunKey, RunRow, SweepDeferral, run_id

logger = logging.getLogger(__name__)

MAX_ROWS_PER_PASS = 1000
MAX_DEAD_LETTERS_PER_PASS = 100
MAX_SWEEP_BACKOFF_MS = 3_600_000
STALE_MARGIN_MS = 1_000


@dataclass
class SweepReport:
    """Counts of one pass (also logged)."""

    examined: int = 0
    requeued: int = 0
    lost_workers: int = 0
    dead: int = 0
    skipped: int = 0
    deferred: int = 0
    cleared: int = 0
    notified: int = 0
    dead_letters: int = 0
    conflicts: int = 0
    truncated: bool = False
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True, eq=False)
class Sweeper:
    """One pass over the sweep index (see the module docstring). ``failures`` is the worker's ``Failures``
    (retry with backoff or dead + notifications), so a lost worker's try ends exactly like a failed one."""

    settings: RunLimits
    runs: SweepRows
    jobs: JobSpecs
    queue: RunSender
    failures: Failures
    clock: Clock
    metrics: RunMetrics
    max_rows: int = MAX_ROWS_PER_PASS
    dead_letters: DeadLetters | None = None

    def sweep(self) -> SweepReport:
        """One pass. Requests: 1 query per shard (+1 per extra page), 1 BatchGetItem per 100 rows, 1
        conditional write per row acted on (2 for a dead run whose notifications are resent), 1 GetItem per
        distinct job with a lost worker, 1 SendMessageBatch per 10 re-enqueued runs; with ``dead_letters``, 1 ReceiveMessage (+1 per 10 letters), and per letter 1
        BatchGetItem, at most 1 conditional write (+ a dead run's notifications) and 1 DeleteMessage. Raises nothing for a single row's failure (logged, counted in ``errors``)."""
        now = self.clock()
        report = SweepReport()
        keys = self._due_keys(now, report)
        rows = self.runs.get_many(keys) if keys else []
        specs: dict[str, Job | None] = {}
        requeue: list[RunMessage] = []
        for row in rows:
            report.examined += 1
            try:
                self._sweep_row(row, now, report, requeue, specs)
            except Exception as error:
                logger.exception("sweeping a run failed", extra={"run_id": row.run_id})
                report.errors.append(f"{row.run_id}: {type(error).__name__}")
        self._drain_dead_letters(now, report, specs)
        if requeue:
            try:
                self.queue.send(requeue)
            except Exception as error:
                # sweep_at was already pushed: the next look (a few minutes on) enqueues them again.
                logger.exception("sweeper re-enqueue failed", extra={"runs": len(requeue)})
                report.errors.append(f"enqueue: {type(error).__name__}")
        swept = report.requeued + report.lost_workers
        if swept:
            self.metrics.runs_swept(swept)
        logger.info("sweep done", extra=report.as_dict())
        return report

    def _due_keys(self, now: int, report: SweepReport) -> list[RunKey]:
        keys: list[RunKey] = []
        # start at a shard that rotates each minute, so a pass cut short by max_rows starves no shard
        first = (now // 60_000) % SWEEP_SHARDS
        for shard in [(first + i) % SWEEP_SHARDS for i in range(SWEEP_SHARDS)]:
            cursor: Any = None
            while len(keys) < self.max_rows:
                page = self.runs.sweep_due(shard, now, limit=self.max_rows - len(keys), cursor=cursor)
                keys.extend(page.keys)
                cursor = page.cursor
                if not cursor:
                    break
            if len(keys) >= self.max_rows:
                report.truncated = True
                break
        return keys

    def _sweep_row(
        self,
        row: RunRow,
        now: int,
        report: SweepReport,
        requeue: list[RunMessage],
        specs: dict[str, Job | None],
    ) -> None:
        status = row.status
        job_id, scheduled_for = row.job_id, row.scheduled_for
        seen = row.sweep_at
        if seen is None:
            return  # left the index meanwhile
        after_ms = self.settings.sweep_queued_after_s * 1000
        if status in (RunStatus.QUEUED, RunStatus.RETRYING):
            if status is RunStatus.QUEUED:
                base = max(row.enqueued_at or 0, _first_set(row.dispatch_at, scheduled_for))
            else:
                base = row.retry_at or 0
            overdue_at = base + after_ms
            if now < overdue_at:
                self._defer(row, status, seen, overdue_at, report)
                return
            sweeps = row.sweeps + 1
            backoff = min(after_ms * 2 ** min(sweeps - 1, 20), MAX_SWEEP_BACKOFF_MS)
            if self.runs.defer_sweep(
                SweepDeferral(
                    RunKey(job_id, scheduled_for),
                    status=status,
                    seen_sweep_at=seen,
                    sweep_at_ms=now + backoff,
                    sweeps=sweeps,
                )
            ):
                requeue.append(RunMessage(job_id, scheduled_for, enqueued_at=now))
                report.requeued += 1
                logger.warning(
                    "run re-enqueued by the sweeper",
                    extra={
                        "run_id": run_id(job_id, scheduled_for),
                        "status": status,
                        "overdue_ms": now - base,
                        "sweeps": sweeps,
                    },
                )
            else:
                report.conflicts += 1
        elif status is RunStatus.RUNNING:
            heartbeat_at = _first_set(row.heartbeat_at, row.started_at, 0)
            stale_at = heartbeat_at + self.settings.heartbeat_stale_s * 1000
            if now < stale_at:
                self._defer(row, status, seen, stale_at + STALE_MARGIN_MS, report)
                return
            self._lost_worker(row, heartbeat_at, report, specs)
        elif status in (RunStatus.SUCCEEDED, RunStatus.DEAD) and not self._chained(row):
            report.errors.append(f"{row.run_id}: downstream runs not made")
        elif status is RunStatus.DEAD and row.notify_pending:
            self._renotify(row, now, report, specs)
        elif self.runs.clear_sweep(job_id, scheduled_for):
            report.cleared += 1
        else:
            report.conflicts += 1

    # --- the run queue's dead letters -------------------------------------------------------------------

    def _drain_dead_letters(self, now: int, report: SweepReport, specs: dict[str, Job | None]) -> None:
        """Handle up to ``MAX_DEAD_LETTERS_PER_PASS`` letters (see the module docstring); a letter is deleted
        once nothing more is owed for its run. Errors are logged and counted: the letter comes back."""
        if self.dead_letters is None:
            return
        try:
            letters = self.dead_letters.receive(MAX_DEAD_LETTERS_PER_PASS)
        except Exception as error:
            logger.exception("run dead-letter queue not read")
            report.errors.append(f"dead letters: {type(error).__name__}")
            return
        for letter in letters:
            try:
                if self._dead_letter(letter, now, report, specs):
                    self.dead_letters.delete(letter.receipt_handle)
            except Exception as error:
                logger.exception("dead letter not handled; it comes back", extra={"body": letter.body[:200]})
                report.errors.append(f"dead letter: {type(error).__name__}")

    def _dead_letter(
        self, letter: DeadLetter, now: int, report: SweepReport, specs: dict[str, Job | None]
    ) -> bool:
        """Settle the run of one dead letter; True when the letter may go."""
        message = letter.message
        if message is None:
            logger.error(
                "malformed message in the run dead-letter queue, dropped", extra={"body": letter.body[:200]}
            )
            return True
        report.dead_letters += 1
        rows = self.runs.get_many([message.key])
        row = rows[0] if rows else None
        if row is not None and not message_round_began(message, row):
            logger.info(
                "dead letter of an earlier round of its run dropped",
                extra={
                    "run_id": row.run_id,
                    "letter_enqueued_at": message.enqueued_at,
                    "round_enqueued_at": row.enqueued_at,
                },
            )
            return True
        if row is not None and row.status is RunStatus.RUNNING:
            heartbeat_at = _first_set(row.heartbeat_at, row.started_at, 0)
            if now < heartbeat_at + self.settings.heartbeat_stale_s * 1000:
                return False  # its worker still beats: look again at the next pass
            self._lost_worker(row, heartbeat_at, report, specs)
            return True
        if row is not None and row.status is not RunStatus.QUEUED:
            return True  # finished, or retrying (in the sweep index): nothing owed to this letter
        claim = claim_message(
            self.runs,
            message,
            worker=DEAD_LETTER_WORKER,
            now_ms=now,
            retry_due_by_ms=now,
            settings=self.settings,
            same_round=True,
        )
        before = claim.before
        if not claim.claimed or before is None:
            report.conflicts += 1
            return False  # a worker claimed it meanwhile: look again at the next pass
        owned = Owned(
            message.job_id, message.scheduled_for, before.attempt + 1, DEAD_LETTER_WORKER, owner=before.owner
        )
        try:
            job = self._job(message.job_id, specs)
            if job is None:
                if self.runs.skip(owned, now_ms=now, reason="job deleted; its run message was dead-lettered"):
                    report.skipped += 1
                return True
            deliveries = letter.receive_count or "too many"
            if self.failures.dead_lettered(owned, job, owned.attempt, deliveries) is Outcome.DEAD:
                report.dead += 1
        except StoreUnavailable:
            # The claim opened no try: give it back (the row as it was, as the worker does), so the letter, back at
            # a later pass, is settled again, and the claim is never taken for a lost worker's try (and retried).
            logger.warning("dead letter not settled; giving its claim back", extra={"run_id": owned.run_id})
            self.runs.give_back(owned, before=before)
            raise
        return True

    def _defer(self, row: RunRow, status: RunStatus, seen: int, sweep_at: int, report: SweepReport) -> None:
        if self.runs.defer_sweep(
            SweepDeferral(
                row.key,
                status=status,
                seen_sweep_at=seen,
                sweep_at_ms=sweep_at,
            )
        ):
            report.deferred += 1
        else:
            report.conflicts += 1

    def _job(self, job_id: str, specs: dict[str, Job | None]) -> Job | None:
        if job_id not in specs:
            specs[job_id] = self.jobs.get_spec(job_id)
        return specs[job_id]

    def _lost_worker(
        self, row: RunRow, heartbeat_at: int, report: SweepReport, specs: dict[str, Job | None]
    ) -> None:
        """A running run whose beats stopped: its try failed (retry with backoff, or dead)."""
        owned = Owned.of(row, with_heartbeat=True)
        if owned.heartbeat_at is None:
            report.conflicts += 1  # a running row always has heartbeat_at; nothing safe to condition on
            return
        job = self._job(owned.job_id, specs)
        if job is None:
            if self.runs.skip(owned, now_ms=self.clock(), reason="job deleted while its worker was lost"):
                report.skipped += 1
            else:
                report.conflicts += 1
            return
        if owned.worker == DEAD_LETTER_WORKER:
            outcome = self.failures.dead_lettered(owned, job, owned.attempt)
        else:
            error = lost_worker_error(owned.attempt, heartbeat_at, self.settings.heartbeat_stale_s)
            outcome = self.failures.failed_try(
                owned, job, error, tries=with_lost_try(row, error, self.clock())
            )
        if outcome is Outcome.LOST:
            report.conflicts += 1
            return
        report.lost_workers += 1
        if outcome is Outcome.DEAD:
            report.dead += 1

    def _chained(self, row: RunRow) -> bool:
        """Make the downstream runs of an ended run still in the sweep index (design §2.1: the worker stopped
        between its outcome and them, or a dead run owes its notifications); True when they exist (or the
        deployment makes none). False: the run stays in the index and a later pass tries again."""
        chains = self.failures.chains
        return chains is None or chains.settle(row.job_id, row.scheduled_for, row.status)

    def _renotify(self, row: RunRow, now: int, report: SweepReport, specs: dict[str, Job | None]) -> None:
        """Send a dead run's owed notifications. The resend is taken first: ``sweep_at`` moved on, conditioned on
        the one this pass saw, so a pass running at the same time (a scheduled event delivered twice, a retried
        invocation) does not send them too; if sending fails, that move is when it is tried again."""
        owned = Owned.of(row)
        if row.sweep_at is None or not self.runs.defer_sweep(
            SweepDeferral(
                row.key,
                status=RunStatus.DEAD,
                seen_sweep_at=row.sweep_at,
                sweep_at_ms=now + self.settings.sweep_queued_after_s * 1000,
            )
        ):
            report.conflicts += 1
            return
        job = self._job(owned.job_id, specs)
        dead = dead_run(owned, job, row.error or "", owned.attempt, _first_set(row.finished_at, now))
        if self.failures.notify(dead):
            report.notified += 1
        else:
            report.deferred += 1


def _first_set(*values: int | None) -> int:
    """The first of ``values`` that is not None (callers end with a default that is never None)."""
    return next(v for v in values if v is not None)
