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

import enum
import json
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

from jobsched.clock import Clock
from jobsched.domain import planning
from jobsched.domain.lease import LeaseLost
from jobsched.domain.planning import DueJob, FirePlan, SkipRow, TickLimits, plan_fires
from jobsched.domain.tick_writes import JobWork, TickWrites
from jobsched.models import RunStatus
from jobsched.observability import logger
from jobsched.ports.alerts import AlertSink
from jobsched.ports.control import Guard, LeaderGuard, WatermarkStore
from jobsched.ports.jobs import (
    INDEX,
    LATE,
    STATE_BATCH,
    DueCursor,
    DueEntry,
    DueIndex,
    DuePageToken,
    DueQuery,
    SchedulingState,
    Unreadable,
)
from jobsched.ports.run_stores import RunSender, RunWriter
from jobsched.schedules import ScheduleError
from jobsched.settings import Settings

WATERMARK_MARGIN_MS = 15_000
"""A bucket counts as drained only once now is past its end by this much. Writers (API, scheduler) put an
entry in the bucket of ``max(due_at, their now)``; the margin covers a writer whose clock is slightly behind
and the due index's replication delay (a GSI is eventually consistent)."""


UPGRADE_REWIND_MS = 10 * 60_000
"""How far behind now the first leader of a partition reading timer items reads again (its stored watermark
was written by a leader of the GSI layout, which reads no timer item: during the deploy it may have closed
buckets into which the new API or the migration filed some; design, Upgrades in flight). Covers the old
leader's last invocation (about 67 s) and the minutes a deploy takes to update every function."""

LATE_PAGES_MAX = 10
"""Pages of a late lane a full tick reads on after it has its ``max_jobs`` entries (``Scheduler._read_due``)."""

POSITIONS_SAVE_MS = 5_000
"""The read positions (``Scheduler`` cursors) are stored at most this often: a new leader re-reads at most this
much more of each lane than the last one had passed (its entries then cost one state read per job, once)."""


# --- the tick -------------------------------------------------------------------------------------


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


def encode_positions(
    cursors: dict[tuple[int, int, str], DueCursor], floor: int | None = None, watermark: int | None = None
) -> str:
    """The read positions as stored (``WatermarkStore.save_positions``): JSON ``{"floor": <bucket or null>,
    "watermark": <bucket or null>, "cursors": {"<bucket>:<shard>:<lane>": [at, job_id, due_at, version]}}``;
    ``floor``: the oldest bucket behind the watermark still to be read (``UPGRADE_REWIND_MS``); ``watermark``:
    the watermark when they were stored (a later one without newer positions was moved by a leader that reads
    no timer items: see ``Scheduler.on_leadership``)."""
    return json.dumps(
        {
            "floor": floor,
            "watermark": watermark,
            "cursors": {f"{b}:{s}:{lane}": list(c) for (b, s, lane), c in sorted(cursors.items())},
        }
    )


def read_floor(
    watermark: int, positions: str | None, now_ms: int, bucket_ms: int
) -> tuple[dict[tuple[int, int, str], DueCursor], int | None]:
    """A new leader's read positions and floor, from its partition's stored ``watermark`` (bucket) and read
    ``positions`` (:func:`encode_positions`, or None): ``(cursors, floor)``, the floor a bucket below the watermark
    from which the ticks read again until drained, or None. Without positions the watermark was stored by code
    that reads no timer items (the GSI layout's: design, Upgrades in flight): the floor is ``UPGRADE_REWIND_MS`` before
    ``now_ms``. Positions stored with a watermark behind the stored one mean a leader that stores none moved it
    (a rollback to the GSI layout's code), which may have closed buckets holding some: the floor is the
    positions' watermark. (A failover a few seconds after a watermark move does the same, harmlessly.)"""
    if positions is None:
        floor: int | None = (now_ms - UPGRADE_REWIND_MS) // bucket_ms
        cursors: dict[tuple[int, int, str], DueCursor] = {}
    else:
        cursors, floor, saved_at = decode_positions(positions)
        if saved_at is not None and saved_at < watermark:
            floor = saved_at if floor is None else min(floor, saved_at)
    return cursors, (floor if floor is not None and floor < watermark else None)


