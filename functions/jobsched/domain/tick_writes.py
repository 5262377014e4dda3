"""Steps 3-5 of a scheduler tick (``jobsched.domain.tick``): record the skipped fires, send the runs, move the
jobs on. Pure domain logic (design §4.2, §4.8) on the ports, composed into ``Scheduler`` as its :class:`TickWriter`.

A scheduled run gets no row here: the tick sends its message (the run's durable record until a worker's claim
creates the row, design §4.2), with the dispatch instant, the send time and the leader's term the claim
writes into the row. Skipped fires are rows (a conditional put each, or one summary row per range).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from jobsched.domain.alerting import publish_best_effort, skipped_fires_alert
from jobsched.domain.lease import LeaseLost
from jobsched.domain.planning import DueJob, FirePlan, SkipRow, next_fire_ms
from jobsched.domain.registration import due_entry, partition_of
from jobsched.domain.runs import new_run
from jobsched.domain.tick_records import TickConfig, TickResult, TickShared
from jobsched.models import RunStatus, from_ms
from jobsched.ports.alerts import AlertSink
from jobsched.ports.control import Guard
from jobsched.ports.errors import Conflict
from jobsched.ports.jobs import DueEntry, Move, SchedulingState
from jobsched.ports.lateness import LatenessLabels
from jobsched.ports.run_messages import QueueSendError, RunMessage
from jobsched.ports.run_stores import RunSender, RunWriter
from jobsched.ports.runs import RunRow

logger = logging.getLogger(__name__)

TIMER_BATCH = 25
"""Next due entries the tick files per request (DynamoDB's BatchWriteItem takes 25 items)."""


@dataclass
class JobWork:
    """One due job's progress through a tick; ``skipped``: the fires this tick recorded skipped for it; ``labels``:
    what its runs' lateness is counted under (``domain.lateness.labels_for``), carried by their messages."""

    plan: FirePlan
    to_send: list[RunMessage] = field(default_factory=list)
    new_runs: set[int] = field(default_factory=set)
    failed: bool = False
    sent: bool = True
    skipped: int = 0
    moved: bool = False
    labels: LatenessLabels | None = None


@dataclass(eq=False)
class TickWriter:
    """The writes of one scheduler partition's ticks: skipped rows (``runs``), run messages (``queue``), the jobs'
    next due entries and fenced moves (``jobs``), and the owners' ``skipped`` alerts (``alerts``, optional).

    ``shared``: the partition, its due index (``jobs``), the clock (epoch ms) and the pool that runs the parallel
    requests (``TickShared``); ``config``: the deployment's partitions, due shards, bucket width and retention.
    Remembers, while leading (until :meth:`forget`), per job whose runs this term sent but whose move did not land,
    the fires it may have dispatched (:meth:`unmoved_through`).
    """

    shared: TickShared
    _: KW_ONLY
    runs: RunWriter
    queue: RunSender
    config: TickConfig
    alerts: AlertSink | None
    _unmoved: dict[str, tuple[int, int]] = field(default_factory=dict, init=False, repr=False)
    """Per job: (the next_run_at planned from, the last dispatch instant sent)."""

    def forget(self) -> None:
        """Forget the jobs remembered unmoved (the lease was lost: the next term knows its own)."""
        self._unmoved = {}

    # --- 3. save ---------------------------------------------------------------------------------

    def _skip_item(self, job: DueJob, row: SkipRow, now_ms: int, term: int) -> RunRow:
        return new_run(
            job.job_id,
            row.scheduled_for,
            now_ms=now_ms,
            retention_days=self.config.retention_days,
            status=RunStatus.SKIPPED,
            dispatch_at_ms=row.scheduled_for + job.jitter_offset_ms,
            term=term,
            skipped_count=row.count if row.count > 1 else None,
            skipped_through=row.through if row.count > 1 else None,
            error=row.reason,
            owner=job.owner,
        )

    def save(self, works: list[JobWork], now_ms: int, guard: Guard, result: TickResult) -> None:
        """Record each job's skipped fires (:meth:`_save_skipped`) and queue its runs' messages in its
        ``JobWork.to_send`` (no row: the message is the run's record until a worker's claim creates it); a fire that
        already has a ``queued`` row is sent again. Counts into ``result``; a job whose writes fail is marked
        ``failed`` and left due. Raises ``LeaseLost``."""
        lock = threading.Lock()

        def save(work: JobWork) -> None:
            plan, job = work.plan, work.plan.job
            counts = {"created": 0, "existing": 0, "reenqueued": 0, "skipped": 0}

            def refused(fire: int, previous: RunRow) -> None:
                # A skipped fire already has a row: a worker's claim made it, or it is a manual run or a row a
                # scheduler of an earlier release saved at the tick; a queued one may never have been sent, so it
                # is sent again (a duplicate message loses the worker's claim).
                counts["existing"] += 1
                if previous.status is RunStatus.QUEUED:
                    counts["reenqueued"] += 1
                    work.to_send.append(
                        RunMessage(job.job_id, fire, enqueued_at=now_ms, owner=job.owner, labels=work.labels)
                    )

            try:
                for row in plan.skipped:
                    self._save_skipped(job, row, now_ms, guard, counts, refused)
                for fire in plan.runs:
                    term = guard.check()
                    # No row: the message is the run's durable record until a worker's claim creates the row
                    # (design §4.2). A fire sent again (a tick whose move did not land) is refused by the claim.
                    counts["created"] += 1
                    work.new_runs.add(fire)
                    work.to_send.append(
                        RunMessage(
                            job.job_id,
                            fire,
                            dispatch_at=fire + job.jitter_offset_ms,
                            enqueued_at=now_ms,
                            term=term,
                            owner=job.owner,
                            labels=work.labels,
                        )
                    )
            except LeaseLost:
                work.failed = True
                raise
            except Exception as error:
                work.failed = True
                logger.warning("run save failed", extra={"job_id": job.job_id, "error": str(error)})
            finally:
                work.skipped = counts["skipped"]
                with lock:
                    result.created += counts["created"]
                    result.existing += counts["existing"]
                    result.reenqueued += counts["reenqueued"]
                    result.skipped += counts["skipped"]

        run_all(self.shared.pool, save, works)

    def alert_skipped(self, works: list[JobWork]) -> None:
        """Each owner's ``skipped`` alert for the fires this tick recorded skipped, for the jobs that ask for it.
        Called once the tick's runs are sent and its jobs moved, so a slow or failing publish never holds them;
        published in parallel on the tick's pool, so a down SNS holds the scheduler about one call's bounds, not
        one per job; best effort (logged when it cannot be published; never when the owner is not known, as on
        states stored before it was kept)."""
        alerts = self.alerts
        if alerts is None:
            return

        due = [
            skipped_fires_alert(job.job_id, job.owner, work.skipped, work.plan.skipped[0].reason)
            for work in works
            if work.skipped and (job := work.plan.job).alert_on_skipped and job.owner is not None
        ]
        run_all(self.shared.pool, lambda alert: publish_best_effort(alerts, alert), due)

    def _save_skipped(
        self,
        job: DueJob,
        row: SkipRow,
        now_ms: int,
        guard: Guard,
        counts: dict[str, int],
        refused: Callable[[int, RunRow], None],
    ) -> None:
        """Record the skipped fires of ``row``. When its put is refused because a fire in its range already
        has a row (a leader that died saved it), the range is split around the rows that exist (one Query of
        the range): every fire of the range ends up with a row of its own or inside a summary, never lost."""
        previous = self.runs.put_new(self._skip_item(job, row, now_ms, guard.check()))
        if previous is None:
            counts["skipped"] += row.count
            return
        if row.count == 1:
            refused(row.scheduled_for, previous)
            return
        existing = self.runs.rows_between(job.job_id, row.scheduled_for, row.through, limit=10_000)
        schedule = job.parsed_schedule()
        cursor = row.scheduled_for - 1  # fires after cursor and before the next existing row are skipped
        for found in [*existing, RunRow(job.job_id, row.through + 1)]:
            bound = found.scheduled_for
            first = next_fire_ms(schedule, cursor, job_id=job.job_id)
            if first is not None and first < bound:
                gap_last = bound - 1
                count = 1 + schedule.count_fires(from_ms(first), from_ms(gap_last), cap=2**62)
                part = SkipRow(first, count, row.reason, gap_last if count > 1 else first)
                if self.runs.put_new(self._skip_item(job, part, now_ms, guard.check())) is None:
                    counts["skipped"] += count
            # an existing summary (an earlier tick's, whose move failed) already stands for its whole range
            cursor = max(cursor, bound, found.skipped_through or bound)
        for found in existing:
            refused(found.scheduled_for, found)

    # --- 4. enqueue ------------------------------------------------------------------------------

    def enqueue(self, works: list[JobWork], guard: Guard, result: TickResult) -> None:
        """Send the tick's messages in dispatch order, 10 per request: ``high`` first, then ``normal``, then
        ``low``; within a priority in the order of ``works`` (the tick's fair rounds between owners,
        ``dispatch_order``), each job's fires oldest first (design §4.10). A job whose message SQS did not accept
        is not moved (the next tick finds it due, its run queued, and enqueues it again)."""
        owner: dict[tuple[str, int], JobWork] = {}
        ranked: list[tuple[tuple[int, int, int], int, RunMessage]] = []
        for index, work in enumerate(works):
            job = work.plan.job
            for message in work.to_send:
                owner[(message.job_id, message.scheduled_for)] = work
                dispatch_at = message.scheduled_for + job.jitter_offset_ms
                ranked.append(((job.priority.rank, index, dispatch_at), dispatch_at, message))
        ranked.sort(key=lambda triple: triple[0])
        # one priority after the other: a priority's batches all answered before the next one's are sent
        phases: dict[int, list[tuple[int, RunMessage]]] = {}
        for (rank, _, _), dispatch_at, message in ranked:
            phases.setdefault(rank, []).append((dispatch_at, message))
        lock = threading.Lock()

        def send(batch: list[tuple[int, RunMessage]]) -> None:
            guard.check()
            refused: set[tuple[str, int]] = set()
            try:
                self.queue.send([m for _, m in batch])
            except QueueSendError as error:
                refused = {(m.job_id, m.scheduled_for) for m in error.failed}
                logger.warning("run messages refused", extra={"count": len(refused)})
            except Exception as error:
                refused = {(m.job_id, m.scheduled_for) for _, m in batch}
                logger.warning("run message batch failed", extra={"count": len(refused), "error": str(error)})
            sent_at = self.shared.clock()
            with lock:
                for dispatch_at, message in batch:
                    key = (message.job_id, message.scheduled_for)
                    work = owner[key]
                    if key in refused:
                        work.sent = False
                        continue
                    result.enqueued += 1
                    if message.scheduled_for in work.new_runs:
                        result.dispatch_lateness_ms.append(sent_at - dispatch_at)
                        if message.labels is not None:
                            result.labelled_lateness.append((message.labels, sent_at - dispatch_at))

        for messages in phases.values():
            run_all(self.shared.pool, send, [messages[i : i + 10] for i in range(0, len(messages), 10)])

    # --- 5. move ---------------------------------------------------------------------------------

    def move(self, works: list[JobWork], now_ms: int, guard: Guard, result: TickResult) -> None:
        """Move each job whose runs were sent onto its next fire: first file every next entry
        (``DueIndex.put_timers``, ``TIMER_BATCH`` a request, in parallel), then the fenced moves (one conditional
        update each, in parallel) of the jobs whose entries were filed. A job whose entry could not be filed is
        not moved: it stays due and the next tick retries it (an entry filed without its move is a stale hint)."""
        lock = threading.Lock()
        moving: list[tuple[JobWork, DueEntry | None, int]] = []  # (work, next entry, home partition)
        for work in works:
            if work.failed or not work.sent:
                continue
            job, nxt = work.plan.job, work.plan.next_run_at
            # The position from the clock at the write (not the tick's start): a move delayed within the tick
            # still lands at or after the current instant, never behind a read position passed meanwhile.
            home = partition_of(job.job_id, self.config.partitions)
            due = (
                due_entry(
                    job.job_id,
                    nxt + job.jitter_offset_ms,
                    partition=home,
                    shards=self.config.due_shards,
                    bucket_ms=self.config.bucket_ms,
                    now_ms=max(now_ms, self.shared.clock()),
                    version=job.version,
                    owner=job.owner,
                    priority=job.priority,
                )
                if nxt is not None
                else None
            )
            moving.append((work, due, home))

        def file(batch: list[tuple[JobWork, DueEntry | None, int]]) -> None:
            guard.check()
            try:
                self.shared.jobs.put_timers([due for _, due, _ in batch if due is not None])
            except Exception as error:
                logger.warning("due entries not filed", extra={"count": len(batch), "error": str(error)})
                for work, _, _ in batch:
                    work.failed = True

        run_all(
            self.shared.pool, file, [moving[i : i + TIMER_BATCH] for i in range(0, len(moving), TIMER_BATCH)]
        )

        def move(item: tuple[JobWork, DueEntry | None, int]) -> None:
            work, due, home = item
            if work.failed:
                return
            job = work.plan.job
            term = guard.check()
            try:
                self.shared.jobs.move(
                    Move(
                        job.job_id,
                        expected_next_run_at=job.next_run_at,
                        expected_version=job.version,
                        partition=self.shared.partition,
                        term=term,
                        next_run_at=work.plan.next_run_at,
                        due=due,
                        to_partition=home,
                    )
                )
            except Conflict as conflict:
                current = conflict.current if isinstance(conflict.current, SchedulingState) else None
                logger.info(
                    "job moved meanwhile",
                    extra={
                        "job_id": job.job_id,
                        "expected_next_run_at": job.next_run_at,
                        "stored_next_run_at": current.next_run_at if current else None,
                        "stored_term": current.term if current else None,
                        "term": term,
                    },
                )
                with lock:
                    result.conflicts += 1
                return
            except Exception as error:
                work.failed = True
                logger.warning("job move failed", extra={"job_id": job.job_id, "error": str(error)})
                return
            work.moved = True
            with lock:
                result.moved += 1

        try:
            run_all(self.shared.pool, move, moving)
        finally:
            self._remember_unmoved(works)

    def _remember_unmoved(self, works: list[JobWork]) -> None:
        """Remember, per job whose new runs' messages went out (some may have) but whose move did not land, the
        fires this term may have dispatched (read by ``Scheduler._dispatched``); forget the jobs that moved."""
        for work in works:
            job = work.plan.job
            if work.moved:
                self._unmoved.pop(job.job_id, None)
            elif work.new_runs:
                sent = max(work.new_runs) + job.jitter_offset_ms
                earlier = self.unmoved_through(job)
                self._unmoved[job.job_id] = (job.next_run_at, sent if earlier is None else max(sent, earlier))

    def unmoved_through(self, job: DueJob) -> int | None:
        """The last dispatch instant (epoch ms) this term sent of ``job`` from its current ``next_run_at`` without
        its move landing (``_remember_unmoved``), or None."""
        seen = self._unmoved.get(job.job_id)
        return seen[1] if seen is not None and seen[0] == job.next_run_at else None


def run_all(pool: Executor, fn: Callable[[Any], None], items: Iterable[Any]) -> None:
    """Run ``fn`` over ``items`` on ``pool``; re-raise ``LeaseLost`` (and crash-like BaseExceptions)
    after all started calls have finished."""
    futures = [pool.submit(fn, item) for item in items]
    lost: BaseException | None = None
    for future in futures:
        try:
            future.result()
        except LeaseLost as error:
            lost = lost or error
        except Exception as error:  # pragma: no cover - fn handles its own errors
            logger.error("tick task failed", extra={"error": str(error)})
        except BaseException as error:
            lost = error
    if lost is not None:
        raise lost
