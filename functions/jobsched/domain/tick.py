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
6. advances the read positions and the watermark over buckets that are drained.

The reads of steps 1 and 6 are the partition's :class:`~jobsched.domain.due_reader.DueReader`; the writes of steps
3-5 its :class:`~jobsched.domain.tick_writes.TickWriter`; this module plans and judges.

The lease is checked before every write (``LeaderLease.check``), so a leader whose lease ran out by its own
clock stops writing; see ``jobsched.domain.lease`` for the residual window and why it cannot duplicate a run.

The decisions behind each step (re-enqueue, catch-up, skipped fires, index lag, watermark) are design §4.8.
"""

from __future__ import annotations

import enum
import logging
from concurrent.futures import Executor, ThreadPoolExecutor

from jobsched.clock import Clock
from jobsched.domain import planning
from jobsched.domain.dispatch_order import dispatch_order
from jobsched.domain.due_reader import WATERMARK_MARGIN_MS, BucketRead, DueReader
from jobsched.domain.lateness import backlog_of, labels_for, top_owners
from jobsched.domain.lease import LeaseLost
from jobsched.domain.planning import DueJob, FirePlan, SkipRow, TickLimits, plan_fires
from jobsched.domain.tick_records import TickConfig, TickResult, TickShared
from jobsched.domain.tick_writes import JobWork, TickWriter
from jobsched.models import RunStatus
from jobsched.ports.alerts import AlertSink
from jobsched.ports.control import Guard, LeaderGuard, WatermarkStore
from jobsched.ports.jobs import INDEX, STATE_BATCH, DueEntry, DueIndex, SchedulingState, Unreadable
from jobsched.ports.positions import PositionsCodec
from jobsched.ports.run_stores import RunSender, RunWriter
from jobsched.schedule.engine import ScheduleError

logger = logging.getLogger(__name__)

# --- judging an entry ------------------------------------------------------------------------


class _Verdict(enum.Enum):
    """What a tick makes of a due entry, given its job's state read consistently (:func:`_judge`)."""

    DONE = "done"  # stale: the job moved past it, was deleted or is not due here; or an orphan hint
    WORK = "work"  # the job's current entry: done once the tick sent its runs and moved it
    HOLD = "hold"  # ahead of the job's state, and young: its state write may still land


def _rank(state: SchedulingState) -> tuple[int, float]:
    """How far a state has got, to compare with ``DueEntry.rank``: ``(version or -1, due_at)``, due_at infinite
    when the job is not in the due index (paused, ended)."""
    version = -1 if state.version is None else state.version
    return (version, state.due.due_at if state.due is not None else float("inf"))


def _judge(entry: DueEntry, state: SchedulingState | None, partition: int, now_ms: int) -> _Verdict:
    """The verdict on ``entry`` (due by ``now_ms``) given its job's ``state`` (None: no state stored).

    A state whose rank (version, due instant) is above the entry's has moved past it: the entry is stale. One of
    equal rank is the job's current fire: work for this tick when due here. An entry ahead of its state (or of
    a missing one) was written before a state write that has not landed (creation, edit, move: writers file
    the entry first) or was refused: it is held until ``WATERMARK_MARGIN_MS`` after its position, by when a
    write sent then has landed, and is an orphan after that. An entry of the old :data:`INDEX` lane lives on
    the state itself: current iff the state still shows it."""
    old = entry.at <= now_ms - WATERMARK_MARGIN_MS
    if state is None:
        return _Verdict.DONE if old else _Verdict.HOLD
    if entry.lane == INDEX:
        return _Verdict.WORK if state.due == entry and _due_here(state, partition, now_ms) else _Verdict.DONE
    rank = _rank(state)
    if entry.version is None:  # written for no version in particular (e.g. by hand): its instant decides
        rank = (entry.rank[0], rank[1])
    if rank > entry.rank:
        return _Verdict.DONE
    if rank == entry.rank:
        return _Verdict.WORK if _due_here(state, partition, now_ms) else _Verdict.DONE
    return _Verdict.DONE if old else _Verdict.HOLD


def _due_here(state: SchedulingState | None, partition: int, now_ms: int) -> bool:
    """Whether ``state`` is in the due index, due by ``now_ms`` and homed in ``partition``."""
    return (
        state is not None
        and state.due is not None
        and state.next_run_at is not None
        and state.due.due_at <= now_ms
        and state.partition == partition
    )


