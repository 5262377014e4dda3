"""The scheduler: each second, find the jobs due now, create each run once, enqueue it, move the job on.

Pure domain logic (design §4.1, §4.2): the stores, the queue, the lease and the clock are passed in through
the ports, so tests drive hours of simulated time on the in-memory fakes.

One :class:`Scheduler` serves one scheduler partition. Its :meth:`Scheduler.tick`:

1. reads the due index (``due_pk = p<partition>#b<bucket>#s<shard>``, ``due_at <= now``) for every bucket
   from the watermark (the oldest bucket not yet drained) up to now, every shard in parallel; after a full
   tick (a rush), the entries it read and did not reach stand for their shards instead of a new query;
2. reads the due jobs' scheduling items consistently (one BatchGetItem per 100 jobs, in parallel; an entry the item no
   longer matches is stale and left alone) and plans each job's fires (:func:`plan_fires`): the policy for
   missed fires, the catch-up window, the misfire grace, ``end_at``, one-offs and the jitter offset;
3. records skipped fires as ``skipped`` rows (one each, or one summary row with ``skipped_count``; the owners who
   ask are alerted at the end of the tick, once its runs are sent and its jobs moved); a run gets
   no row here: its message is its record until a worker's claim creates the row on the unique
   ``(job_id, scheduled_for)`` (design §4.2);
4. enqueues the runs' messages in SQS batches of 10, oldest dispatch instant first;
5. moves each job's ``next_run_at`` from its last fire's ``scheduled_for`` (never from now), only onto the
   item ``version`` it planned from, fenced by the leader's term, into the job's home partition;
6. advances the watermark over buckets that are drained.

The lease is checked before every write (``LeaderLease.check``), so a leader whose lease ran out by its own
clock stops writing; see ``jobsched.domain.lease`` for the residual window and why it cannot duplicate a run.

The decisions behind each step (re-enqueue, catch-up, skipped fires, index lag, watermark) are design §4.8.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

from jobsched.clock import Clock
from jobsched.domain import planning
from jobsched.domain.lease import LeaseLost
from jobsched.domain.planning import DueJob, FirePlan, SkipRow, TickLimits, plan_fires
from jobsched.domain.tick_writes import JobWork, TickWrites
from jobsched.observability import logger
from jobsched.ports.alerts import AlertSink
from jobsched.ports.control import Guard, WatermarkStore
from jobsched.ports.jobs import (
    STATE_BATCH,
    DueEntry,
    DueIndex,
    DuePageToken,
    DueQuery,
    SchedulingState,
    Unreadable,
)
from jobsched.ports.runs import RunSender, RunWriter
from jobsched.schedules import ScheduleError
from jobsched.settings import Settings

WATERMARK_MARGIN_MS = 15_000
"""A bucket counts as drained only once now is past its end by this much. Writers (API, scheduler) put an
entry in the bucket of ``max(due_at, their now)``; the margin covers a writer whose clock is slightly behind
and the due index's replication delay (a GSI is eventually consistent)."""


# --- the tick -------------------------------------------------------------------------------------


def _due_here(state: SchedulingState | None, partition: int, now_ms: int) -> bool:
    """Whether ``state`` is in the due index, due by ``now_ms`` and homed in ``partition``."""
    return (
        state is not None
        and state.due is not None
        and state.next_run_at is not None
        and state.due.due_at <= now_ms
        and state.partition == partition
    )


