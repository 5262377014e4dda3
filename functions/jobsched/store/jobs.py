"""The jobs table: job CRUD for the API, and the due-index poll and fenced moves for the scheduler."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from jobsched.domain.registration import TIMER_LEAD_MS, due_entry
from jobsched.models import Job
from jobsched.ports.errors import Conflict, NameTaken, NotFound, StoreUnavailable
from jobsched.ports.jobs import (
    EARLY,
    INDEX,
    LATE,
    STATE_BATCH,
    TIMER_LANES,
    AuditEvent,
    DueEntry,
    SchedulingState,
    StoredJob,
    Unreadable,
)
from jobsched.ports.runs import OverlapHolder, OverlapRequest
from jobsched.store.dynamo import is_condition_failure, old_item, transact_put
from jobsched.store.errors import unavailable_on_failure
from jobsched.store.layout import (
    RUNNING_SK,
    SCHED_SK,
    SPEC_SK,
    due_attributes,
    due_entry_from_item,
    due_pk,
    event_from_item,
    event_item,
    events_pk,
    history_owner,
    is_tombstone,
    job_from_items,
    job_pk,
    name_key,
    plain,
    sched_item,
    spec_item,
    state_from_item,
    timer_entry,
    timer_item,
    timer_pk,
    timer_sk,
    tombstone_item,
)

MIGRATION_SETTLE_MS = 5 * 60_000
"""How long the ``due`` GSI must stay empty before ticks stop reading it (``JobStore.migrate_due_index``)."""

UNPROCESSED_BACKOFF_S = (0.05, 0.1, 0.2)
"""Seconds waited before each retry of the items or keys a batch request returned unprocessed (DynamoDB
throttled part of it: the SDK retries only a request refused whole), exponential as the DynamoDB developer
guide asks of BatchGetItem and BatchWriteItem callers."""

STATES_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8)
"""The tick's read of its due jobs' states (``scheduling_states``) waits longer for keys left unprocessed (1.55 s
in all) before the tick fails: a failed tick throws away its read, and the next starts over."""

REFILE_READ_UNITS = 300
"""Read units one ``JobStore.refile_stuck`` pass may consume (a pass a minute: 5 a second on average, the
provisioned floor of a table), so the scan never takes the read capacity the scheduler's ticks need."""

STUCK_AFTER_MS = 30 * 60_000
"""How long (ms) past its due instant a job in a drained bucket waits before ``JobStore.refile_stuck`` takes its
timer item for lost: well past the 10 minutes a new leader may re-read behind the watermark after an upgrade."""

REFILE_REST_MS = 60 * 60_000
"""Once ``JobStore.refile_stuck`` has read the whole table, it starts over no sooner than this after it started
(epoch ms): a small table is read once an hour, not each minute; a table too big to read in that time is read on
without a rest."""

REFILE_CURSOR_KEY = {"pk": "layout#due", "sk": "refile"}
"""The jobs table's item holding where ``JobStore.refile_stuck``'s scan of the table goes on (``cursor``)."""

LAYOUT_KEY = {"pk": "layout#due", "sk": "layout"}
"""The jobs table's item telling which due-index layout its entries may still be in (``JobStore.due_lanes``)."""

if TYPE_CHECKING:
    from jobsched.ports.jobs import DuePage, DueQuery, Move, Rewrite


@dataclass(frozen=True)
class MigrationPass:
    """What one pass of ``JobStore.migrate_due_index`` did: ``moved`` entries from the ``due`` GSI to timer
    items; ``done``: no entry is left and ticks no longer read the GSI."""

    moved: int
    done: bool


@dataclass(frozen=True)
class RefilePass:
    """What one pass of ``JobStore.refile_stuck`` did: items ``scanned``, the ids of the jobs ``refiled``,
    whether the pass reached the table's end (``wrapped``: the next pass starts over), and how many scheduling
    items it could not read (``unreadable``, skipped)."""

    scanned: int
    refiled: list[str]
    wrapped: bool
    unreadable: int = 0


