"""The due index on the jobs table: the lanes a tick reads, its timer items, the scheduling states it reads
consistently and the fenced moves of the scheduler, and the scans that bootstrap the scheduler's high-water marks.

A job's entry is a timer item (``pk=due#<partition>#<bucket>#<shard>#<lane>``, ``sk`` its place in the lane,
``store.layout.timer_item``), pointed at by its scheduling item's ``timer_pk``/``timer_sk``; entries of the
GSI layout (design, Upgrades in flight) are in the ``due`` GSI (the :data:`INDEX` lane) until ``store.due_repair`` moves them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from jobsched.dynamodb.batch import STATES_BACKOFF_S, UNPROCESSED_BACKOFF_S, batch_get, until_processed
from jobsched.dynamodb.dynamo import is_condition_failure, old_item
from jobsched.dynamodb.layout import (
    SCHED_SK,
    due_attributes,
    due_entry_from_item,
    due_pk,
    job_pk,
    plain,
    state_from_item,
    timer_entry_of_item,
    timer_item,
    timer_pk,
    timer_sk,
)
from jobsched.ports.errors import Conflict
from jobsched.ports.jobs import INDEX, TIMER_LANES, DueEntry, SchedulingState, Unreadable

if TYPE_CHECKING:
    from jobsched.ports.jobs import DuePage, DueQuery, Move

LAYOUT_KEY = {"pk": "layout#due", "sk": "layout"}
"""The jobs table's item telling which due-index layout its entries may still be in (``DueIndexTable.due_lanes``)."""


def _state_or_none(item: dict[str, Any] | None) -> SchedulingState | None:
    try:
        return state_from_item(item) if item else None
    except (KeyError, TypeError, ValueError):
        return None