@dataclass
class TickResult:
    """What one tick did. Instants and durations in epoch ms / ms.

    ``due``: due jobs handled; ``created``: runs planned and sent (no row: a worker's claim creates it);
    ``existing``: refused puts of skipped fires (the fire has a row); ``enqueued``: messages SQS accepted (runs
    plus re-enqueued queued rows); ``reenqueued``: the latter; ``skipped``: fires recorded skipped (new rows
    only); ``moved``/``conflicts``: job moves that landed / were refused (moved elsewhere, edited, deleted, paused, fenced); ``errors``: jobs left
    due for the next tick after an error; ``lag_ms``: age of the oldest due fire not enqueued when the tick
    ended (0 when none); ``dispatch_lateness_ms``: per enqueued new run, enqueue time minus dispatch
    instant; ``aborted``: the lease ran out mid-tick (no further writes were made); ``watermark``: the
    bucket the watermark stands at after the tick; ``queries``: due-index requests made; ``malformed``:
    due entries that could not be read (logged as errors, ignored); ``next_due_at``: the earliest dispatch
    instant after now and before the next tick seen in the due index (the look-ahead; None: none), when the
    loop ticks again (``SchedulerLoop``; design §4.9).
    """

    now: int
    term: int
    due: int = 0
    created: int = 0
    existing: int = 0
    enqueued: int = 0
    reenqueued: int = 0
    skipped: int = 0
    moved: int = 0
    conflicts: int = 0
    errors: int = 0
    lag_ms: int = 0
    dispatch_lateness_ms: list[int] = field(default_factory=list)
    aborted: bool = False
    watermark: int | None = None
    queries: int = 0
    malformed: int = 0
    next_due_at: int | None = None


LOOK_BEHIND_MS = 300_000
"""Once per bucket period the poll also re-reads the buckets this far behind the watermark (one query per
shard per bucket, amortized over the period: with the defaults, 20 queries a minute). A safety net for an
entry written behind the watermark after it advanced: a writer whose clock is off by more than the margin, or
a deposed leader's move whose request was held up for longer than the margin. Such an entry is then found
(late, but found) instead of never again."""


@dataclass
class _BucketRead:
    bucket: int
    complete: bool = True  # every shard read from its start to the end in this tick
    items: list[DueEntry] = field(default_factory=list)


