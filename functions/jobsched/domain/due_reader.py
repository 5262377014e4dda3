"""The read side of a scheduler tick, up to its watermark (design §4.8): which buckets of the due index a partition's ticks read, each
lane of each shard from its read position, the backlog a full tick carries to the next, the floor behind the
watermark, and the watermark itself.

Pure domain logic on the ports: the due index, the watermark store and the codec of the stored read positions
are passed in. One :class:`DueReader` serves the one ``Scheduler`` of a partition, which judges what it reads.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass, field

from jobsched.domain import planning
from jobsched.domain.backlog import Backlog
from jobsched.domain.planning import TickLimits
from jobsched.domain.tick_records import TickResult, TickShared
from jobsched.ports.control import Guard, WatermarkStore
from jobsched.ports.jobs import (
    HIGH_LANES,
    HIGH_SHARD,
    INDEX,
    LATE_LANES,
    DueCursor,
    DueEntry,
    DuePageToken,
    DueQuery,
)
from jobsched.ports.positions import PositionsCodec, ReadPositions

logger = logging.getLogger(__name__)

WATERMARK_MARGIN_MS = 15_000
"""A bucket counts as drained only once now is past its end by this much. Writers (API, scheduler) put an
entry in the bucket of ``max(due_at, their now)``; the margin covers a writer whose clock is slightly behind
and the due index's replication delay (a GSI is eventually consistent)."""


UPGRADE_REWIND_MS = 10 * 60_000
"""How far behind now the first leader of a partition reading timer items reads again (its stored watermark
was written by a leader of the GSI layout, which reads no timer item: during the deploy it may have closed
buckets into which the new API or the migration filed some; design, Upgrades in flight). Covers the old leader's last
invocation (about 67 s) and the minutes a deploy takes to update every function."""

LATE_PAGES_MAX = 10
"""Pages of a late lane a full tick reads on after it has its ``max_jobs`` entries (``DueReader.read``)."""

POSITIONS_SAVE_MS = 5_000
"""The read positions (``DueReader`` cursors) are stored at most this often: a new leader re-reads at most this
much more of each lane than the last one had passed (its entries then cost one state read per job, once)."""


def _merged(older: list[DueEntry], fresh: list[DueEntry]) -> list[DueEntry]:
    """The entries of two lists each in lane order (``DueEntry.order``), merged in that order, each once."""
    if not older or not fresh:
        return older or fresh
    merged: list[DueEntry] = []
    for entry in heapq.merge(older, fresh, key=lambda e: e.order):
        if not merged or merged[-1].order != entry.order:
            merged.append(entry)
    return merged


def read_floor(
    watermark: int, positions: ReadPositions | None, now_ms: int, bucket_ms: int
) -> tuple[dict[tuple[int, int, str], DueCursor], int | None]:
    """A new leader's read positions and floor, from its partition's stored ``watermark`` (bucket) and read
    ``positions`` (decoded, or None when none are stored): ``(cursors, floor)``, the floor a bucket below the
    watermark from which the ticks read again until drained, or None. Without positions the watermark was stored
    by code that reads no timer items (the GSI layout's: design, Upgrades in flight): the floor is ``UPGRADE_REWIND_MS``
    before ``now_ms``. Positions stored with a watermark behind the stored one mean a leader that stores none moved
    it (a rollback to the GSI layout's code), which may have closed buckets holding some: the floor is the
    positions' watermark. (A failover a few seconds after a watermark move does the same, harmlessly.)"""
    if positions is None:
        floor: int | None = (now_ms - UPGRADE_REWIND_MS) // bucket_ms
        cursors: dict[tuple[int, int, str], DueCursor] = {}
    else:
        cursors, floor, saved_at = dict(positions.cursors), positions.floor, positions.watermark
        if saved_at is not None and saved_at < watermark:
            floor = saved_at if floor is None else min(floor, saved_at)
    return cursors, (floor if floor is not None and floor < watermark else None)


@dataclass
class BucketRead:
    """What one tick read of one bucket: ``complete``: every lane of every shard read from its position to the end
    in this tick; ``items``: the entries not known done yet; ``fresh``: per ``(shard, lane)`` what this tick's
    queries returned, in the lane's order, from the lane's read position."""

    bucket: int
    complete: bool = True
    items: list[DueEntry] = field(default_factory=list)
    fresh: dict[tuple[int, str], list[DueEntry]] = field(default_factory=dict)


@dataclass
class _Pending:
    read: BucketRead
    shard: int
    lane: str
    up_to: int
    start: DueCursor | None
    token: DuePageToken | None = None


