"""``POST /jobs/{id}/backfill`` (design §3.3): run a job's past fires that have no run yet, at a bounded rate.

The window's fires come from ``domain.backfill``. Each fire without a run gets one (kind ``backfill``) by the
same conditional put that keeps one run per fire everywhere, so a repeated call, or a fire the scheduler or a
worker recorded meanwhile, creates nothing new. The messages are spread over time with SQS delivery delays
(``Settings.backfill_rate_per_s``) and each run's sweep deadline follows its delay, so a lost send is re-sent
by the sweeper, not rushed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from jobsched.api.audit import AuditTrail
from jobsched.api.exceptions import InvalidInput
from jobsched.api.schemas import BackfillRequest, BackfillResult
from jobsched.clock import Clock, from_ms, to_ms
from jobsched.domain import registration
from jobsched.domain.backfill import (
    BackfillWindowError,
    backfill_fires,
    backfill_schedule,
    dispatch_delay_s,
    split_scheduler_fires,
)
from jobsched.domain.runs import new_run, rerun_request
from jobsched.models import JobEventKind, RunKind, RunStatus
from jobsched.observability import logger
from jobsched.ports.jobs import StoredJob
from jobsched.ports.run_messages import QueueSendError, RunMessage
from jobsched.ports.run_stores import RunHistory, RunSender
from jobsched.ports.runs import RunKey, RunRow
from jobsched.schedule.engine import Schedule, ScheduleError
from jobsched.settings import Settings


@dataclass(frozen=True)
class Backfiller:
    """Backfills on the run store ``runs`` and queue ``queue``; ``clock`` gives epoch ms (UTC)."""

    settings: Settings
    runs: RunHistory
    queue: RunSender
    audit: AuditTrail
    clock: Clock

    def backfill(self, stored: StoredJob, request: BackfillRequest, actor: str) -> BackfillResult:
        """Create a run for every fire of ``stored``'s schedule in ``[start, end)`` that has none, re-run those
        recorded ``skipped`` (``RunHistory.rerun``; the first fire of a summary row too, the summary's fires after
        the window kept skipped), and send them at the deployment's backfill rate; record a ``backfilled`` event
        by ``actor``. Fires the scheduler has not dispatched yet are left to it and counted in the answer
        (``domain.backfill.split_scheduler_fires``).

        Raises ``InvalidInput`` naming ``start`` (before 1970), ``end`` (not after ``start``, after now, or more
        than 1,000 fires) or ``schedule`` (the stored schedule no longer parses).
        """
        job, now_ms = stored.job, self.clock()
        start_ms, end_ms = to_ms(request.start), to_ms(request.end)
        anchor_ms = stored.state.anchor_at if stored.state and stored.state.anchor_at is not None else None
        try:
            schedule = backfill_schedule(
                job, anchor_ms if anchor_ms is not None else registration.anchor_ms(job)
            )
            window = backfill_fires(schedule, start_ms, end_ms, now_ms)
        except (BackfillWindowError, ScheduleError) as error:
            raise InvalidInput(error.field, error.message) from None
        fires, left = split_scheduler_fires(window, stored.state, now_ms)
        rows = self.runs.rows_between(job.id, fires[0], fires[-1], 2 * len(fires)) if fires else []
        recorded = {row.scheduled_for: row for row in rows}
        sent: list[RunMessage] = []  # oldest first, as the fires are
        created = 0
        for fire in fires:
            delay_s = dispatch_delay_s(len(sent), self.settings.backfill_rate_per_s)
            sweep_after_ms = (delay_s + self.settings.sweep_queued_after_s) * 1000
            found = recorded.get(fire)
            if found is None:
                row = new_run(
                    job.id,
                    fire,
                    now_ms=now_ms,
                    retention_days=self.settings.retention_days,
                    kind=RunKind.BACKFILL,
                    dispatch_at_ms=now_ms + delay_s * 1000,
                    sweep_after_ms=sweep_after_ms,
                    owner=job.owner,
                )
                # the existing row when the fire has one the batch read left out (past its limit, or new since)
                found = self.runs.put_new(row)
                if found is None:
                    created += 1
                    sent.append(
                        RunMessage(job_id=job.id, scheduled_for=fire, delay_s=delay_s, enqueued_at=now_ms)
                    )
                    continue
            if found.status is not RunStatus.SKIPPED:
                continue
            if found.skipped_count:
                self._keep_summary_rest(found, schedule, end_ms, now_ms)
            rerun = rerun_request(
                RunKey(job.id, fire),
                now_ms=now_ms,
                sweep_at_ms=now_ms + sweep_after_ms,
                retention_days=self.settings.retention_days,
                summary=bool(found.skipped_count),
            )
            if self.runs.rerun(rerun).done:
                sent.append(
                    RunMessage(job_id=job.id, scheduled_for=fire, delay_s=delay_s, enqueued_at=now_ms)
                )
        self._send(sent)
        result = BackfillResult(
            count=len(sent),
            created=created,
            rerun=len(sent) - created,
            fires=len(window),
            existing=len(fires) - len(sent),
            left_to_scheduler=len(left),
            first=from_ms(sent[0].scheduled_for) if sent else None,
            last=from_ms(sent[-1].scheduled_for) if sent else None,
        )
        detail = {"start": request.start.isoformat(), "end": request.end.isoformat(), "count": result.count}
        if left:
            detail["left_to_scheduler"] = len(left)
        # a key of its own: another backfill in the same millisecond (the next window) must not replace it
        key = f"backfill-{now_ms}-{uuid.uuid4().hex[:12]}"
        event = self.audit.event(job.id, now_ms, key, JobEventKind.BACKFILLED, actor, detail)
        self.audit.record(event)
        logger.info("job backfilled", job_id=job.id, fires=len(fires), runs_created=created)
        return result

    def _keep_summary_rest(self, summary: RunRow, schedule: Schedule, end_ms: int, now_ms: int) -> None:
        """Before a backfill re-runs the first fire of a skipped ``summary`` row (which then stands for that fire
        alone), record the summary's fires at or after the window's ``end_ms`` (epoch ms) as one skipped row (a
        summary again when several) at the first of them, so they stay visible as skipped. The fires inside the
        window get runs of their own (they have no rows: a summary never overlaps a run). A refused put (that
        fire has a row) is left as it is."""
        through = summary.skipped_through
        if through is None or through < end_ms:
            return
        following = schedule.next_fire(from_ms(end_ms - 1))
        if following is None or to_ms(following) > through:
            return
        first = to_ms(following)
        count = 1 + schedule.count_fires(following, from_ms(through), cap=2**62)
        self.runs.put_new(
            new_run(
                summary.job_id,
                first,
                now_ms=now_ms,
                retention_days=self.settings.retention_days,
                status=RunStatus.SKIPPED,
                dispatch_at_ms=first + (summary.dispatch_at or summary.scheduled_for) - summary.scheduled_for,
                term=summary.term,
                skipped_count=count if count > 1 else None,
                skipped_through=through if count > 1 else None,
                error=summary.error,
                owner=summary.owner,
            )
        )

    def _send(self, messages: list[RunMessage]) -> None:
        """Send the runs' messages; those SQS refuses stay ``queued`` for the sweeper (after their delay)."""
        if not messages:
            return
        try:
            self.queue.send(messages)
        except QueueSendError as error:
            logger.warning(
                "backfill runs saved but not all enqueued; the sweeper will", failed=len(error.failed)
            )
