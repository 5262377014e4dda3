"""The repair of the due index on the jobs table: the move of the older layout's entries (the ``due`` GSI) to
timer items, and the anti-entropy pass that files a new timer item for a job whose entry no tick will read
(which entries: ``domain.due_repair.is_stuck``, the rule every store applies)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from boto3.dynamodb.conditions import Attr, ConditionBase
from botocore.exceptions import ClientError

from jobsched.domain.due_repair import RefilePass, is_stuck, refiled_entry, stuck_due_before
from jobsched.domain.registration import TIMER_LEAD_MS
from jobsched.dynamodb import layout
from jobsched.dynamodb.due_index import LAYOUT_KEY
from jobsched.dynamodb.dynamo import is_condition_failure
from jobsched.ports.jobs import EARLY, LATE, DueEntry

if TYPE_CHECKING:
    from jobsched.ports.jobs import DueIndex

MIGRATION_SETTLE_MS = 5 * 60_000
"""How long the ``due`` GSI must stay empty before ticks stop reading it (``DueRepair.migrate_due_index``)."""

REFILE_READ_UNITS = 300
"""Read units one ``DueRepair.refile_stuck`` pass may consume (a pass a minute: 5 a second on average, the
provisioned floor of a table), so the scan never takes the read capacity the scheduler's ticks need."""

REFILE_REST_MS = 60 * 60_000
"""Once ``DueRepair.refile_stuck`` has read the whole table, it starts over no sooner than this after it started
(epoch ms): a small table is read once an hour, not each minute; a table too big to read in that time is read on
without a rest."""

REFILE_CURSOR_KEY = {"pk": "layout#due", "sk": "refile"}
"""The jobs table's item holding where ``DueRepair.refile_stuck``'s scan of the table goes on (``cursor``)."""


@dataclass(frozen=True)
class MigrationPass:
    """What one pass of ``DueRepair.migrate_due_index`` did: ``moved`` entries from the ``due`` GSI to timer
    items; ``done``: no entry is left and ticks no longer read the GSI."""

    moved: int
    done: bool


class RefileLimits(TypedDict, total=False):
    """The bounds of one ``DueRepair.refile_stuck`` pass, each with its default there: ``budget`` (items read),
    ``read_units`` (read units consumed), ``seconds`` (wall time), ``page_size`` (items a Scan page)."""

    budget: int
    read_units: float
    seconds: float
    page_size: int


def stuck_filter(now_ms: int) -> ConditionBase:
    """The Scan filter of ``refile_stuck``'s candidates at ``now_ms`` (epoch ms), derived from
    ``domain.due_repair.is_stuck``: scheduling items on a timer lane (``timer_pk``) due before
    ``stuck_due_before(now_ms)``. A necessary condition only (the watermarks are not in it): every item it lets
    through is judged by ``is_stuck``. It saves the reply's bytes, not read units."""
    return (
        Attr("sk").eq(layout.SCHED_SK)
        & Attr("timer_pk").exists()
        & Attr("due_at").lt(stuck_due_before(now_ms))
    )