def decode_positions(text: str) -> tuple[dict[tuple[int, int, str], DueCursor], int | None, int | None]:
    """Inverse of :func:`encode_positions`: ``(cursors, floor, watermark)``. A value no code of ours wrote reads as
    no cursor, no floor and no watermark (a new leader then reads its lanes from their start: slower, never
    wrong)."""
    try:
        data = json.loads(text)
        cursors: dict[tuple[int, int, str], DueCursor] = {}
        for key, (at, job_id, due_at, version) in data["cursors"].items():
            bucket, shard, lane = key.split(":")
            cursors[(int(bucket), int(shard), lane)] = (int(at), str(job_id), int(due_at), int(version))
        floor, watermark = data.get("floor"), data.get("watermark")
        return (
            cursors,
            (int(floor) if floor is not None else None),
            (int(watermark) if watermark is not None else None),
        )
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        logger.error("stored read positions unreadable; reading the lanes from their start", error=str(error))
        return {}, None, None


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


@dataclass
class _BucketRead:
    bucket: int
    complete: bool = True  # every lane of every shard read from its position to the end in this tick
    items: list[DueEntry] = field(default_factory=list)  # entries not known done yet
    # (shard, lane) -> what this tick's queries returned, in the lane's order, from the lane's read position
    fresh: dict[tuple[int, str], list[DueEntry]] = field(default_factory=dict)


@dataclass
class _Pending:
    read: _BucketRead
    shard: int
    lane: str
    up_to: int
    start: DueCursor | None
    token: DuePageToken | None = None