class Scheduler:
    """The tick of one scheduler partition (see the module docstring).

    ``jobs``/``runs``/``queue``/``control`` are the adapters (``JobStore``, ``RunStore``, ``RunQueue``,
    ``ControlStore`` in production); ``config`` gives partitions, shards, bucket width, retention and the
    look-ahead (``TickConfig``); ``positions`` is the codec of the stored read positions; ``clock`` returns epoch
    ms. ``adopted``: ``partition`` is no longer one of the deployment's (``config.partitions`` was lowered) and is
    served by an adopter until its jobs have moved home. ``executor``: runs the tick's parallel requests (default: a
    thread pool of ``limits.threads``); the bench's simulation passes a deterministic one that runs them on a
    simulated clock. :meth:`close` shuts it down. ``read_shards``: how many due shards the tick reads, at least
    ``config.due_shards``: the most any deployment filed entries in (``PartitionMarks.raise_shard_high_water``), so
    lowering ``due_shards`` strands no entry filed under the higher count (writers file under the current count:
    each job moves into the new shards at its next fire). Raises ValueError for a partition out of range.

    Re-homing: every move puts the job in its home partition, ``partition_of(job_id, config.partitions)``,
    so after the partition count changes (either way) each job moves to its new partition at its next fire,
    fenced by the lease of the partition it leaves (its ``term`` restarts at 0 in the new one). Keeps the watermark
    in memory while leading (:meth:`on_leadership` loads it, :meth:`on_lost` drops it). Call :meth:`close` when
    done.
    """

    def __init__(
        self,
        *,
        partition: int,
        jobs: DueIndex,
        runs: RunWriter,
        queue: RunSender,
        control: WatermarkStore,
        config: TickConfig,
        positions: PositionsCodec,
        clock: Clock,
        limits: TickLimits | None = None,
        adopted: bool = False,
        executor: Executor | None = None,
        alerts: AlertSink | None = None,
        read_shards: int | None = None,
    ) -> None:
        if partition < 0 or (partition >= config.partitions and not adopted):
            raise ValueError(f"partition {partition} is outside 0..{config.partitions - 1}")
        self.partition = partition
        self.jobs = jobs
        self.runs = runs
        self.clock = clock
        self.limits = limits or TickLimits()
        self.read_shards = max(config.due_shards, read_shards or 0)
        self._pool = executor or ThreadPoolExecutor(
            max_workers=self.limits.threads, thread_name_prefix=f"tick-p{partition}"
        )
        shared = TickShared(partition=partition, jobs=jobs, clock=clock, pool=self._pool)
        self.reader = DueReader(
            shared,
            control=control,
            positions=positions,
            limits=self.limits,
            bucket_ms=config.bucket_ms,
            lookahead_ms=config.lookahead_ms,
            read_shards=self.read_shards,
        )
        self.writer = TickWriter(shared, runs=runs, queue=queue, config=config, alerts=alerts)
        self._ignored: set[DueEntry] = set()  # entries of malformed scheduling states
        self._verdicts: dict[DueEntry, _Verdict] = {}  # this tick's verdicts (see _plan)
        self._unplanned: set[str] = set()  # this tick's jobs whose runs could not be read (see _plan)
        # the jobs the last tick planned or found stale (at most max_jobs: as many when it was full)
        self._considered: set[str] = set()
        # When the terms before this one stopped (``LeaderLease.earlier_terms_until``): the fires an earlier tick
        # may have dispatched (``planning.Dispatched``), with those this term sent without moving their job
        # (``TickWriter.unmoved_through``).
        self._earlier_until: int | None = None

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=True)

    @property
    def watermark(self) -> int | None:
        """The in-memory watermark bucket (None until leading)."""
        return self.reader.watermark

    def on_leadership(self, guard: LeaderGuard) -> None:
        """After acquiring the lease: note when the earlier terms stopped and load the watermark and the read
        positions (``DueReader.load``). Raises what the stores' reads raise and ``LeaseLost``."""
        self._earlier_until = guard.earlier_terms_until
        self.reader.load(guard)

    def on_lost(self) -> None:
        """Forget leader state after losing the lease (the next holder reloads it from the store)."""
        self.reader.forget()
        self.writer.forget()
        self._considered = set()
        self._earlier_until = None

    # --- the tick -------------------------------------------------------------------------------

    def tick(self, now_ms: int, guard: Guard) -> TickResult:
        """Run one tick at ``now_ms`` (epoch ms) for this partition; ``guard`` is the leader lease.

        Requests per run: 1 UpdateItem moving the job (one per job per tick, shared by all the fires a
        catching-up job runs in that tick) + 1/25 BatchWriteItem filing its next due entry + 1/10
        SendMessageBatch + 1/100 BatchGetItem (the due jobs' scheduling items, read consistently) = 1.15, plus per
        tick one Query per lane per shard per undrained bucket (``due_shards`` x 2 lanes, plus the 2 high lanes of
        the high shard, x 1-2 buckets with the defaults: 10-20, none for a lane whose backlog the previous full
        tick read), a store of the read positions
        at most every ``POSITIONS_SAVE_MS``, and, in the loop, a lease renewal every third tick, amortized over the
        tick's runs. No run row: the worker's claim writes it. An idle tick costs the queries alone, whatever the
        number of jobs. A refused put of a skipped fire costs the same 1 request (the existing row comes back with
        the refusal). Skipped fires cost one PutItem per row (at most ``limits.skip_rows_max`` rows, else one
        summary row).

        A job's write errors and the queue's errors do not raise: the job stays due (its bucket undrained)
        and the next tick retries it. On an error that does raise, what the tick took of the carried backlog goes
        back in front of it (``DueReader.give_back``). A lost lease ends the tick early with ``aborted=True`` and no further
        writes. Raises RuntimeError before :meth:`on_leadership`, and the due-index read's errors (the loop
        logs them and steps again a second later).
        """
        if self.reader.watermark is None:
            raise RuntimeError("tick() before on_leadership(): no watermark loaded")
        result = TickResult(now=now_ms, term=0)
        self._verdicts, self._unplanned = {}, set()
        works: list[JobWork] = []
        try:
            result.term = guard.check()
            reads = self.reader.read(now_ms, result)
            works = self._plan(reads, now_ms, result)
            self.writer.save(works, now_ms, guard, result)
            self.writer.enqueue(works, guard, result)
            self.writer.move(works, now_ms, guard, result)
            retry = {work.plan.job.job_id for work in works if work.failed or not work.sent} | self._unplanned
            self.reader.keep_backlog(reads, self._considered, retry, now_ms)
            result.errors = sum(1 for work in works if work.failed or not work.sent)
            self.reader.advance(reads, self._done_after_tick(works), now_ms, guard)
            self._measure_lag(reads, works, now_ms, result)
        except LeaseLost as lost:
            result.aborted = True
            logger.warning(
                "tick aborted: lease lost", extra={"partition": self.partition, "reason": str(lost)}
            )
        except Exception:
            self.reader.give_back()  # (the loop logs the error; the next tick takes them in their turn)
            raise
        # After the runs are sent and the jobs moved (a slow publish never holds them); the skipped rows a tick
        # saved stand even when it lost its lease, so their owners still hear of them.
        self.writer.alert_skipped(works)
        result.watermark = self.reader.watermark
        if result.due or result.errors or result.aborted or result.malformed:
            logger.info(
                "tick",
                extra={
                    "malformed": result.malformed,
                    "partition": self.partition,
                    "now": now_ms,
                    "term": result.term,
                    "due": result.due,
                    "runs_created": result.created,
                    "enqueued": result.enqueued,
                    "reenqueued": result.reenqueued,
                    "skipped": result.skipped,
                    "moved": result.moved,
                    "conflicts": result.conflicts,
                    "errors": result.errors,
                    "lag_ms": result.lag_ms,
                    "aborted": result.aborted,
                },
            )
        return result

    # --- 2. plan ---------------------------------------------------------------------------------

    def _plan(self, reads: list[BucketRead], now_ms: int, result: TickResult) -> list[JobWork]:
        """Plan each due job once, from its scheduling item read consistently (one BatchGetItem per 100 jobs),
        never from its entries, which are hints: a timer entry stays after its job moves on, and the old index
        lags behind writes. Each entry read gets a verdict from its job's state (:func:`_judge`): stale, the
        job's current fire, or held (ahead of a state write that may still land). At most ``limits.max_jobs``
        jobs, in dispatch order (``dispatch_order``: priority, then fair rounds between owners, then oldest
        dispatch first; design §4.10); each job's runs labelled for the lateness metrics by priority and owner, the
        owner named when among the tick's top owners by backlog (``domain.lateness``). Entries due after now (read
        by the look-ahead) are not planned: the earliest gives ``result.next_due_at``, when the loop ticks again."""
        by_job: dict[str, list[DueEntry]] = {}
        first: dict[str, DueEntry] = {}
        for read in reads:
            for item in read.items:
                if item.due_at > now_ms:
                    if result.next_due_at is None or item.due_at < result.next_due_at:
                        result.next_due_at = item.due_at
                    continue
                by_job.setdefault(item.job_id, []).append(item)
                known = first.get(item.job_id)
                if known is None or item.due_at < known.due_at:
                    first[item.job_id] = item
        backlog = backlog_of(entry.owner for entry in first.values())
        top = top_owners(backlog)
        result.top_owners = tuple((owner, backlog[owner]) for owner in top)
        ordered = dispatch_order(first.values())[: self.limits.max_jobs]
        self._considered = {entry.job_id for entry in ordered}
        states = self._states([entry.job_id for entry in ordered])
        works: list[JobWork] = []
        for item in ordered:
            state = states.get(item.job_id)
            if isinstance(state, Unreadable):
                # Written by no code path of ours: report it and leave it where it is, without letting it hold
                # the watermark (the poll would otherwise read ever more buckets).
                logger.error(
                    "malformed scheduling item ignored", extra={"job_id": item.job_id, "error": state.reason}
                )
                result.malformed += 1
                self._ignored.update(by_job[item.job_id])
                continue
            for entry in by_job[item.job_id]:
                self._verdicts[entry] = _judge(entry, state, self.partition, now_ms)
            if not _due_here(state, self.partition, now_ms):
                # deleted, paused, ended, not due yet, or homed in another partition: nothing due here now
                continue
            assert state is not None
            job = DueJob.from_state(state)
            try:
                dispatched = self._dispatched(job, now_ms)
            except Exception as error:
                logger.warning(
                    "runs of a late job unreadable; left due",
                    extra={"job_id": job.job_id, "error": str(error)},
                )
                result.errors += 1
                self._unplanned.add(job.job_id)  # (kept for the next tick, as a failed write is)
                continue
            try:
                plan = plan_fires(job, now_ms, self.limits, dispatched=dispatched)
            except ScheduleError as error:
                # Validated at registration, so this means the environment changed (e.g. tzdata): record
                # it on the job's history and take the job out of the index rather than block the bucket.
                logger.error(
                    "schedule cannot be evaluated", extra={"job_id": job.job_id, "error": error.message}
                )
                plan = FirePlan(
                    job,
                    (SkipRow(job.next_run_at, 1, f"schedule error: {error.message}", job.next_run_at),),
                    (),
                    None,
                )
            works.append(JobWork(plan, labels=labels_for(job.priority.value, job.owner, top)))
        result.due = len(works)
        return works

    def _dispatched(self, job: DueJob, now_ms: int) -> planning.Dispatched | None:
        """What an earlier tick may have sent of ``job`` from its ``next_run_at`` (``planning.Dispatched``), when
        that matters: its first fire is late enough to be judged missed at ``now_ms``, and was due before an
        earlier term stopped (``LeaderLease.earlier_terms_until``) or sent by this term without its move landing.

        Rule: a fire that was dispatched on time is not missed (design §4.4); a tick cannot know whether the
        tick before its move sent a fire, so it takes every fire that tick could have sent as sent, and sends it
        again rather than record it skipped. The rows in that range are read (one Query, only on this path: after a
        failover or a failed move, for a job now late): a fire recorded skipped, or whose run a claim made, is
        left as it is; a ``queued`` one is sent again.
        None otherwise (no read). Raises what ``rows_between`` raises.
        """
        bound = max(
            (at for at in (self._earlier_until, self.writer.unmoved_through(job)) if at is not None),
            default=None,
        )
        first_due = job.next_run_at + job.jitter_offset_ms
        if bound is None or first_due > bound or job.next_run_at > planning.skip_through_ms(job, now_ms):
            return None
        rows = self.runs.rows_between(job.job_id, job.next_run_at, bound - job.jitter_offset_ms, limit=10_000)
        recorded = tuple(
            (row.scheduled_for, row.skipped_through or row.scheduled_for)
            for row in rows
            if row.status is not RunStatus.QUEUED
        )
        return planning.Dispatched(bound, recorded)

    def _states(self, job_ids: list[str]) -> dict[str, SchedulingState | Unreadable]:
        """The scheduling states of ``job_ids``, read consistently in batches of ``STATE_BATCH``, concurrently."""
        batches = [job_ids[i : i + STATE_BATCH] for i in range(0, len(job_ids), STATE_BATCH)]
        states: dict[str, SchedulingState | Unreadable] = {}
        for found in self._pool.map(self.jobs.scheduling_states, batches):
            states.update(found)
        return states

    # --- 6. what is done ------------------------------------------------------------------------

    def _done_after_tick(self, works: list[JobWork]) -> set[DueEntry]:
        """The entries this tick read that are now done: stale or orphaned (:class:`_Verdict` ``DONE``), of a
        malformed state, or the current fire of a job whose runs were sent and whose move was made (or refused
        because someone else moved it on)."""
        handled = {w.plan.job.job_id: w for w in works if not w.failed and w.sent}
        return {
            entry
            for entry, verdict in self._verdicts.items()
            if verdict is _Verdict.DONE or (verdict is _Verdict.WORK and entry.job_id in handled)
        } | self._ignored

    # --- metrics ---------------------------------------------------------------------------------

    def _measure_lag(
        self, reads: list[BucketRead], works: list[JobWork], now_ms: int, result: TickResult
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
        unread = self.reader.first_unread_ms(reads)
        if unread is not None:
            consider(unread)
        carried = self.reader.backlog.oldest_due
        if carried is not None:
            consider(carried)
        result.lag_ms = now_ms - oldest if oldest is not None else 0