class DueRepair:
    """The due index's repair passes on the jobs table (``resources.JOBS``; ``table`` a boto3 ``Table``
    resource), writing timer items and reading states consistently through ``index`` (the store's
    ``ports.jobs.DueIndex``)."""

    def __init__(self, table: Any, index: DueIndex) -> None:
        self.table = table
        self.index = index

    def migrate_due_index(
        self, clock: Callable[[], int], *, bucket_ms: int, budget: int = 5_000, seconds: float = 20.0
    ) -> MigrationPass:
        """One pass of the move of the ``due`` GSI's entries (design, Upgrades in flight) to timer items, for
        at most ``budget`` entries and ``seconds``: the timer item of each entry is put, filed as any writer files
        one at its instant (``clock``, epoch ms, read for each entry): in the :data:`LATE` lane at now, or
        :data:`EARLY` at its due instant when that is ``TIMER_LEAD_MS`` away; version unknown, so judged by its
        instant. Then the scheduling item is pointed at it and leaves the GSI, only if it still shows that entry
        (a job the scheduler or the API moved meanwhile has left the GSI already).

        Idempotent and resumable: each pass scans what is left of the sparse GSI. Safe while schedulers run:
        until this marks the layout ``timers_only`` (``LAYOUT_KEY``), ticks also read the GSI, so an entry is
        found in one layout or the other, and a tick's fenced move lands on either. Marked once two passes at
        least ``MIGRATION_SETTLE_MS`` apart found the GSI empty (an older writer still deploying, the GSI's
        replication lag). 1 Scan page per 1 MB of the GSI, then per entry 1 BatchWriteItem of its timer item and
        1 conditional UpdateItem."""
        now_ms = clock()
        deadline = time.monotonic() + seconds
        marks = self.table.get_item(Key=LAYOUT_KEY, ConsistentRead=True).get("Item") or {}
        if marks.get("timers_only"):
            return MigrationPass(moved=0, done=True)
        legacy: list[DueEntry] = []
        kwargs: dict[str, Any] = {"IndexName": "due", "ProjectionExpression": "job_id, due_pk, due_at"}
        while len(legacy) < budget:
            page = self.table.scan(**kwargs)
            legacy += [layout.due_entry_from_item(layout.plain(item)) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if not legacy:
            empty_since = int(marks.get("empty_since", now_ms))
            done = now_ms - empty_since >= MIGRATION_SETTLE_MS
            self.table.put_item(
                Item={**LAYOUT_KEY, "empty_since": empty_since, **({"timers_only": True} if done else {})}
            )
            return MigrationPass(moved=0, done=done)
        if "empty_since" in marks:
            self.table.put_item(Item=LAYOUT_KEY)
        moved = 0
        for old in legacy[:budget]:
            if time.monotonic() > deadline:
                break
            now_ms = clock()
            position = max(old.due_at, now_ms)
            timer = DueEntry(
                old.job_id,
                old.partition,
                position // bucket_ms,
                old.shard,
                old.due_at,
                lane=EARLY if old.due_at - now_ms >= TIMER_LEAD_MS else LATE,
                position=position,
            )
            self.index.put_timers([timer])
            attributes = layout.due_attributes(timer)
            try:
                self.table.update_item(
                    Key={"pk": layout.job_pk(old.job_id), "sk": layout.SCHED_SK},
                    UpdateExpression="SET timer_pk = :pk, timer_sk = :sk REMOVE due_pk",
                    ConditionExpression="due_pk = :old AND due_at = :at",
                    ExpressionAttributeValues={
                        ":pk": attributes["timer_pk"],
                        ":sk": attributes["timer_sk"],
                        ":old": layout.due_pk(old.partition, old.bucket, old.shard),
                        ":at": old.due_at,
                    },
                )
                moved += 1
            except ClientError as error:
                if not is_condition_failure(error):
                    raise
        return MigrationPass(moved=moved, done=False)

    def refile_stuck(
        self,
        clock: Callable[[], int],
        *,
        bucket_ms: int,
        shards: int,
        watermarks: Mapping[int, int],
        budget: int = 30_000,
        read_units: float = REFILE_READ_UNITS,
        seconds: float = 10.0,
        page_size: int = 1000,
    ) -> RefilePass:
        """One pass of the due index's anti-entropy: scan on through the jobs table from where the last pass
        stopped (``REFILE_CURSOR_KEY``; Scan pages of ``page_size`` items), up to ``budget`` items read,
        ``read_units`` consumed (``REFILE_READ_UNITS``) or ``seconds``, and give every job whose timer item was
        passed unread a new one.

        Such a job is stuck by ``domain.due_repair.is_stuck`` at ``clock()`` (epoch ms) and ``watermarks``
        (partition -> watermark bucket, as stored): still in the due index on a timer item, due more than
        ``STUCK_AFTER_MS`` ago, in a bucket its partition has drained. The Scan pre-selects candidates by
        :func:`stuck_filter`. Its new timer item is ``domain.due_repair.refiled_entry``: the :data:`LATE` lane
        at the instant it is written, for the state's version and due instant, in one of ``shards`` due shards
        (buckets ``bucket_ms`` wide). A scheduling item this code cannot read is counted (``unreadable``) and
        skipped, as the tick does.

        Which jobs it saves: those whose timer item no tick will read. The ways known to lose one are rare (a
        write landing more than ``TIMER_LEAD_MS`` after its writer's clock was read and its writer dead, a
        rollback longer than a timer item's 7-day TTL); any of them would stop the job for good without this.
        A state of the GSI layout (``due_pk``) is the migration's. A table read to its end is
        read again ``REFILE_REST_MS`` after that reading started (a pass in between reads nothing). Each pass
        costs its Scan pages (0.5 read units per 4 KB read: every item read, whatever the filter) and 1 write
        unit per refile, plus a consistent BatchGetItem of the candidates (the Scan reads eventually
        consistent: a job moved a moment ago is not taken for stuck). With the defaults a pass reads at most
        30,000 items or 300 read units (about 2.4 MB: some 12,000 timer items), so the table is read at up to
        17 million items a day: it holds each job's spec and scheduling items, its audit events and every
        timer item of the last 7 days (one per fire: about 170 for an hourly job, 10,000 for one every
        minute), so 1 million hourly jobs are read in about 10 days. Resumable and idempotent (a second entry
        for the same fire is judged stale once the job moves)."""
        deadline = time.monotonic() + seconds
        marks = self.table.get_item(Key=REFILE_CURSOR_KEY, ConsistentRead=True).get("Item") or {}
        kwargs: dict[str, Any] = {"Limit": page_size}
        started_at = int(marks.get("started_at", 0))
        if marks.get("cursor"):
            kwargs["ExclusiveStartKey"] = json.loads(str(marks["cursor"]))
        elif clock() - started_at < REFILE_REST_MS:
            return RefilePass(scanned=0, refiled=[], wrapped=False)  # read to its end less than an hour ago
        else:
            started_at = clock()
        scanned, consumed, unreadable, refiled, wrapped = 0, 0.0, 0, [], False
        while scanned < budget and consumed < read_units and time.monotonic() < deadline:
            now_ms = clock()
            page = self.table.scan(
                FilterExpression=stuck_filter(now_ms), ReturnConsumedCapacity="TOTAL", **kwargs
            )
            scanned += int(page.get("ScannedCount", 0))
            consumed += float((page.get("ConsumedCapacity") or {}).get("CapacityUnits", 0))
            passed = []
            for item in page["Items"]:
                try:
                    due = layout.state_from_item(layout.plain(item)).due
                except (KeyError, TypeError, ValueError):
                    unreadable += 1
                    continue
                if "due_pk" in item:  # also still in the ``due`` GSI: the migration's to move
                    continue
                if is_stuck(due, now_ms=now_ms, watermarks=watermarks):
                    passed.append(due)
            if passed:  # the Scan reads eventually: only a state still pointing at that entry now is stuck
                states = self.index.scheduling_states([due.job_id for due in passed])
                passed = [due for due in passed if getattr(states.get(due.job_id), "due", None) == due]
            now_ms = clock()  # read again: the entries are filed at the instant they are written
            stuck = [  # in the partition's current shards (``due_shards`` may have been lowered since)
                refiled_entry(due, now_ms=now_ms, shards=shards, bucket_ms=bucket_ms) for due in passed
            ]
            self.index.put_timers(stuck)
            refiled += [entry.job_id for entry in stuck]
            if "LastEvaluatedKey" not in page:
                wrapped = True
                kwargs.pop("ExclusiveStartKey", None)
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        cursor = kwargs.get("ExclusiveStartKey")
        self.table.put_item(
            Item={
                **REFILE_CURSOR_KEY,
                "started_at": started_at,
                **({"cursor": json.dumps(cursor)} if cursor else {}),
            }
        )
        return RefilePass(scanned=scanned, refiled=refiled, wrapped=wrapped, unreadable=unreadable)