def _until_processed(
    send: Callable[[dict[str, Any]], dict[str, Any] | None],
    request: dict[str, Any],
    backoff_s: Sequence[float],
) -> None:
    """Send a batch ``request`` (``RequestItems``) with ``send``, which returns what DynamoDB left unprocessed
    (``UnprocessedItems``/``UnprocessedKeys``: part of the batch throttled, which the SDK does not retry), and
    send that again after each of ``backoff_s`` seconds. Raises ``StoreUnavailable`` when some is still
    unprocessed after the last."""
    for wait_s in (*backoff_s, None):
        left = send(request)
        if not left:
            return
        if wait_s is None:
            raise StoreUnavailable("batch items left unprocessed (throttled)")
        request = left
        time.sleep(wait_s)


def _stored(spec: dict[str, Any], sched: dict[str, Any] | None) -> StoredJob:
    return StoredJob(job_from_items(spec, sched), state_from_item(sched) if sched else None)


def _state_or_none(item: dict[str, Any] | None) -> SchedulingState | None:
    try:
        return state_from_item(item) if item else None
    except (KeyError, TypeError, ValueError):
        return None


class JobStore:
    """DynamoDB adapter of the jobs table (``resources.JOBS``): implements ``ports.jobs.JobRepository`` and
    ``ports.jobs.DueIndex``; items as built by ``store.layout``.

    ``table`` is a boto3 ``Table`` resource.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    # --- API side -----------------------------------------------------------------------------

    def _event_put(self, event: AuditEvent | None) -> list[dict[str, Any]]:
        """The transaction item recording ``event`` (none without one)."""
        return [] if event is None else [transact_put(self.table.name, event_item(event))]

    def create(self, job: Job, state: SchedulingState, event: AuditEvent | None = None) -> None:
        """Write a new job's spec, scheduling item, name lock and ``event`` in one transaction, after the timer
        item of its due entry (a hint until the transaction lands; left to expire when it is refused).

        Raises ``NameTaken(job_id)`` when the owner already has a job with this name, ``Conflict`` when the
        name was taken and released meanwhile.
        """
        spec, sched = spec_item(job), sched_item(state)
        name_item = {**name_key(spec["owner"], spec["name"]), "job_id": spec["job_id"]}
        self._file(state)
        try:
            self.table.meta.client.transact_write_items(
                TransactItems=[
                    transact_put(self.table.name, name_item, "attribute_not_exists(pk)", return_old=True),
                    transact_put(self.table.name, spec),
                    transact_put(self.table.name, sched),
                    *self._event_put(event),
                ]
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            reasons = error.response.get("CancellationReasons", [])
            existing = self.job_id_by_name(spec["owner"], spec["name"])
            if existing is None and reasons:
                raise Conflict("job creation raced; retry") from error
            raise NameTaken(existing or "") from error

    def _file(self, state: SchedulingState) -> None:
        """Put the timer item of ``state``'s due entry, if it has one (1 request, 1 write unit)."""
        if state.due is not None and state.due.lane != INDEX:
            self.table.put_item(Item=timer_item(state.due))

    def job_id_by_name(self, owner: str, name: str) -> str | None:
        """The id of the owner's job called ``name``, or None."""
        item = self.table.get_item(Key=name_key(owner, name), ConsistentRead=True).get("Item")
        return item["job_id"] if item else None

    def get(self, job_id: str) -> StoredJob:
        """The job and its scheduling state, read consistently in one query. Raises ``NotFound``."""
        items = self.table.query(KeyConditionExpression=Key("pk").eq(job_pk(job_id)), ConsistentRead=True)[
            "Items"
        ]
        by_sk = {item["sk"]: plain(item) for item in items}
        if SPEC_SK not in by_sk or is_tombstone(by_sk[SPEC_SK]):
            raise NotFound(job_id)
        return _stored(by_sk[SPEC_SK], by_sk.get(SCHED_SK))

    @unavailable_on_failure
    def get_spec(self, job_id: str) -> Job | None:
        """The job as its spec item alone gives it (what a worker needs to run it: no scheduling state), or
        None when deleted. Raises ``StoreUnavailable`` on a transient failure."""
        item = self.table.get_item(Key={"pk": job_pk(job_id), "sk": SPEC_SK}).get("Item")
        return job_from_items(item, None) if item and not is_tombstone(item) else None

    @unavailable_on_failure
    def get_specs(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """``get_spec`` of each of ``job_ids`` by job id, the deleted ones left out: a worker batch's jobs read
        together. One BatchGetItem per 100 ids (plus retries of unprocessed keys), eventually consistent as
        ``get_spec``: the same read units as one GetItem each. Raises ``StoreUnavailable`` on a transient
        failure."""
        return {
            job_id: job_from_items(item, None)
            for job_id, item in self._batch_get(list(job_ids), SPEC_SK).items()
            if not is_tombstone(item)
        }

    # --- worker side: the overlap lock ------------------------------------------------------------
    #
    # A job with ``overlap: skip`` runs one try at a time: its worker holds the item ``pk=job#<id> sk=running``
    # (run_id, attempt, worker, heartbeat_at) from before the target starts until its result is recorded,
    # refreshing ``heartbeat_at`` with each heartbeat. Exact whatever the history length, 1 write to take it
    # and 1 to give it back; a holder whose heartbeat went stale (its worker died) loses it to the next claim.

    @unavailable_on_failure
    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder | None:
        """Take the job's overlap lock for ``request``'s try ``(run_id, attempt, worker)``. 1 request.

        Succeeds when no one holds it, its holder's ``heartbeat_at`` is older than ``stale_before_ms`` (epoch
        ms: the holder was lost), or the holder is this run (a retry or a takeover of it); with ``replacing`` (a
        holder as returned by a refusal), exactly when that holder still holds it (its try is known to be
        over: it finished but could not give the lock back). Returns None when taken, else the try holding
        it. ``expires_at_s`` (epoch s, the table's TTL) bounds how long a lock left behind by a crash is kept.
        """
        replacing = request.replacing
        if replacing is None:
            own = "run_id = :run"
            values: dict[str, Any] = {":stale": request.stale_before_ms, ":run": request.run_id}
            if request.held_after_ms is not None:  # not a lock held on past its try's record
                own = "(run_id = :run AND heartbeat_at <= :held)"
                values[":held"] = request.held_after_ms
            condition = f"attribute_not_exists(pk) OR heartbeat_at < :stale OR {own}"
        else:
            condition = "run_id = :held_run AND attempt = :held_attempt AND worker = :held_worker"
            values = {
                ":held_run": replacing.run_id,
                ":held_attempt": replacing.attempt,
                ":held_worker": replacing.worker,
            }
        try:
            self.table.put_item(
                Item={
                    "pk": job_pk(request.job_id),
                    "sk": RUNNING_SK,
                    "run_id": request.run_id,
                    "attempt": request.attempt,
                    "worker": request.worker,
                    "heartbeat_at": request.now_ms,
                    "expires_at": request.expires_at_s,
                },
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                held = plain(old_item(error) or {})
                return OverlapHolder(
                    run_id=str(held.get("run_id", "?")),
                    attempt=held.get("attempt"),
                    worker=held.get("worker"),
                    heartbeat_at=held.get("heartbeat_at"),
                )
            raise
        return None

    @unavailable_on_failure
    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool:
        """Refresh the lock's ``heartbeat_at`` if this try still holds it. 1 request. False: it does not."""
        try:
            self.table.update_item(
                Key={"pk": job_pk(job_id), "sk": RUNNING_SK},
                UpdateExpression="SET heartbeat_at = :now",
                ConditionExpression="run_id = :run AND attempt = :attempt AND worker = :worker",
                ExpressionAttributeValues={
                    ":now": now_ms,
                    ":run": run_id,
                    ":attempt": attempt,
                    ":worker": worker,
                },
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True

    @unavailable_on_failure
    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> None:
        """Give the lock back if this try holds it (else nothing). 1 request."""
        try:
            self.table.delete_item(
                Key={"pk": job_pk(job_id), "sk": RUNNING_SK},
                ConditionExpression="run_id = :run AND attempt = :attempt AND worker = :worker",
                ExpressionAttributeValues={":run": run_id, ":attempt": attempt, ":worker": worker},
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise

    def history_owner(self, job_id: str) -> str | None:
        """The owner of the job's run history: of the job, or of the deleted job while its tombstone lasts
        (until retention); None when there is neither. One strongly consistent GetItem."""
        item = self.table.get_item(
            Key={"pk": job_pk(job_id), "sk": SPEC_SK},
            ConsistentRead=True,
            ProjectionExpression="#owner, deleted_owner, deleted_at",
            ExpressionAttributeNames={"#owner": "owner"},
        ).get("Item")
        return history_owner(item) if item else None

    def list_by_owner(
        self, owner: str, limit: int, after: tuple[str, str] | None = None
    ) -> tuple[list[StoredJob], tuple[str, str] | None]:
        """A page of the owner's jobs ordered by name, starting after ``after = (name, job_id)``.

        Returns ``([StoredJob, ...], (name, job_id) of the last one, or None when there are no more)``.
        """
        kwargs: dict[str, Any] = {
            "IndexName": "by_owner",
            "KeyConditionExpression": Key("owner").eq(owner),
            "Limit": limit,
        }
        if after is not None:
            name, job_id = after
            kwargs["ExclusiveStartKey"] = {"owner": owner, "name": name, "pk": job_pk(job_id), "sk": SPEC_SK}
        page = self.table.query(**kwargs)
        specs = [plain(i) for i in page["Items"]]
        scheds = self._batch_get([s["job_id"] for s in specs], SCHED_SK)
        last = page.get("LastEvaluatedKey")
        cursor = (specs[-1]["name"], specs[-1]["job_id"]) if last and specs else None
        return [_stored(s, scheds.get(s["job_id"])) for s in specs], cursor

    def _batch_get(
        self,
        job_ids: list[str],
        sk: str,
        *,
        consistent: bool = False,
        backoff_s: Sequence[float] = UNPROCESSED_BACKOFF_S,
    ) -> dict[str, dict[str, Any]]:
        """The items ``sk`` (``SPEC_SK``, ``SCHED_SK``) of ``job_ids`` by job id, 100 keys a BatchGetItem. Keys
        DynamoDB returns unprocessed (a throttled partition) are asked again after each of ``backoff_s``
        (``UNPROCESSED_BACKOFF_S`` by default); raises ``StoreUnavailable`` when some are still unprocessed
        after that (never reported as absent)."""
        found: dict[str, dict[str, Any]] = {}
        job_ids = list(dict.fromkeys(job_ids))
        for start in range(0, len(job_ids), STATE_BATCH):
            keys = [{"pk": job_pk(j), "sk": sk} for j in job_ids[start : start + STATE_BATCH]]

            def get(request: dict[str, Any]) -> dict[str, Any] | None:
                response = self.table.meta.client.batch_get_item(RequestItems=request)
                for item in response["Responses"].get(self.table.name, []):
                    found[item["job_id"]] = plain(item)
                return response.get("UnprocessedKeys")

            _until_processed(get, {self.table.name: {"Keys": keys, "ConsistentRead": consistent}}, backoff_s)
        return found

    def replace(self, rewrite: Rewrite) -> None:
        """Replace a job's spec and scheduling items (PATCH, pause, resume) and record the rewrite's ``event``,
        in one transaction, after the timer item of the new state's due entry.

        The scheduling item's ``term`` is kept at least as high as the stored one by the caller. Raises
        ``Conflict`` when the stored job is not the one ``rewrite`` expects (:class:`Rewrite`: its
        ``updated_at``, and with ``expected_state`` its ``next_run_at`` and ``term``) or was deleted.
        """
        condition: str | None = None
        values: dict[str, Any] = {}
        if rewrite.expected_state is not None:
            next_run_at, term = rewrite.expected_state
            values[":term"] = term
            if next_run_at is None:
                condition = "attribute_not_exists(next_run_at) AND #term = :term"
            else:
                condition = "next_run_at = :next AND #term = :term"
                values[":next"] = next_run_at
        sched_put = transact_put(
            self.table.name,
            sched_item(rewrite.state),
            condition,
            values=values,
            names={"#term": "term"} if condition else None,
        )
        spec_put = transact_put(
            self.table.name,
            spec_item(rewrite.job),
            "updated_at = :u",
            values={":u": rewrite.expected_updated_at},
        )
        self._file(rewrite.state)
        try:
            self.table.meta.client.transact_write_items(
                TransactItems=[spec_put, sched_put, *self._event_put(rewrite.event)]
            )
        except ClientError as error:
            if is_condition_failure(error):
                raise Conflict("the job changed meanwhile; read it again") from error
            raise

    def delete(
        self, job: Job, *, deleted_at_ms: int, retention_days: int | None, event: AuditEvent | None = None
    ) -> None:
        """Delete a job in one transaction: its spec item becomes a tombstone kept ``retention_days`` after
        ``deleted_at_ms`` (epoch ms; ``layout.tombstone_item``; None removes it outright), its scheduling item
        (so its due-index entry) and its name lock go, ``event`` is recorded. Its run history and events stay
        until retention.

        Raises ``NotFound`` when the job is already deleted (a late repeat: it changes nothing, and never frees
        a name a newer job holds).
        """
        spec = spec_item(job)
        tombstone = (
            tombstone_item(spec, deleted_at_ms=deleted_at_ms, retention_days=retention_days)
            if retention_days is not None
            else None
        )
        key = {"pk": job_pk(spec["job_id"]), "sk": SPEC_SK}
        live = {"ConditionExpression": "attribute_exists(doc)"}
        spec_write: dict[str, Any] = (
            transact_put(self.table.name, tombstone, "attribute_exists(doc)")
            if tombstone is not None
            else {"Delete": {"TableName": self.table.name, "Key": key, **live}}
        )
        try:
            self.table.meta.client.transact_write_items(
                TransactItems=[
                    spec_write,
                    {
                        "Delete": {
                            "TableName": self.table.name,
                            "Key": {"pk": job_pk(spec["job_id"]), "sk": SCHED_SK},
                        }
                    },
                    {
                        "Delete": {
                            "TableName": self.table.name,
                            "Key": name_key(spec["owner"], spec["name"]),
                            "ConditionExpression": "attribute_not_exists(pk) OR job_id = :job",
                            "ExpressionAttributeValues": {":job": spec["job_id"]},
                        }
                    },
                    *self._event_put(event),
                ]
            )
        except ClientError as error:
            if is_condition_failure(error):
                raise NotFound(spec["job_id"]) from error
            raise

    @unavailable_on_failure
    def record_event(self, event: AuditEvent) -> None:
        """Put the event's item (the same ``(job_id, at, key)`` again replaces it)."""
        self.table.put_item(Item=event_item(event))

    @unavailable_on_failure
    def list_events(
        self, job_id: str, limit: int, before: str | None = None
    ) -> tuple[list[AuditEvent], str | None]:
        """One query of ``pk=events#<job_id>``, newest first (``sk < before`` when given); the last event's
        position when DynamoDB says more may follow."""
        condition = Key("pk").eq(events_pk(job_id))
        if before is not None:
            condition = condition & Key("sk").lt(before)
        reply = self.table.query(
            KeyConditionExpression=condition, ScanIndexForward=False, Limit=limit, ConsistentRead=True
        )
        events = [event_from_item(item) for item in reply["Items"]]
        more = "LastEvaluatedKey" in reply and events
        return events, (events[-1].position if more else None)

    # --- scheduler side -----------------------------------------------------------------------

    def due_lanes(self) -> tuple[str, ...]:
        """The timer lanes, plus the ``due`` GSI's :data:`INDEX` lane until ``migrate_due_index`` found it empty
        (the item ``pk=layout#due sk=layout``, ``timers_only``). 1 request."""
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
            entries = [timer_entry(str(i["pk"]), str(i["sk"])) for i in items]
        return entries, page.get("LastEvaluatedKey")

    def put_timers(self, entries: Sequence[DueEntry]) -> None:
        """Put the timer items of ``entries`` (``BatchWriteItem``s of 25; 1 write unit each). Items DynamoDB
        returns unprocessed (a throttled key) are sent again after each of ``UNPROCESSED_BACKOFF_S``. Raises the
        client's error when a request fails, ``StoreUnavailable`` when items are still unprocessed after that."""
        items = [timer_item(entry) for entry in entries if entry.lane != INDEX]
        for start in range(0, len(items), 25):
            _until_processed(
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
        for job_id, item in self._batch_get(
            list(job_ids), SCHED_SK, consistent=True, backoff_s=STATES_BACKOFF_S
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
            legacy += [due_entry_from_item(plain(item)) for item in page["Items"]]
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
            self.put_timers([timer])
            attributes = due_attributes(timer)
            try:
                self.table.update_item(
                    Key={"pk": job_pk(old.job_id), "sk": SCHED_SK},
                    UpdateExpression="SET timer_pk = :pk, timer_sk = :sk REMOVE due_pk",
                    ConditionExpression="due_pk = :old AND due_at = :at",
                    ExpressionAttributeValues={
                        ":pk": attributes["timer_pk"],
                        ":sk": attributes["timer_sk"],
                        ":old": due_pk(old.partition, old.bucket, old.shard),
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

        Such a job is still in the due index on a timer item, due more than ``STUCK_AFTER_MS`` ago (epoch ms by
        ``clock``), and its entry is in a bucket its partition has drained: before the partition's watermark
        (``watermarks``: partition -> watermark bucket, as stored; a partition missing from it is left alone). A
        job waiting in a backlog (a rush, an outage) is in an undrained bucket and is not touched. Its new timer
        item is filed in the :data:`LATE` lane at the instant it is written, for the state's version and due
        instant, in one of ``shards`` due shards: the tick reads it and judges it as any entry (the job's
        current fire, handled by its catch-up policy, or stale if the job moved meanwhile). A scheduling item
        this code cannot read is counted (``unreadable``) and skipped, as the tick does.

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
            page = self.table.scan(
                FilterExpression=Attr("sk").eq(SCHED_SK)
                & Attr("timer_pk").exists()
                & Attr("due_at").lt(clock() - STUCK_AFTER_MS),
                ReturnConsumedCapacity="TOTAL",
                **kwargs,
            )
            scanned += int(page.get("ScannedCount", 0))
            consumed += float((page.get("ConsumedCapacity") or {}).get("CapacityUnits", 0))
            passed = []
            for item in page["Items"]:
                try:
                    due = state_from_item(plain(item)).due
                except (KeyError, TypeError, ValueError):
                    unreadable += 1
                    continue
                if (
                    due is not None
                    and "due_pk" not in item
                    and due.bucket < watermarks.get(due.partition, -1)
                ):
                    passed.append(due)
            if passed:  # the Scan reads eventually: only a state still pointing at that entry now is stuck
                states = self.scheduling_states([due.job_id for due in passed])
                passed = [due for due in passed if getattr(states.get(due.job_id), "due", None) == due]
            now_ms = clock()  # read again: the entries are filed at the instant they are written
            stuck = [  # in the partition's current shards (``due_shards`` may have been lowered since)
                due_entry(
                    due.job_id,
                    due.due_at,
                    partition=due.partition,
                    shards=shards,
                    bucket_ms=bucket_ms,
                    now_ms=now_ms,
                    version=due.version,
                )
                for due in passed
            ]
            self.put_timers(stuck)
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