class Scheduler(TickWrites):
    """The tick of one scheduler partition (see the module docstring).

    ``jobs``/``runs``/``queue``/``control`` are the adapters (``JobStore``, ``RunStore``, ``RunQueue``,
    ``ControlStore`` in production); ``settings`` gives partitions, shards, bucket width, retention and the
    sweeper delay; ``clock`` returns epoch ms. ``adopted``: ``partition`` is no longer one of the deployment's
    (``scheduler_partitions`` was lowered) and is served by an adopter until its jobs have moved home.
    ``executor``: runs the tick's parallel requests (default: a thread pool of ``limits.threads``); the bench's
    simulation passes a deterministic one that runs them on a simulated clock. :meth:`close` shuts it down.
    ``read_shards``: how many due shards the tick reads, at least ``settings.due_shards``: the most any
    deployment filed entries in (``PartitionMarks.raise_shard_high_water``), so lowering ``due_shards`` strands
    no entry filed under the higher count (writers file under the current count: each job moves into the new
    shards at its next fire).

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
        read_shards: int | None = None,
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
        self.read_shards = max(settings.due_shards, read_shards or 0)
        self._watermark: int | None = None
        self._ignored: set[DueEntry] = set()  # entries of malformed scheduling states
        self._verdicts: dict[DueEntry, _Verdict] = {}  # this tick's verdicts (see _plan)
        # The read path of the timer lanes (design §4.1): per (bucket, shard, lane) the order of the last entry
        # passed (every entry up to it is done), and the entries after it known done (read again, not judged
        # again). Positions are stored every POSITIONS_SAVE_MS, so a new leader starts near them.
        self._lanes: tuple[str, ...] = ()
        self._cursors: dict[tuple[int, int, str], DueCursor] = {}
        self._saved: tuple[str, int] | None = None  # (positions stored, when)
        self._done: set[DueEntry] = set()
        # the oldest bucket behind the watermark still to read (UPGRADE_REWIND_MS)
        self._floor: int | None = None
        # the jobs the last tick planned or found stale (at most max_jobs: as many when it was full)
        self._considered: set[str] = set()
        # The backlog a full tick read but did not reach, by (bucket, shard, lane): the next tick takes it instead of
        # querying those shards again (see _read_due). Only a hint: every entry is checked against the job's
        # state read consistently, and the due index stays the truth (a lost carry costs a query, no run).
        self._carry: dict[tuple[int, int, str], list[DueEntry]] = {}
        # When the terms before this one stopped (``LeaderLease.earlier_terms_until``), and, per job whose runs
        # this term sent but whose move did not land, (the next_run_at planned from, the last dispatch instant
        # sent): the fires an earlier tick may have dispatched (``planning.Dispatched``).
        self._earlier_until: int | None = None
        self._unmoved: dict[str, tuple[int, int]] = {}
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

    def on_leadership(self, guard: LeaderGuard) -> None:
        """Load the watermark, the read positions and the lanes to read after acquiring the lease. If the
        partition has no watermark yet (first start), it starts at the oldest bucket holding an entry of this
        partition (a one-off scan of the jobs' states), or at now's bucket minus the margin, and is stored. A
        watermark stored without read positions was written by the GSI layout's code: the ticks then also
        read the buckets from ``UPGRADE_REWIND_MS`` ago (the floor) until they are drained; one ahead of the
        watermark the positions were stored with was moved by a leader that did not store them (a rollback to that
        code), and the floor is that watermark."""
        self._earlier_until = guard.earlier_terms_until
        self._lanes = self.jobs.due_lanes()
        self._done = set()
        self._cursors, self._saved, self._floor = {}, None, None
        stored = self.control.read_watermark(self.partition)
        if stored is not None:
            self._watermark = stored
            positions = self.control.read_positions(self.partition)
            if positions is not None:
                self._saved = (positions, self.clock())
            self._cursors, self._floor = read_floor(stored, positions, self.clock(), self.bucket_ms)
            self._drop_behind()
            return
        now = self.clock()
        start = (now - WATERMARK_MARGIN_MS) // self.bucket_ms
        first = self.jobs.oldest_due_bucket(self.partition)
        if first is not None:
            start = min(start, first)
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
        self._cursors, self._saved, self._done, self._floor = {}, None, set(), None
        self._earlier_until, self._unmoved = None, {}

    # --- the tick -------------------------------------------------------------------------------

    def tick(self, now_ms: int, guard: Guard) -> TickResult:
        """Run one tick at ``now_ms`` (epoch ms) for this partition; ``guard`` is the leader lease.

        Requests per run: 1 UpdateItem moving the job (one per job per tick, shared by all the fires a
        catching-up job runs in that tick) + 1/25 BatchWriteItem filing its next due entry + 1/10
        SendMessageBatch + 1/100 BatchGetItem (the due jobs' scheduling items, read consistently) = 1.15, plus per
        tick one Query per lane per shard per undrained bucket (``due_shards`` x 2 lanes x 1-2 buckets with the
        defaults: 8-16, none for a lane whose backlog the previous full tick read), a store of the read positions
        at most every ``POSITIONS_SAVE_MS``, and, in the loop, a lease renewal every third tick, amortized over the
        tick's runs. No run row: the worker's claim writes it. An idle tick costs the queries alone, whatever the
        number of jobs. A refused put of a skipped fire costs the same 1 request (the existing row comes back with
        the refusal). Skipped fires cost one PutItem per row (at most ``limits.skip_rows_max`` rows, else one
        summary row).

        A job's write errors and the queue's errors do not raise: the job stays due (its bucket undrained)
        and the next tick retries it. A lost lease ends the tick early with ``aborted=True`` and no further
        writes. Raises RuntimeError before :meth:`on_leadership`, and the due-index read's errors (the loop
        logs them and steps again a second later).
        """
        if self._watermark is None:
            raise RuntimeError("tick() before on_leadership(): no watermark loaded")
        result = TickResult(now=now_ms, term=0)
        self._verdicts = {}
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
            done = self._done_after_tick(works)
            self._advance_cursors(reads, done, now_ms)
            self._advance_watermark(reads, done, now_ms, guard)
            self._save_positions(now_ms, guard)
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
        """Buckets to read, oldest first: from the watermark to now (bounded by ``limits.backlog_buckets`` plus
        the newest two when far behind), from the floor while there is one (``UPGRADE_REWIND_MS``). Nothing else
        behind the watermark: writers file an entry at or after their own instant (``registration.due_entry``),
        and the watermark passes a bucket only ``WATERMARK_MARGIN_MS`` after its end."""
        newest = self._horizon(now_ms) // self.bucket_ms
        oldest = min(self._oldest_read(), newest)
        if newest - oldest + 1 <= self.limits.backlog_buckets + 2:
            return list(range(oldest, newest + 1))
        return [*range(oldest, oldest + self.limits.backlog_buckets), newest - 1, newest]

    def _oldest_read(self) -> int:
        """The oldest bucket the ticks read: the watermark, or the floor behind it while there is one."""
        assert self._watermark is not None
        return self._watermark if self._floor is None else min(self._floor, self._watermark)

    def _horizon(self, now_ms: int) -> int:
        """The last dispatch instant this tick looks at (epoch ms): now plus the look-ahead up to just before
        the next tick (``settings.dispatch_lookahead_ms``; ``planning.horizon_ms``)."""
        return planning.horizon_ms(now_ms, self.settings.dispatch_lookahead_ms)

    def _read_due(self, now_ms: int, result: TickResult) -> list[_BucketRead]:
        """Query every (bucket, shard, lane) in parallel for the entries due by the tick's horizon (now plus the
        look-ahead: those after now are only noted, ``_plan``), each from its read position (``_cursors``),
        following pages while under ``limits.max_jobs``. Entries known done (``_done``) are dropped from what
        the tick judges, not from what the cursors pass.

        A lane for which the previous tick left a backlog (it was full: ``_keep_backlog``) is queried only for
        entries filed before the oldest of its backlog, and when the backlog alone fills this tick, every other
        lane only for entries filed before the oldest of the whole backlog: an entry written since (a one-off
        accepted late, a resume, a catching-up job's next fire) still goes first, oldest first, as a fresh read
        would take it, instead of waiting behind the backlog past its misfire grace. Such a bucket counts as not
        read to the end (the watermark waits for a tick that reads it to its end). During a rush this saves
        re-reading ``page_size`` entries per lane in all but one in ``shards * page_size / max_jobs`` ticks."""
        horizon = self._horizon(now_ms)
        reads = [_BucketRead(b) for b in self._buckets(now_ms)]
        carry, self._carry = self._carry, {}
        shards = range(self.read_shards)
        lanes = self._lanes
        kept = {
            (r.bucket, s, lane): carry[(r.bucket, s, lane)]
            for r in reads
            for s in shards
            for lane in lanes
            if carry.get((r.bucket, s, lane))
        }
        full = sum(len(items) for items in kept.values()) >= self.limits.max_jobs
        oldest_kept = min((item.at for items in kept.values() for item in items), default=horizon + 1)
        pending: list[_Pending] = []
        total = late_pages = 0
        for read in reads:
            for shard in shards:
                for lane in lanes:
                    items = kept.get((read.bucket, shard, lane))
                    up_to = horizon
                    if items:
                        read.items.extend(items)
                        total += len(items)
                        up_to = min(horizon, min(item.at for item in items) - 1)
                    elif full and lane != LATE:
                        # (a late entry sorts at its writing, not at its due instant: its lane is read whole)
                        up_to = min(horizon, oldest_kept - 1)
                    # an entry is filed before its bucket ends (``registration.due_entry``): a read up to the
                    # bucket's last instant, or to the horizon, has all of it
                    if items or up_to < min(horizon, (read.bucket + 1) * self.bucket_ms - 1):
                        read.complete = False  # not read to its end in this tick
                    start = None if lane == INDEX else self._cursors.get((read.bucket, shard, lane))
                    read.fresh[(shard, lane)] = []
                    pending.append(_Pending(read, shard, lane, up_to, start))
        while pending:
            pages = list(
                self._pool.map(
                    lambda p: self.jobs.query_due(
                        DueQuery(
                            self.partition,
                            p.read.bucket,
                            p.shard,
                            p.up_to,
                            self.limits.page_size,
                            p.token,
                            lane=p.lane,
                            start=p.start,
                        )
                    ),
                    pending,
                )
            )
            result.queries += len(pending)
            following: list[_Pending] = []
            for query, (items, next_key) in zip(pending, pages, strict=True):
                query.read.fresh[(query.shard, query.lane)].extend(items)
                new = [item for item in items if item not in self._done]
                query.read.items.extend(new)
                total += len(new)
                if next_key:
                    query.token = next_key
                    following.append(query)
            if total >= self.limits.max_jobs:
                # A full tick. The late lane is sorted by writing, not by due instant: an entry filed since may be
                # older than all it read so far, so its pages are read on, up to LATE_PAGES_MAX in a tick.
                late_pages += 1
                keep = [q for q in following if q.lane == LATE] if late_pages <= LATE_PAGES_MAX else []
                for query in following:
                    if all(query is not kept for kept in keep):
                        query.read.complete = False
                following = keep
            pending = following
        return reads

    def _keep_backlog(self, reads: list[_BucketRead], works: list[JobWork], now_ms: int) -> None:
        """After a full tick (more jobs due than ``limits.max_jobs``), keep for the next tick (``_read_due``) the
        entries it read, due by now, of the jobs it left for later and of the jobs whose writes failed (so the
        next tick retries them, as it would by querying). A tick that was not full keeps nothing: its next tick
        queries every shard afresh."""
        # (a late entry is not carried: its lane is read from its position each tick, so an entry filed since at
        # an older due instant is taken first)
        due = [item for read in reads for item in read.items if item.due_at <= now_ms and item.lane != LATE]
        if all(item.job_id in self._considered for item in due):
            return
        retry = {work.plan.job.job_id for work in works if work.failed or not work.sent}
        for item in due:
            if item.job_id not in self._considered or item.job_id in retry:
                self._carry.setdefault(item.lane_key, []).append(item)

    # --- 2. plan ---------------------------------------------------------------------------------

    def _plan(self, reads: list[_BucketRead], now_ms: int, result: TickResult) -> list[JobWork]:
        """Plan each due job once, from its scheduling item read consistently (one BatchGetItem per 100 jobs),
        never from its entries, which are hints: a timer entry stays after its job moves on, and the old index
        lags behind writes. Each entry read gets a verdict from its job's state (:func:`_judge`): stale, the
        job's current fire, or held (ahead of a state write that may still land). At most ``limits.max_jobs``
        jobs, oldest dispatch first. Entries due after now (read by the look-ahead) are not planned: the earliest
        gives ``result.next_due_at``, when the loop ticks again."""
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
        ordered = sorted(first.values(), key=lambda e: (e.due_at, e.job_id))[: self.limits.max_jobs]
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
                logger.warning("runs of a late job unreadable; left due", job_id=job.job_id, error=str(error))
                result.errors += 1
                continue
            try:
                plan = plan_fires(job, now_ms, self.limits, dispatched=dispatched)
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
            (at for at in (self._earlier_until, self._unmoved_through(job)) if at is not None), default=None
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

    # --- 6. read positions and watermark ---------------------------------------------------------

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

    def _advance_cursors(self, reads: list[_BucketRead], done: set[DueEntry], now_ms: int) -> None:
        """Move each timer lane's read position over the entries this tick's queries returned from it that are
        done, in the lane's order, stopping at the first that is not; a :data:`LATE` entry is passed only once it
        is ``WATERMARK_MARGIN_MS`` old, so an entry filed a little late at a position before it is still read.
        The done entries left after a position are remembered, so the next ticks read them without judging them
        again. ``done``: the entries this tick made done (:meth:`_done_after_tick`)."""
        self._done |= {entry for entry in done if entry.lane != INDEX}
        for read in reads:
            for (shard, lane), fresh in read.fresh.items():
                if lane == INDEX:
                    continue
                key = (read.bucket, shard, lane)
                for entry in fresh:
                    if entry not in self._done or (lane == LATE and entry.at > now_ms - WATERMARK_MARGIN_MS):
                        break
                    self._cursors[key] = entry.order
                    self._done.discard(entry)

    def _save_positions(self, now_ms: int, guard: Guard) -> None:
        """Store the read positions (and the floor) when they moved and ``POSITIONS_SAVE_MS`` have passed since the
        last store (best effort: a failed store only makes a new leader re-read a little more)."""
        positions = encode_positions(self._cursors, self._floor, self._watermark)
        if self._saved is not None and (
            self._saved[0] == positions or now_ms - self._saved[1] < POSITIONS_SAVE_MS
        ):
            return
        term = guard.check()
        try:
            if self.control.save_positions(self.partition, positions, term=term):
                self._saved = (positions, now_ms)
        except Exception as error:
            logger.warning("read positions write failed", partition=self.partition, error=str(error))

    def _advance_watermark(
        self, reads: list[_BucketRead], done: set[DueEntry], now_ms: int, guard: Guard
    ) -> None:
        """Advance over the contiguous run of drained buckets from the watermark. A bucket is drained when it
        ended at least ``WATERMARK_MARGIN_MS`` ago, every lane of it was read to the end, and each entry read from
        it is done (``done``: this tick's, :meth:`_done_after_tick`, or remembered). The read positions and
        remembered entries of the buckets passed are dropped."""
        assert self._watermark is not None
        done = done | self._done
        by_bucket = {read.bucket: read for read in reads}

        def drained_from(bucket: int, end: int | None = None) -> int:
            """The first bucket from ``bucket`` (up to ``end``) not drained."""
            while end is None or bucket < end:
                read = by_bucket.get(bucket)
                if (
                    read is None
                    or not read.complete
                    or (bucket + 1) * self.bucket_ms + WATERMARK_MARGIN_MS > now_ms
                    or not all(item in done for item in read.items)
                ):
                    break
                bucket += 1
            return bucket

        if self._floor is not None:
            floor = drained_from(self._floor, self._watermark)
            self._floor = floor if floor < self._watermark else None
        target = drained_from(self._watermark)
        if target <= self._watermark:
            self._drop_behind()
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
        self._drop_behind()

    def _drop_behind(self) -> None:
        """Forget the read positions and remembered entries of the buckets no tick reads again."""
        oldest = self._oldest_read()
        self._cursors = {key: c for key, c in self._cursors.items() if key[0] >= oldest}
        self._done = {entry for entry in self._done if entry.bucket >= oldest}

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
