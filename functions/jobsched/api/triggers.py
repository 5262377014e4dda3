"""``POST /jobs/{id}/trigger`` (design §3): one manual run now, outside the schedule.

The run is keyed ``(job_id, now)`` like every run, so it takes the first free millisecond from now backwards
when ``now`` is one of the schedule's fire instants (those stay the scheduler's) or already a run; with an
``Idempotency-Key`` the run and the key are bound in one write, so a repeat names the same run.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.api.exceptions import ConcurrentChange
from jobsched.api.owned import OwnersRuns
from jobsched.api.run_views import run_view
from jobsched.clock import to_ms
from jobsched.domain import registration
from jobsched.domain.runs import new_run
from jobsched.models import JobEventKind, Run, RunKind, RunStatus, from_ms
from jobsched.observability import logger
from jobsched.ports.jobs import StoredJob
from jobsched.ports.run_messages import QueueSendError, RunMessage
from jobsched.ports.run_stores import RunSender
from jobsched.schedule.engine import ScheduleError, parse_schedule

TRIGGER_SLOTS = 5
"""A manual run takes the first free millisecond from now backwards (now, now - 1 ms, ...): the pair
(job_id, scheduled_for) is the run key, and a run is never started before its ``scheduled_for``, so a manual
run keyed even 1 ms after the request could be started early by a worker that receives it at once."""


@dataclass(frozen=True)
class Triggers(OwnersRuns):
    """Manual runs of the owners' jobs, on the parts ``OwnersRuns`` names."""

    def trigger(self, owner: str, job_id: str, actor: str, idempotency_key: str | None = None) -> Run:
        """Create one run of ``owner``'s job ``job_id`` now, outside its schedule (paused jobs too), and enqueue it;
        a ``triggered`` event by ``actor`` names the run.

        The run is ``(job_id, now)``, kind ``manual`` (``now`` - 1 ms, down to - 4 ms, when that instant is a fire
        of the schedule or already a run: ``TRIGGER_SLOTS``). If the enqueue fails the run stays ``queued`` and
        the sweeper enqueues it, so the call still succeeds. With ``idempotency_key`` the run is bound to the key in
        the same transaction as the run itself (``RunStore.put_new_keyed``): a retry after a failure anywhere past
        that write (the key's record not completed, the invocation died) names the same run, never a second one.
        Raises ``JobNotFound``, ``ConcurrentChange`` (no free slot, or the key's run is still being created)."""
        stored = self.owned.load(owner, job_id)
        now_ms = self.clock()
        fires = fire_instants_ms(stored, now_ms - TRIGGER_SLOTS + 1, now_ms)
        for slot in (now_ms - i for i in range(TRIGGER_SLOTS)):
            if slot in fires:
                continue
            row = new_run(
                job_id,
                slot,
                now_ms=now_ms,
                retention_days=self.settings.retention_days,
                kind=RunKind.MANUAL,
                sweep_after_ms=self.settings.sweep_queued_after_s * 1000,
                owner=owner,
            )
            if idempotency_key is None:
                if self.runs.put_new(row) is None:
                    break
                continue
            inserted = self.runs.put_new_keyed(row, owner=owner, idempotency_key=idempotency_key)
            if inserted.key_used:
                return self._keyed_run(job_id, inserted.key_run_at, actor)
            if inserted.created:
                break
        else:
            raise ConcurrentChange(f"job {job_id} was triggered many times this millisecond; retry")
        run = run_view(row)
        send_manual(self.queue, run)
        self._record_triggered(run, actor)
        logger.info("job triggered", job_id=job_id, run_id=run.id, owner=owner)
        return run

    def _keyed_run(self, job_id: str, scheduled_for: int | None, actor: str) -> Run:
        """The run an Idempotency-Key created earlier (``scheduled_for``, epoch ms; None: not readable), sent
        again if it is still ``queued`` (the first request may have died before sending it; a duplicate message
        loses the worker's claim), and its ``triggered`` event written again (the same event: it lands on itself)."""
        row = self.runs.get(job_id, scheduled_for) if scheduled_for is not None else None
        if row is None:
            raise ConcurrentChange("the run of this Idempotency-Key is being created; retry")
        run = run_view(row)
        if run.status is RunStatus.QUEUED:
            send_manual(self.queue, run)
        self._record_triggered(run, actor)
        logger.info("trigger replayed from its key", job_id=job_id, run_id=run.id)
        return run

    def _record_triggered(self, run: Run, actor: str) -> None:
        """The run's ``triggered`` event at the run's instant, keyed by the run (a repeat lands on itself)."""
        event = self.audit.event(
            run.job_id, to_ms(run.scheduled_for), run.id, JobEventKind.TRIGGERED, actor, {"run_id": run.id}
        )
        self.audit.record(event)


def send_manual(queue: RunSender, run: Run) -> None:
    """Send a saved run's message (``enqueued_at``: the run's, when its round was queued); a refused send leaves
    it ``queued`` in the sweep index for the sweeper."""
    enqueued_at = to_ms(run.enqueued_at) if run.enqueued_at is not None else None
    try:
        queue.send(
            [RunMessage(job_id=run.job_id, scheduled_for=to_ms(run.scheduled_for), enqueued_at=enqueued_at)]
        )
    except QueueSendError as error:
        logger.warning(
            "manual run saved but not enqueued; the sweeper will enqueue it", run_id=run.id, error=str(error)
        )


def fire_instants_ms(stored: StoredJob, first_ms: int, last_ms: int) -> set[int]:
    """The job's scheduled fires in ``[first_ms, last_ms]`` (epoch ms), which a manual run must not take.

    The run key ``(job_id, scheduled_for)`` is shared by scheduled and manual runs: a manual run keyed at a
    fire instant would stand in for that fire (the scheduler's put is refused) and the fire would never run.
    The schedule is read as the scheduler reads it (rates anchored at ``anchor_at``, bounded by ``end_at``). A stored schedule that no
    longer parses has no fires the scheduler could run: empty set.
    """
    job, state = stored.job, stored.state
    if job.schedule is None:  # a job that runs after another has no fires (design §2.1)
        return set()
    anchor_ms = state.anchor_at if state and state.anchor_at is not None else registration.anchor_ms(job)
    try:
        schedule = parse_schedule(job.schedule, job.timezone, start_at=from_ms(anchor_ms), end_at=job.end_at)
    except ScheduleError as error:
        logger.warning("stored schedule does not parse", job_id=job.id, error=error.message)
        return set()
    fires = schedule.fires(from_ms(first_ms - 1), from_ms(last_ms), last_ms - first_ms + 1)
    return {to_ms(fire) for fire in fires}