class DueReader:
    """The due-index reads of one scheduler partition's ticks, and their positions.

    ``shared``: the partition, its due index, the clock (epoch ms) and the pool that runs the parallel queries
    (``TickShared``); ``control``: where the watermark and the read positions are stored, ``positions`` their
    codec; ``bucket_ms``: the bucket width (ms); ``lookahead_ms``: how far past now a tick looks
    (``planning.horizon_ms``); ``read_shards``: the due shards read. Holds, while leading (:meth:`load` to
    :meth:`forget`): the watermark; per (bucket, shard, lane) the order of the last entry passed (every entry up to
    it is done) and the entries after it known done (read again, not judged again), stored every
    ``POSITIONS_SAVE_MS`` so a new leader starts near them; the floor; and the backlog a full tick read but did not
    reach (:meth:`keep_backlog`).
    """

    def __init__(
        self,
        shared: TickShared,
        *,
        control: WatermarkStore,
        positions: PositionsCodec,
        limits: TickLimits,
        bucket_ms: int,
        lookahead_ms: int,
        read_shards: int,
    ) -> None:
        self.shared = shared
        self.control = control
        self.positions = positions
        self.limits = limits
        self.bucket_ms = bucket_ms
        self.lookahead_ms = lookahead_ms
        self.read_shards = read_shards
        self._watermark: int | None = None
        self._lanes: tuple[str, ...] = ()
        self._cursors: dict[tuple[int, int, str], DueCursor] = {}
        self._saved: tuple[str, int] | None = None  # (positions stored, when)
        self._done: set[DueEntry] = set()
        # the oldest bucket behind the watermark still to read (UPGRADE_REWIND_MS)
        self._floor: int | None = None
        # The backlog full ticks read but did not reach, in dispatch order with the lanes it holds: the next ticks
        # take it instead of querying those lanes again (see read). Only a hint: every entry is checked against
        # the job's state read consistently, and the due index stays the truth (a lost backlog costs a query,
        # no run).
        self._backlog = Backlog()
        # What a carried lane's reads returned after its read position, in the lane's order: the next ticks
        # query such a lane only before its backlog, so its position passes the read-ahead entries from here.
        self._unpassed: dict[tuple[int, int, str], list[DueEntry]] = {}
        # what the current tick took of the backlog (read), until it puts back what it did not use (keep_backlog)
        self._taken: list[DueEntry] = []

    @property
    def watermark(self) -> int | None:
        """The in-memory watermark bucket (None until leading)."""
        return self._watermark

    def load(self, guard: Guard) -> None:
        """Load the watermark, the read positions and the lanes to read after acquiring the lease. If the
        partition has no watermark yet (first start), it starts at the oldest bucket holding an entry of this
        partition (a one-off scan of the jobs' states), or at now's bucket minus the margin, and is stored. A
        watermark stored without read positions was written by the GSI layout's code: the ticks then also
        read the buckets from ``UPGRADE_REWIND_MS`` ago (the floor) until they are drained; one ahead of the
        watermark the positions were stored with was moved by a leader that did not store them (a rollback to that
        code), and the floor is that watermark (:func:`read_floor`). Raises what the stores' reads raise and
        ``LeaseLost``."""
        self._lanes = self.shared.jobs.due_lanes()
        self._done, self._unpassed, self._taken = set(), {}, []
        self._backlog.clear()
        self._cursors, self._saved, self._floor = {}, None, None
        stored = self.control.read_watermark(self.shared.partition)
        if stored is not None:
            self._watermark = stored
            text = self.control.read_positions(self.shared.partition)
            if text is not None:
                self._saved = (text, self.shared.clock())
            positions = self.positions.decode(text) if text is not None else None
            self._cursors, self._floor = read_floor(stored, positions, self.shared.clock(), self.bucket_ms)
            self._drop_behind()
            return
        now = self.shared.clock()
        start = (now - WATERMARK_MARGIN_MS) // self.bucket_ms
        first = self.shared.jobs.oldest_due_bucket(self.shared.partition)
        if first is not None:
            start = min(start, first)
        term = guard.check()
        if not self.control.advance_watermark(self.shared.partition, start, term=term, now_ms=now):
            stored = self.control.read_watermark(self.shared.partition)
            start = stored if stored is not None else start
        logger.info("watermark initialised", extra={"partition": self.shared.partition, "bucket": start})
        self._watermark = start

    def forget(self) -> None:
        """Forget leader state after losing the lease (the next holder reloads it from the store)."""
        self._watermark = None
        self._unpassed, self._taken = {}, []
        self._backlog.clear()
        self._cursors, self._saved, self._done, self._floor = {}, None, set(), None

    # --- read ------------------------------------------------------------------------------------

    def horizon(self, now_ms: int) -> int:
        """The last dispatch instant a tick at ``now_ms`` looks at (epoch ms): now plus the look-ahead up to just
        before the next tick (``lookahead_ms``; ``planning.horizon_ms``)."""
        return planning.horizon_ms(now_ms, self.lookahead_ms)

    def _buckets(self, now_ms: int) -> list[int]:
        """Buckets to read, oldest first: from the watermark to now (bounded by ``limits.backlog_buckets`` plus
        the newest two when far behind), from the floor while there is one (``UPGRADE_REWIND_MS``). Nothing else
        behind the watermark: writers file an entry at or after their own instant (``registration.due_entry``),
        and the watermark passes a bucket only ``WATERMARK_MARGIN_MS`` after its end."""
        newest = self.horizon(now_ms) // self.bucket_ms
        oldest = min(self._oldest_read(), newest)
        if newest - oldest + 1 <= self.limits.backlog_buckets + 2:
            return list(range(oldest, newest + 1))
        return [*range(oldest, oldest + self.limits.backlog_buckets), newest - 1, newest]

    def _oldest_read(self) -> int:
        """The oldest bucket the ticks read: the watermark, or the floor behind it while there is one."""
        assert self._watermark is not None
        return self._watermark if self._floor is None else min(self._floor, self._watermark)

    def read(self, now_ms: int, result: TickResult) -> list[BucketRead]:
        """Query every (bucket, shard, lane) in parallel for the entries due by the tick's horizon (now plus the
        look-ahead: those after now are only noted by the tick), each from its read position (``_cursors``),
        following pages while under ``limits.max_jobs`` and, in a full tick, while the entries read and carried
        are under ``limits.read_ahead``; counts the queries in ``result.queries``. Entries known done (``_done``)
        are dropped from what the tick judges, not from what the cursors pass. Adds the carried backlog's first
        ``max_jobs`` entries (dispatch order, :class:`~jobsched.domain.backlog.Backlog`) to what it returns.
        Raises the due index's errors (the backlog is then untouched).

        A lane for which the previous ticks left a backlog (they were full: :meth:`keep_backlog`) is queried only
        for entries filed before the oldest of its backlog, and when the backlog alone fills this tick, every other
        lane only for entries filed before the oldest of the whole backlog: an entry written since (a one-off
        accepted late, a resume, a catching-up job's next fire) still goes first, oldest first, as a fresh read
        would take it, instead of waiting behind the backlog past its misfire grace. Such a bucket counts as not
        read to the end (the watermark waits for a tick that reads it to its end). During a rush this saves
        re-reading ``page_size`` entries per lane in all but one in ``shards * page_size / max_jobs`` ticks.

        The ``high`` lanes (``ports.jobs.HIGH_LANES``, of shard ``HIGH_SHARD`` only) give way only to a ``high``
        backlog that fills a tick: however full the other lanes' backlog, they are read to the horizon (a ``high``
        backlog smaller than ``max_jobs`` is let go and read again with them), and their pages followed until
        their entries alone fill the tick, so the tick finds every ``high`` fire due now (design §4.10)."""
        horizon = self.horizon(now_ms)
        self._taken = []
        reads = [BucketRead(b) for b in self._buckets(now_ms)]
        shards = range(self.read_shards)
        lanes = self._lanes
        read_buckets = {r.bucket for r in reads}
        # A high backlog smaller than a tick is let go and its lanes read again to the horizon, so that a high
        # entry filed behind it goes before the normal backlog in this tick (a high lane gives way only to a high
        # backlog that fills the tick; a normal backlog never holds back a high entry)
        high_count = self._backlog.high_count
        let_go = 0 < high_count < self.limits.max_jobs
        held = {
            key: hold
            for key, hold in self._backlog.lanes.items()
            if key[0] in read_buckets and not (let_go and key[2] in HIGH_LANES)
        }
        carried = len(self._backlog) - (high_count if let_go else 0)
        full = {True: high_count >= self.limits.max_jobs, False: carried >= self.limits.max_jobs}
        oldest_kept = {
            True: min((h.oldest_at for k, h in held.items() if k[2] in HIGH_LANES), default=horizon + 1),
            False: min((h.oldest_at for h in held.values()), default=horizon + 1),
        }
        pending: list[_Pending] = []
        total, late_pages, high_total = carried, 0, 0
        for read in reads:
            for shard in shards:
                for lane in lanes:
                    if lane in HIGH_LANES and shard != HIGH_SHARD:
                        continue  # (no entry is filed there: registration.due_entry)
                    hold = held.get((read.bucket, shard, lane))
                    up_to = horizon
                    if hold is not None:
                        up_to = min(horizon, hold.oldest_at - 1)
                    elif full[lane in HIGH_LANES] and lane not in LATE_LANES:
                        # (a late entry sorts at its writing, not at its due instant: its lane is read whole)
                        up_to = min(horizon, oldest_kept[lane in HIGH_LANES] - 1)
                    # an entry is filed before its bucket ends (``registration.due_entry``): a read up to the
                    # bucket's last instant, or to the horizon, has all of it
                    if hold is not None or up_to < min(horizon, (read.bucket + 1) * self.bucket_ms - 1):
                        read.complete = False  # not read to its end in this tick
                    start = None if lane == INDEX else self._cursors.get((read.bucket, shard, lane))
                    read.fresh[(shard, lane)] = []
                    pending.append(_Pending(read, shard, lane, up_to, start))
        while pending:
            pages = list(
                self.shared.pool.map(
                    lambda p: self.shared.jobs.query_due(
                        DueQuery(
                            self.shared.partition,
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
                high_total += len(new) if query.lane in HIGH_LANES else 0
                if next_key:
                    query.token = next_key
                    following.append(query)
            if total >= self.limits.max_jobs:
                # A full tick. The late lane is sorted by writing, not by due instant: an entry filed since may be
                # older than all it read so far, so its pages are read on, up to LATE_PAGES_MAX in a tick. A high
                # lane's pages are read on until the high entries alone fill the tick (they go first).
                late_pages += 1
                keep = [
                    q
                    for q in following
                    if (q.lane in LATE_LANES and late_pages <= LATE_PAGES_MAX)
                    or (q.lane in HIGH_LANES and high_total < self.limits.max_jobs)
                    or (q.lane not in LATE_LANES and total < self.limits.read_ahead)
                ]
                for query in following:
                    if all(query is not kept for kept in keep):
                        query.read.complete = False
                following = keep
            pending = following
        # the backlog's first max_jobs, in dispatch order: what it holds beyond them waits for the next ticks
        by_bucket = {r.bucket: r for r in reads}
        if let_go:  # (read again above, from their lanes' positions: passed only once done)
            self._backlog.drop_high()
        self._taken = self._backlog.take(self.limits.max_jobs)
        for item in self._taken:
            if item.bucket in by_bucket:  # (one of a bucket not read now is read again from its lane)
                by_bucket[item.bucket].items.append(item)
        return reads

    def keep_backlog(
        self, reads: list[BucketRead], considered: set[str], retry: set[str], now_ms: int
    ) -> None:
        """After a full tick (more jobs due than ``limits.max_jobs``), put in front of the backlog (:meth:`read`)
        the entries it read, due by now, of the jobs it left for later (not in ``considered``, the job ids it
        planned or found stale) and of the jobs whose writes failed (``retry``: so the next tick retries them, as
        it would by querying), in dispatch order among themselves (``Backlog.put_back``): a full tick's read-ahead
        is ordered once, the next ticks take it ``max_jobs`` at a time. A tick that was not full and left no
        backlog keeps nothing: its next tick queries every shard afresh."""
        # (a late entry is not carried: its lane is read from its position each tick, so an entry filed since at
        # an older due instant is taken first)
        due = [
            item
            for read in reads
            for item in read.items
            if item.due_at <= now_ms and item.lane not in LATE_LANES
        ]
        self._taken = []
        if all(item.job_id in considered for item in due) and not len(self._backlog):
            return
        self._backlog.put_back(item for item in due if item.job_id not in considered or item.job_id in retry)

    def give_back(self) -> None:
        """After a tick that failed between :meth:`read` and :meth:`keep_backlog` (a store's error): put back in
        front of the backlog what the tick took of it, so the next tick takes those entries in their turn, as
        they were never judged (none is passed or done: the positions move in :meth:`advance` alone)."""
        taken, self._taken = self._taken, []
        self._backlog.put_back(taken)

    # --- read positions and watermark ------------------------------------------------------------

    def advance(self, reads: list[BucketRead], done: set[DueEntry], now_ms: int, guard: Guard) -> None:
        """After a tick: move the read positions over the entries it made ``done``, advance the watermark over the
        buckets drained, and store the positions when due. Raises ``LeaseLost``; a failed store is logged (the
        next tick tries again)."""
        self._advance_cursors(reads, done, now_ms)
        self._advance_watermark(reads, done, now_ms, guard)
        self._save_positions(now_ms, guard)

    def _advance_cursors(self, reads: list[BucketRead], done: set[DueEntry], now_ms: int) -> None:
        """Move each timer lane's read position over the entries this tick's queries returned from it that are
        done, in the lane's order, stopping at the first that is not; a :data:`LATE` entry is passed only once it
        is ``WATERMARK_MARGIN_MS`` old, so an entry filed a little late at a position before it is still read.
        The done entries left after a position are remembered, so the next ticks read them without judging them
        again. A lane carried to the next tick (``keep_backlog``) keeps what its reads returned after its position
        (``_unpassed``), so its position passes the entries read ahead as they are done, not only those of the
        tick that read them, and a lane queried again starts near where its backlog ended. ``done``: the entries
        this tick made done."""
        self._done |= {entry for entry in done if entry.lane != INDEX}
        unpassed, self._unpassed = self._unpassed, {}
        carried = self._backlog.lanes
        for read in reads:
            for (shard, lane), fresh in read.fresh.items():
                if lane == INDEX:
                    continue
                key = (read.bucket, shard, lane)
                entries = _merged(unpassed.get(key, []), fresh)
                passed = 0
                for entry in entries:
                    if entry not in self._done or (
                        lane in LATE_LANES and entry.at > now_ms - WATERMARK_MARGIN_MS
                    ):
                        break
                    self._cursors[key] = entry.order
                    self._done.discard(entry)
                    passed += 1
                if key in carried and passed < len(entries):
                    self._unpassed[key] = entries[passed:] if passed else entries

    def _save_positions(self, now_ms: int, guard: Guard) -> None:
        """Store the read positions (and the floor) when they moved and ``POSITIONS_SAVE_MS`` have passed since the
        last store (best effort: a failed store only makes a new leader re-read a little more)."""
        positions = self.positions.encode(ReadPositions(self._cursors, self._floor, self._watermark))
        if self._saved is not None and (
            self._saved[0] == positions or now_ms - self._saved[1] < POSITIONS_SAVE_MS
        ):
            return
        term = guard.check()
        try:
            if self.control.save_positions(self.shared.partition, positions, term=term):
                self._saved = (positions, now_ms)
        except Exception as error:
            logger.warning(
                "read positions write failed", extra={"partition": self.shared.partition, "error": str(error)}
            )

    def _advance_watermark(
        self, reads: list[BucketRead], done: set[DueEntry], now_ms: int, guard: Guard
    ) -> None:
        """Advance over the contiguous run of drained buckets from the watermark. A bucket is drained when it
        ended at least ``WATERMARK_MARGIN_MS`` ago, every lane of it was read to the end, and each entry read from
        it is done (``done``: this tick's, or remembered). The read positions and remembered entries of the
        buckets passed are dropped."""
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
            if self.control.advance_watermark(self.shared.partition, target, term=term, now_ms=now_ms):
                self._watermark = target
            else:
                stored = self.control.read_watermark(self.shared.partition)
                if stored is not None and stored > self._watermark:
                    self._watermark = stored
        except Exception as error:
            logger.warning(
                "watermark write failed", extra={"partition": self.shared.partition, "error": str(error)}
            )
        self._drop_behind()

    def _drop_behind(self) -> None:
        """Forget the read positions and remembered entries of the buckets no tick reads again."""
        oldest = self._oldest_read()
        self._cursors = {key: c for key, c in self._cursors.items() if key[0] >= oldest}
        self._unpassed = {key: e for key, e in self._unpassed.items() if key[0] >= oldest}
        self._done = {entry for entry in self._done if entry.bucket >= oldest}

    @property
    def backlog(self) -> Backlog:
        """The backlog carried to the next tick (:meth:`keep_backlog`)."""
        return self._backlog

    def first_unread_ms(self, reads: list[BucketRead]) -> int | None:
        """The start (epoch ms) of the oldest bucket between the watermark and the newest of ``reads`` that this
        tick did not read (it was far behind: ``limits.backlog_buckets``), or None."""
        if self._watermark is None or not reads:
            return None
        read_buckets = {read.bucket for read in reads}
        unread = [b for b in range(self._watermark, reads[-1].bucket) if b not in read_buckets]
        return unread[0] * self.bucket_ms if unread else None