class DueIndexTable:
    """The due index of the jobs table (``resources.JOBS``): ``ports.jobs.DueIndex`` (through
    ``store.jobs.JobStore``) and the scans bootstrapping the scheduler's high-water marks.

    ``table`` is a boto3 ``Table`` resource.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    def due_lanes(self) -> tuple[str, ...]:
        """The timer lanes, plus the ``due`` GSI's :data:`INDEX` lane until ``DueRepair.migrate_due_index`` found
        it empty (the item ``pk=layout#due sk=layout``, ``timers_only``). 1 request."""
        item = self.table.get_item(Key=LAYOUT_KEY, ConsistentRead=True).get("Item") or {}
        return TIMER_LANES if item.get("timers_only") else (*TIMER_LANES, INDEX)

    def query_due(self, query: DueQuery) -> DuePage:
        """One page of ``query.lane``'s entries under ``query.key``, in the lane's order, with ``at <=
        query.up_to_ms``, after ``query.start``: a strongly consistent Query of its timer items; of the ``due``
        GSI (``due_pk``, ``due_at <= up_to_ms``) for the :data:`INDEX` lane. Returns ``(entries, the next page's
        start key or None)``. 1 request.

        Raises ``ValueError`` for an item that is no due entry."""
        if query.lane == INDEX:
            kwargs: dict[str, Any] = {
                "IndexName": "due",
                "KeyConditionExpression": Key("due_pk").eq(due_pk(*query.key))
                & Key("due_at").lte(query.up_to_ms),
            }
        else:
            low = timer_sk(query.start) + "\x01" if query.start is not None else "0"
            # every key of an entry at or before up_to_ms sorts at or below the bare digits of up_to_ms + 1
            high = f"{query.up_to_ms + 1:013d}"
            if high < low:
                return [], None
            kwargs = {
                "KeyConditionExpression": Key("pk").eq(timer_pk(*query.key, query.lane))
                & Key("sk").between(low, high),
                "ConsistentRead": True,
            }
        if query.after:
            kwargs["ExclusiveStartKey"] = query.after
        page = self.table.query(Limit=query.limit, **kwargs)
        items = [plain(i) for i in page["Items"]]
        if query.lane == INDEX:
            entries = [due_entry_from_item(i) for i in items]
        else:
            entries = [timer_entry_of_item(i) for i in items]
        return entries, page.get("LastEvaluatedKey")

    def put_timers(self, entries: Sequence[DueEntry]) -> None:
        """Put the timer items of ``entries`` (``BatchWriteItem``s of 25; 1 write unit each). Items DynamoDB
        returns unprocessed (a throttled key) are sent again after each of ``UNPROCESSED_BACKOFF_S``. Raises the
        client's error when a request fails, ``StoreUnavailable`` when items are still unprocessed after that."""
        items = [timer_item(entry) for entry in entries if entry.lane != INDEX]
        for start in range(0, len(items), 25):
            until_processed(
                lambda request: self.table.meta.client.batch_write_item(RequestItems=request).get(
                    "UnprocessedItems"
                ),
                {self.table.name: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]},
                UNPROCESSED_BACKOFF_S,
            )

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        """The current scheduling states of ``job_ids`` by job id, read strongly consistent (absent jobs are left
        out; an item no code path of ours wrote comes back ``Unreadable``). One BatchGetItem per 100 ids (plus
        retries of unprocessed keys after each of ``STATES_BACKOFF_S``, then ``StoreUnavailable``); 0.5 read
        units per item."""
        states: dict[str, SchedulingState | Unreadable] = {}
        for job_id, item in batch_get(
            self.table, job_ids, SCHED_SK, consistent=True, backoff_s=STATES_BACKOFF_S
        ).items():
            try:
                states[job_id] = state_from_item(item)
            except (KeyError, TypeError, ValueError) as error:
                states[job_id] = Unreadable(job_id, f"{type(error).__name__}: {error}")
        return states

    def move(self, move: Move) -> None:
        """Move a job's ``next_run_at`` after a fire, fenced by the scheduler's ``term``. 1 request.

        The move lands only on the scheduling state it was planned from (:class:`Move`: ``next_run_at`` still
        ``expected_next_run_at``, ``version`` still ``expected_version``, still in the due index and homed in
        ``partition``, ``term`` not above the mover's), else ``Conflict`` with the stored ``SchedulingState``
        (None when there is none). ``next_run_at=None`` ends the schedule (the job leaves the due index);
        ``due=None`` leaves the index; ``to_partition`` re-homes the job (its ``term`` restarts at 0).
        """
        sets = ["#term = :new_term"]
        removes: list[str] = []
        values: dict[str, Any] = {
            ":term": move.term,
            ":new_term": move.new_term,
            ":expected": move.expected_next_run_at,
            ":partition": move.partition,
        }
        if move.rehome:
            sets.append("#partition = :to_partition")
            values[":to_partition"] = move.to_partition
        # (an item of the GSI layout leaves the ``due`` GSI: ``due_pk`` goes; design, Upgrades in flight)
        removes += ["due_pk"]
        if move.next_run_at is None or move.due is None:
            removes += ["due_at", "timer_pk", "timer_sk"]
            if move.next_run_at is None:
                removes.append("next_run_at")
            else:
                sets.append("next_run_at = :next")
                values[":next"] = move.next_run_at
        else:
            sets.append("next_run_at = :next")
            values[":next"] = move.next_run_at
            for name, value in due_attributes(move.due).items():
                sets.append(f"{name} = :{name}")
                values[f":{name}"] = value
        condition = "next_run_at = :expected AND attribute_exists(due_at) AND #partition = :partition AND #term <= :term"
        if move.expected_version is None:
            condition += " AND attribute_not_exists(#version)"
        else:
            condition += " AND #version = :version"
            values[":version"] = move.expected_version
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            self.table.update_item(
                Key={"pk": job_pk(move.job_id), "sk": SCHED_SK},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#term": "term", "#partition": "partition", "#version": "version"},
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                stored = old_item(error)
                raise Conflict(
                    "scheduling item moved, edited or fenced",
                    _state_or_none(plain(stored) if stored else None),
                ) from error
            raise

    def highest_due_partition(self) -> int | None:
        """The highest scheduler partition any job's due entry is in, or None when no job is due.

        Scans the jobs' scheduling items (:meth:`_scan_due_keys`): only to bootstrap the partition high-water mark
        of a deployment that predates it (``scheduler_runtime.build_scheduler_group``)."""
        return max((entry.partition for entry in self._scan_due_keys()), default=None)

    def highest_due_shard(self) -> int | None:
        """The highest due shard any job's due entry is in, or None when no job is due.

        Scans the jobs' scheduling items (:meth:`_scan_due_keys`): only to bootstrap the due shards' high-water
        mark of a deployment that predates it (``Components.scheduler_group``)."""
        return max((entry.shard for entry in self._scan_due_keys()), default=None)

    def oldest_due_bucket(self, partition: int) -> int | None:
        """The oldest bucket holding the due entry of a job of scheduler ``partition``, or None when it has none.

        Scans the jobs' scheduling items (:meth:`_scan_due_keys`): only for bootstrapping a partition that has no
        watermark yet (first start, or a lost CONTROL table); never on the per-tick path.
        """
        return min((e.bucket for e in self._scan_due_keys() if e.partition == partition), default=None)

    def _scan_due_keys(self) -> Iterator[DueEntry]:
        """Every job's current due entry: a scan of the table's scheduling items, page by page, O(items in the
        table)."""
        kwargs: dict[str, Any] = {
            "FilterExpression": Attr("sk").eq(SCHED_SK) & Attr("due_at").exists(),
            "ProjectionExpression": "job_id, due_pk, due_at, timer_pk, timer_sk",
        }
        while True:
            page = self.table.scan(**kwargs)
            for item in page["Items"]:
                yield due_entry_from_item(plain(item))
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