class Scheduler(TickWrites):
    """The tick of one scheduler partition (see the module docstring).

    ``jobs``/``runs``/``queue``/``control`` are the adapters (``JobStore``, ``RunStore``, ``RunQueue``,
    ``ControlStore`` in production); ``settings`` gives partitions, shards, bucket width, retention and the
    sweeper delay; ``clock`` returns epoch ms. ``adopted``: ``partition`` is no longer one of the deployment's
    (``scheduler_partitions`` was lowered) and is served by an adopter until its jobs have moved home.
    ``executor``: runs the tick's parallel requests (default: a thread pool of ``limits.threads``); the bench's
    simulation passes a deterministic one that runs them on a simulated clock. :meth:`close` shuts it down.

    Re-homing: every move puts the job in its home partition, ``partition_of(job_id, scheduler_partitions)``,
    so after the partition count changes (either way) each job moves to its new partition at its next fire,
    fenced by the lease of the partition it leaves (its ``term`` restarts at 0 in the new one). Keeps the watermark in memory while leading
    (:meth:`on_leadership` loads it, :meth:`on_lost` drops it). Call :meth:`close` when done.
    """

    def __init__(
        self,
        *,
        partition: int,
        jobs: DueIndex,
        runs: RunWriter,
        queue: RunSender,
        control: WatermarkStore,
        settings: Settings,
        clock: Clock,
        limits: TickLimits | None = None,
        adopted: bool = False,
        executor: Executor | None = None,
        alerts: AlertSink | None = None,
    ) -> None:
        if partition < 0 or (partition >= settings.scheduler_partitions and not adopted):
            raise ValueError(f"partition {partition} is outside 0..{settings.scheduler_partitions - 1}")
        self.partition = partition
        self.jobs = jobs
        self.runs = runs
        self.queue = queue
        self.control = control
        self.settings = settings
        self.clock = clock
        self.limits = limits or TickLimits()
        self.alerts = alerts
        self.bucket_ms = settings.due_bucket_s * 1000
        self._watermark: int | None = None
        self._ignored: set[DueEntry] = set()  # entries of malformed scheduling states
        self._stale: set[DueEntry] = set()  # this tick's entries no longer current (see _plan)
        # the jobs the last tick planned or found stale (at most max_jobs: as many when it was full)
        self._considered: set[str] = set()
        self._looked_behind_at: int | None = None  # the bucket period of the last look-behind read
        # The backlog a full tick read but did not reach, by (bucket, shard): the next tick takes it instead of
        # querying those shards again (see _read_due). Only a hint: every entry is checked against the job's
        # state read consistently, and the due index stays the truth (a lost carry costs a query, no run).
        self._carry: dict[tuple[int, int], list[DueEntry]] = {}
        self._pool = executor or ThreadPoolExecutor(
            max_workers=self.limits.threads, thread_name_prefix=f"tick-p{partition}"
        )

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=True)

    @property
    def watermark(self) -> int | None:
        """The in-memory watermark bucket (None until leading)."""
        return self._watermark

    def on_leadership(self, guard: Guard) -> None:
        """Load the watermark after acquiring the lease. If the partition has none yet (first start), it
        starts at the oldest bucket holding an entry of this partition (a one-off scan of the due index),
        or at now's bucket minus the margin, and is stored."""
        stored = self.control.read_watermark(self.partition)
        if stored is not None:
            self._watermark = stored
            return
        now = self.clock()
        start = (now - WATERMARK_MARGIN_MS) // self.bucket_ms
        oldest = self.jobs.oldest_due_bucket(self.partition)
        if oldest is not None:
            start = min(start, oldest)
        term = guard.check()
        if not self.control.advance_watermark(self.partition, start, term=term, now_ms=now):
            stored = self.control.read_watermark(self.partition)
            start = stored if stored is not None else start
        logger.info("watermark initialised", partition=self.partition, bucket=start)
        self._watermark = start

    def on_lost(self) -> None:
        """Forget leader state after losing the lease (the next holder reloads it from the store)."""
        self._watermark = None
        self._carry = {}
        self._considered = set()

    # --- the tick -------------------------------------------------------------------------------

    def tick(self, now_ms: int, guard: Guard) -> TickResult:
        """Run one tick at ``now_ms`` (epoch ms) for this partition; ``guard`` is the leader lease.

        Requests per run: 1 UpdateItem moving the job (one per job per tick, shared by all the fires a
        catching-up job runs in that tick) + 1/10 SendMessageBatch + 1/100 BatchGetItem (the due jobs'
        scheduling items, read consistently: 0.5 read units each) = 1.11, plus per tick one Query per shard per
        undrained bucket (``due_shards`` x 1-2 buckets with the defaults: 4-8, none for a shard whose backlog
        the previous full tick read; plus, once a minute,
        ``LOOK_BEHIND_MS`` worth of buckets) and, in the loop, a lease renewal every third tick, amortized over
        the tick's runs (about 1.19 at 100 runs a second). No run row: the worker's claim writes it. An idle tick costs the
        queries alone, whatever the number of jobs. A refused
        put of a skipped fire costs the same 1 request (the existing row comes back with the refusal). Skipped
        fires cost one PutItem per row (at most ``limits.skip_rows_max`` rows, else one summary row).

        A job's write errors and the queue's errors do not raise: the job stays due (its bucket undrained)
        and the next tick retries it. A lost lease ends the tick early with ``aborted=True`` and no further
        writes. Raises RuntimeError before :meth:`on_leadership`, and the due-index read's errors (the loop
        logs them and steps again a second later).
        """
        if self._watermark is None:
            raise RuntimeError("tick() before on_leadership(): no watermark loaded")
        result = TickResult(now=now_ms, term=0)
        self._stale = set()
        works: list[JobWork] = []
        try:
            result.term = guard.check()
            reads = self._read_due(now_ms, result)
            works = self._plan(reads, now_ms, result)
            self._save(works, now_ms, guard, result)
            self._enqueue(works, guard, result)
            self._move(works, now_ms, guard, result)
            self._keep_backlog(reads, works, now_ms)
            result.errors = sum(1 for work in works if work.failed or not work.sent)
            self._advance_watermark(reads, works, now_ms, guard, result)
            self._measure_lag(reads, works, now_ms, result)
        except LeaseLost as lost:
            result.aborted = True
            logger.warning("tick aborted: lease lost", partition=self.partition, reason=str(lost))
        # After the runs are sent and the jobs moved (a slow publish never holds them); the skipped rows a tick
        # saved stand even when it lost its lease, so their owners still hear of them.
        self._alert_skipped(works)
        result.watermark = self._watermark
        if result.due or result.errors or result.aborted or result.malformed:
            logger.info(
                "tick",
                malformed=result.malformed,
                partition=self.partition,
                now=now_ms,
                term=result.term,
                due=result.due,
                runs_created=result.created,
                enqueued=result.enqueued,
                reenqueued=result.reenqueued,
                skipped=result.skipped,
                moved=result.moved,
                conflicts=result.conflicts,
                errors=result.errors,
                lag_ms=result.lag_ms,
                aborted=result.aborted,
            )
        return result

    # --- 1. read ---------------------------------------------------------------------------------

    def _buckets(self, now_ms: int) -> list[int]:
        """Buckets to read, oldest first: the look-behind (on the first tick past each bucket's middle, and on a
        new leader's first tick; while a backlog drains, after a tick that was not full, or once the look-behind is
        ``LOOK_BEHIND_MS`` late), then from the watermark to now (bounded by ``limits.backlog_buckets`` plus
        the newest two when far behind)."""
        assert self._watermark is not None
        newest = self._horizon(now_ms) // self.bucket_ms
        oldest = min(self._watermark, newest)
        behind: list[int] = []
        period = (now_ms - self.bucket_ms // 2) // self.bucket_ms  # mid-bucket: away from round-time bursts
        width = max(1, -(-LOOK_BEHIND_MS // self.bucket_ms))
        last = self._looked_behind_at
        # While a backlog drains (the last tick was full, or left entries for this one: a rush) it is postponed,
        # by at most its own width of periods.
        busy = bool(self._carry) or len(self._considered) >= self.limits.max_jobs
        if last != period and (not busy or last is None or period - last >= width):
            self._looked_behind_at = period
            behind = list(range(max(0, oldest - width), oldest))
        if newest - oldest + 1 <= self.limits.backlog_buckets + 2:
            return [*behind, *range(oldest, newest + 1)]
        backlog = list(range(oldest, oldest + self.limits.backlog_buckets))
        return [*behind, *backlog, newest - 1, newest]

    def _horizon(self, now_ms: int) -> int:
        """The last dispatch instant this tick looks at (epoch ms): now plus the look-ahead up to just before
        the next tick (``settings.dispatch_lookahead_ms``; ``planning.horizon_ms``)."""
        return planning.horizon_ms(now_ms, self.settings.dispatch_lookahead_ms)

    def _read_due(self, now_ms: int, result: TickResult) -> list[_BucketRead]:
        """Query every (bucket, shard) in parallel for the entries due by the tick's horizon (now plus the
        look-ahead: those after now are only noted, ``_plan``), following pages while under ``limits.max_jobs``.

        A shard for which the previous tick left a backlog (it was full: ``_keep_backlog``) is queried only for
        entries due before the oldest of its backlog, and when the backlog alone fills this tick, every other
        shard only for entries due before the oldest of the whole backlog: an entry written since (a one-off
        accepted late, a resume, a catching-up job's next fire) still goes first, oldest first, as a fresh read
        would take it, instead of waiting behind the backlog past its misfire grace. Such a bucket counts as not
        read to the end (the watermark waits for a tick that reads it from its start). (A bucket holds entries
        due before its start: a late write is filed in the bucket of its writing, so even a bound before the
        bucket's start is queried.) During a rush this saves re-reading ``page_size`` entries per shard in all but
        one in ``shards * page_size / max_jobs`` ticks: the bounded queries return only what was written since."""
        horizon = self._horizon(now_ms)
        reads = [_BucketRead(b) for b in self._buckets(now_ms)]
        carry, self._carry = self._carry, {}
        shards = range(self.settings.due_shards)
        kept = {
            (r.bucket, s): carry[(r.bucket, s)] for r in reads for s in shards if carry.get((r.bucket, s))
        }
        # (a look-behind due in this tick, overdue: ``_buckets``, reads the buckets behind the watermark anyway)
        assert self._watermark is not None
        looking_behind = any(read.bucket < self._watermark for read in reads)
        full = sum(len(items) for items in kept.values()) >= self.limits.max_jobs and not looking_behind
        oldest_kept = min((item.due_at for items in kept.values() for item in items), default=horizon + 1)
        pending: list[tuple[_BucketRead, int, int, DuePageToken | None]] = []
        total = 0
        for read in reads:
            for shard in shards:
                items = kept.get((read.bucket, shard))
                up_to = horizon
                if items:
                    read.items.extend(items)
                    total += len(items)
                    up_to = min(horizon, min(item.due_at for item in items) - 1)
                elif full:
                    up_to = min(horizon, oldest_kept - 1)
                # an entry is due before its bucket ends (``registration.due_entry``): a read up to the bucket's
                # last instant, or to the horizon, has all of it
                if items or up_to < min(horizon, (read.bucket + 1) * self.bucket_ms - 1):
                    read.complete = False  # not read to its end in this tick
                pending.append((read, shard, up_to, None))
        while pending:
            pages = list(
                self._pool.map(
                    lambda p: self.jobs.query_due(
                        DueQuery(self.partition, p[0].bucket, p[1], p[2], self.limits.page_size, p[3])
                    ),
                    pending,
                )
            )
            result.queries += len(pending)
            following: list[tuple[_BucketRead, int, int, DuePageToken | None]] = []
            for (read, key, up_to, _), (items, next_key) in zip(pending, pages, strict=True):
                read.items.extend(items)
                total += len(items)
                if next_key:
                    following.append((read, key, up_to, next_key))
            if total >= self.limits.max_jobs:
                for read, _, _, _ in following:
                    read.complete = False
                break
            pending = following
        return reads

    def _keep_backlog(self, reads: list[_BucketRead], works: list[JobWork], now_ms: int) -> None:
        """After a full tick (more jobs due than ``limits.max_jobs``), keep for the next tick (``_read_due``) the
        entries it read, due by now, of the jobs it left for later and of the jobs whose writes failed (so the
        next tick retries them, as it would by querying). A tick that was not full keeps nothing: its next tick
        queries every shard afresh."""
        due = [item for read in reads for item in read.items if item.due_at <= now_ms]
        if all(item.job_id in self._considered for item in due):
            return
        retry = {work.plan.job.job_id for work in works if work.failed or not work.sent}
        for item in due:
            if item.job_id not in self._considered or item.job_id in retry:
                self._carry.setdefault((item.bucket, item.shard), []).append(item)

    # --- 2. plan ---------------------------------------------------------------------------------

    def _plan(self, reads: list[_BucketRead], now_ms: int, result: TickResult) -> list[JobWork]:
        """Plan each due job once, from its scheduling item read consistently (one BatchGetItem per 100 jobs),
        never from the due index's projection: a GSI is eventually consistent, and an entry may still show
        the state before an edit, a pause or a move. An entry that is not the item's current one (the job
        moved, was edited, paused or deleted since) is stale: it is left alone (the index drops it) and counts
        as handled. At most ``limits.max_jobs`` jobs, oldest dispatch first. Entries due after now (read by
        the look-ahead) are not planned: the earliest gives ``result.next_due_at``, when the loop ticks again."""
        entries: dict[str, DueEntry] = {}
        for read in reads:
            for item in read.items:
                if item.due_at > now_ms:
                    if result.next_due_at is None or item.due_at < result.next_due_at:
                        result.next_due_at = item.due_at
                    continue
                known = entries.get(item.job_id)
                if known is None or item.due_at < known.due_at:
                    entries[item.job_id] = item
        ordered = sorted(entries.values(), key=lambda e: (e.due_at, e.job_id))[: self.limits.max_jobs]
        self._considered = {entry.job_id for entry in ordered}
        states = self._states([entry.job_id for entry in ordered])
        works: list[JobWork] = []
        for item in ordered:
            state = states.get(item.job_id)
            if isinstance(state, Unreadable):
                # Written by no code path of ours: report it and leave it where it is, without letting it hold
                # the watermark (the poll would otherwise read ever more buckets).
                logger.error("malformed scheduling item ignored", job_id=item.job_id, error=state.reason)
                result.malformed += 1
                self._ignored.add(item)
                continue
            if not _due_here(state, self.partition, now_ms):
                # deleted, paused, ended, moved on, or re-homed in another partition: nothing due here now
                self._stale.add(item)
                continue
            assert state is not None
            job = DueJob.from_state(state)
            if job.due != item:
                self._stale.add(item)  # the index still shows an older entry of this job
            try:
                plan = plan_fires(job, now_ms, self.limits)
            except ScheduleError as error:
                # Validated at registration, so this means the environment changed (e.g. tzdata): record
                # it on the job's history and take the job out of the index rather than block the bucket.
                logger.error("schedule cannot be evaluated", job_id=job.job_id, error=error.message)
                plan = FirePlan(
                    job,
                    (SkipRow(job.next_run_at, 1, f"schedule error: {error.message}", job.next_run_at),),
                    (),
                    None,
                )
            works.append(JobWork(plan))
        result.due = len(works)
        return works

    def _states(self, job_ids: list[str]) -> dict[str, SchedulingState | Unreadable]:
        """The scheduling states of ``job_ids``, read consistently in batches of ``STATE_BATCH``, concurrently."""
        batches = [job_ids[i : i + STATE_BATCH] for i in range(0, len(job_ids), STATE_BATCH)]
        states: dict[str, SchedulingState | Unreadable] = {}
        for found in self._pool.map(self.jobs.scheduling_states, batches):
            states.update(found)
        return states

    # --- 6. watermark ----------------------------------------------------------------------------

    def _advance_watermark(
        self, reads: list[_BucketRead], works: list[JobWork], now_ms: int, guard: Guard, result: TickResult
    ) -> None:
        """Advance over the contiguous run of drained buckets from the watermark. A bucket is drained when it
        ended at least ``WATERMARK_MARGIN_MS`` ago, was read to the end, and each entry read from it was
        handled (moved on, or found moved/edited/deleted by someone else)."""
        assert self._watermark is not None
        handled = {w.plan.job.job_id: w for w in works}
        target = self._watermark
        by_bucket = {read.bucket: read for read in reads}
        while True:
            read = by_bucket.get(target)
            if (
                read is None
                or not read.complete
                or (target + 1) * self.bucket_ms + WATERMARK_MARGIN_MS > now_ms
            ):
                break
            if not all(
                self._entry_done(item, handled) or item in self._ignored or item in self._stale
                for item in read.items
            ):
                break
            target += 1
        if target <= self._watermark:
            return
        term = guard.check()
        try:
            if self.control.advance_watermark(self.partition, target, term=term, now_ms=now_ms):
                self._watermark = target
            else:
                stored = self.control.read_watermark(self.partition)
                if stored is not None and stored > self._watermark:
                    self._watermark = stored
        except Exception as error:
            logger.warning("watermark write failed", partition=self.partition, error=str(error))

    @staticmethod
    def _entry_done(item: DueEntry, handled: dict[str, JobWork]) -> bool:
        work = handled.get(item.job_id)
        return work is not None and not work.failed and work.sent and work.plan.job.due == item

    # --- metrics ---------------------------------------------------------------------------------

    def _measure_lag(
        self, reads: list[_BucketRead], works: list[JobWork], now_ms: int, result: TickResult
    ) -> None:
        """Age of the oldest due fire not enqueued by the end of the tick (0 if none): jobs left due (errors,
        catch-up still behind, over the per-tick cap) and, as an estimate, the start of buckets not read."""
        oldest: int | None = None

        def consider(instant: int) -> None:
            nonlocal oldest
            if instant <= now_ms:
                oldest = instant if oldest is None else min(oldest, instant)

        planned = {w.plan.job.job_id for w in works}
        for work in works:
            job = work.plan.job
            if work.failed or not work.sent:
                consider(job.due_at)
            elif work.plan.next_run_at is not None:
                consider(work.plan.next_run_at + job.jitter_offset_ms)
        for read in reads:
            for item in read.items:
                if item.job_id not in planned:
                    consider(item.due_at)
        if self._watermark is not None and reads:
            read_buckets = {read.bucket for read in reads}
            unread = [b for b in range(self._watermark, reads[-1].bucket) if b not in read_buckets]
            if unread:
                consider(unread[0] * self.bucket_ms)
        result.lag_ms = now_ms - oldest if oldest is not None else 0
