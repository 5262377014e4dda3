"""The jobs table (``resources.JOBS``): job CRUD and the audit events for the API, and ``JobStore``, the one
adapter the components are given, which also reaches the overlap lock (``store.overlap``), the due index
(``store.due_index``) and its repair (``store.due_repair``) kept on the same table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from jobsched.dynamodb.batch import batch_get
from jobsched.dynamodb.chain_mark import count_write, mark_condition, uncount
from jobsched.dynamodb.due_index import DueIndexTable
from jobsched.dynamodb.due_repair import DueRepair
from jobsched.dynamodb.dynamo import is_condition_failure, transact_put
from jobsched.dynamodb.errors import unavailable_on_failure
from jobsched.dynamodb.layout import (
    DOWNSTREAM,
    SCHED_SK,
    SPEC_SK,
    event_from_item,
    event_item,
    events_pk,
    history_owner,
    is_tombstone,
    job_from_items,
    job_id_of,
    job_pk,
    label_filter,
    name_key,
    plain,
    sched_item,
    spec_item,
    state_from_item,
    timer_item,
    tombstone_item,
)
from jobsched.dynamodb.overlap import OverlapLock
from jobsched.dynamodb.quotas import (
    QuotaRecountTable,
    QuotaTable,
    over_quota,
    quota_condition,
    usage_limits,
    usage_update,
)
from jobsched.models import Job
from jobsched.ports.errors import Conflict, NameTaken, NotFound
from jobsched.ports.jobs import INDEX, AuditEvent, DueEntry, SchedulingState, StoredJob, Unreadable
from jobsched.ports.quotas import OwnerUsage, RecountProgress, UsageChange

if TYPE_CHECKING:
    from jobsched.ports.jobs import DuePage, DueQuery, Move, Rewrite
    from jobsched.ports.runs import BufferAnswer, BufferRequest, OverlapHolder, OverlapRequest


def _refused(reasons: list[dict[str, Any]], index: int) -> bool:
    """Whether a cancelled transaction's item ``index`` failed its condition (``CancellationReasons``)."""
    return len(reasons) > index and reasons[index].get("Code") == "ConditionalCheckFailed"


def _stored(spec: dict[str, Any], sched: dict[str, Any] | None) -> StoredJob:
    return StoredJob(job_from_items(spec, sched), state_from_item(sched) if sched else None)


class JobStore:
    """DynamoDB adapter of the jobs table (``resources.JOBS``): implements ``ports.jobs.JobRepository``,
    ``ports.jobs.DueIndex`` and ``ports.runs.JobSpecs``; items as built by ``store.layout``. Job CRUD and audit
    are its own; the overlap lock (``store.overlap.OverlapLock``), the due index
    (``store.due_index.DueIndexTable``) and its repair passes (``repair``, a ``store.due_repair.DueRepair``, which
    writes and reads through this store's ``DueIndex`` methods) are parts it holds on the same table.

    ``table`` is a boto3 ``Table`` resource.
    """

    def __init__(self, table: Any) -> None:
        self.table = table
        self.overlap = OverlapLock(table)
        self.due_index = DueIndexTable(table)
        self.repair = DueRepair(table, self)
        self.quotas = QuotaTable(table)
        self.recount = QuotaRecountTable(table)

    # --- API side -----------------------------------------------------------------------------

    def _event_put(self, event: AuditEvent | None) -> list[dict[str, Any]]:
        """The transaction item recording ``event`` (none without one)."""
        return [] if event is None else [transact_put(self.table.name, event_item(event))]

    def create(
        self,
        job: Job,
        state: SchedulingState,
        event: AuditEvent | None = None,
        usage: UsageChange | None = None,
    ) -> None:
        """Write a new job's spec, scheduling item, name lock and ``event``, and add ``usage`` to its owner's
        usage item (``dynamodb.quotas``), in one transaction, after the timer item of its due entry (a hint until
        the transaction lands; left to expire when it is refused).

        Raises ``NameTaken(job_id)`` when the owner already has a job with this name, ``Conflict`` when the
        name was taken and released meanwhile.
        """
        spec, sched = spec_item(job), sched_item(state)
        name_item = {**name_key(spec["owner"], spec["name"]), "job_id": spec["job_id"]}
        self._file(state)
        items = [
            transact_put(self.table.name, name_item, "attribute_not_exists(pk)", return_old=True),
            transact_put(self.table.name, spec),
            transact_put(self.table.name, sched),
            *self._count_writes(job),
            *self._event_put(event),
            *usage_update(self.table.name, usage),
        ]
        try:
            self.table.meta.client.transact_write_items(TransactItems=items)
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            reasons = error.response.get("CancellationReasons", [])
            over = usage is not None and _refused(reasons, len(items) - 1) and usage_limits(usage)[0]
            if over and usage is not None and not _refused(reasons, 0):  # a taken name is answered as such
                raise over_quota(self.quotas, usage) from error
            if job.after is not None and _refused(reasons, 3):
                raise Conflict(f"job {job.after.job} (after) was deleted meanwhile") from error
            existing = self.job_id_by_name(spec["owner"], spec["name"])
            if existing is None and reasons:
                raise Conflict("job creation raced; retry") from error
            raise NameTaken(existing or "") from error

    def _count_writes(self, job: Job) -> list[dict[str, Any]]:
        """The transaction item counting ``job`` on its upstream's chain mark (``chain_mark``; none without
        ``after``)."""
        return [] if job.after is None else [count_write(self.table.name, job.after.job)]

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
            for job_id, item in batch_get(self.table, job_ids, SPEC_SK).items()
            if not is_tombstone(item)
        }

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
        self,
        owner: str,
        limit: int,
        after: tuple[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[list[StoredJob], tuple[str, str] | None]:
        """A page of the owner's jobs ordered by name, starting after ``after = (name, job_id)``; with
        ``labels``, those of the ``limit`` read whose spec item's ``labels`` map holds each (a filter
        expression: the page may be short, even empty, while more follow).

        Returns ``([StoredJob, ...], (name, job_id) of the last one read, or None when there are no more)``.
        """
        kwargs: dict[str, Any] = {
            "IndexName": "by_owner",
            "KeyConditionExpression": Key("owner").eq(owner),
            "Limit": limit,
        }
        if labels:
            kwargs.update(label_filter(labels))
        if after is not None:
            name, job_id = after
            kwargs["ExclusiveStartKey"] = {"owner": owner, "name": name, "pk": job_pk(job_id), "sk": SPEC_SK}
        page = self.table.query(**kwargs)
        specs = [plain(i) for i in page["Items"]]
        scheds = batch_get(self.table, [s["job_id"] for s in specs], SCHED_SK)
        last = page.get("LastEvaluatedKey")
        cursor = (str(last["name"]), job_id_of(str(last["pk"]))) if last else None
        return [_stored(s, scheds.get(s["job_id"])) for s in specs], cursor

    @unavailable_on_failure
    def dependents(self, job_id: str) -> list[StoredJob]:
        """The live jobs whose ``after`` names ``job_id`` (design §2.1), by name: one query of the sparse
        ``by_upstream`` index (eventually consistent) and one BatchGetItem of their scheduling items. Raises
        ``StoreUnavailable`` on a transient failure."""
        kwargs: dict[str, Any] = {
            "IndexName": "by_upstream",
            "KeyConditionExpression": Key("after_job").eq(job_id),
        }
        specs: list[dict[str, Any]] = []
        while True:
            page = self.table.query(**kwargs)
            specs.extend(plain(i) for i in page["Items"] if not is_tombstone(i))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        scheds = batch_get(self.table, [s["job_id"] for s in specs], SCHED_SK) if specs else {}
        return [_stored(s, scheds.get(s["job_id"])) for s in specs]

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
        marked, mark_values = mark_condition(rewrite.job.downstream_count)
        held, quota_values = quota_condition(rewrite.quota_rate_read)
        spec_put = transact_put(
            self.table.name,
            spec_item(rewrite.job),
            f"updated_at = :u AND {marked} AND {held}",
            values={":u": rewrite.expected_updated_at, **mark_values, **quota_values},
            names={"#down": DOWNSTREAM},
        )
        before, after = rewrite.relink or (None, None)
        counted = [count_write(self.table.name, after)] if after is not None else []
        self._file(rewrite.state)
        items = [
            spec_put,
            sched_put,
            *counted,
            *self._event_put(rewrite.event),
            *usage_update(self.table.name, rewrite.usage),
        ]
        try:
            self.table.meta.client.transact_write_items(TransactItems=items)
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            usage, reasons = rewrite.usage, error.response.get("CancellationReasons", [])
            if usage is not None and _refused(reasons, len(items) - 1) and usage_limits(usage)[0]:
                raise over_quota(self.quotas, usage) from error
            if counted and _refused(error.response.get("CancellationReasons", []), 2):
                raise Conflict(f"job {after} (after) was deleted meanwhile") from error
            raise Conflict("the job changed meanwhile; read it again") from error
        if before is not None:
            uncount(self.table, before)

    def delete(
        self,
        job: Job,
        *,
        deleted_at_ms: int,
        retention_days: int | None,
        event: AuditEvent | None = None,
        usage: UsageChange | None = None,
    ) -> None:
        """Delete a job in one transaction: its spec item becomes a tombstone kept ``retention_days`` after
        ``deleted_at_ms`` (epoch ms; ``layout.tombstone_item``; None removes it outright), its scheduling item
        (so its due-index entry) and its name lock go, ``event`` is recorded, ``usage`` added to its owner's. Its run history and events stay
        until retention.

        Written only while the spec item's ``quota_rate`` is still ``job``'s (``quotas.quota_condition``). Raises
        ``NotFound`` when the job is already deleted (a late repeat: it changes nothing, and never frees a name a
        newer job holds), ``Conflict`` when it is live with another ``quota_rate`` (one consistent GetItem after
        the refusal tells them apart).
        """
        spec = spec_item(job)
        tombstone = (
            tombstone_item(spec, deleted_at_ms=deleted_at_ms, retention_days=retention_days)
            if retention_days is not None
            else None
        )
        key = {"pk": job_pk(spec["job_id"]), "sk": SPEC_SK}
        held, quota_values = quota_condition(job.quota_rate)
        condition = f"attribute_exists(doc) AND {held}"
        spec_write: dict[str, Any] = (
            transact_put(self.table.name, tombstone, condition, values=quota_values)
            if tombstone is not None
            else {"Delete": {"TableName": self.table.name, "Key": key, "ConditionExpression": condition}}
        )
        if tombstone is None and quota_values:
            spec_write["Delete"]["ExpressionAttributeValues"] = quota_values
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
                    *usage_update(self.table.name, usage),
                ]
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            stored = self.table.get_item(Key=key, ConsistentRead=True).get("Item")
            if stored is not None and not is_tombstone(stored):
                raise Conflict("the job's quota count changed meanwhile; read it again") from error
            raise NotFound(spec["job_id"]) from error
        if job.after is not None:
            uncount(self.table, job.after.job)

    # --- QuotaRecount (``dynamodb.quotas.QuotaRecountTable``) ---------------------------------------

    def recount_progress(self) -> RecountProgress:
        """``QuotaRecountTable.recount_progress``."""
        return self.recount.recount_progress()

    def save_recount_progress(self, progress: RecountProgress) -> None:
        """``QuotaRecountTable.save_recount_progress``."""
        self.recount.save_recount_progress(progress)

    def uncounted_jobs(self, cursor: str | None, limit: int) -> tuple[list[Job], str | None]:
        """``QuotaRecountTable.uncounted_jobs``."""
        return self.recount.uncounted_jobs(cursor, limit)

    def count_job(self, job: Job, rate: int) -> bool:
        """``QuotaRecountTable.count_job``."""
        return self.recount.count_job(job, rate)

    # --- QuotaCounters (``dynamodb.quotas.QuotaTable``) ---------------------------------------------

    def usage(self, owner: str) -> OwnerUsage:
        """``QuotaTable.usage``."""
        return self.quotas.usage(owner)

    def count_request(self, owner: str, window_ms: int, limit: int, expires_at_s: int) -> int | None:
        """``QuotaTable.count_request``."""
        return self.quotas.count_request(owner, window_ms, limit, expires_at_s)

    def requests_in(self, owner: str, window_ms: int) -> int:
        """``QuotaTable.requests_in``."""
        return self.quotas.requests_in(owner, window_ms)

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

    # --- worker side: the overlap lock (``store.overlap``) ----------------------------------------

    def acquire_overlap(self, request: OverlapRequest) -> OverlapHolder | None:
        """``OverlapLock.acquire``: take the job's overlap lock for ``request``'s try; None when taken, else the
        try holding it."""
        return self.overlap.acquire(request)

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool:
        """``OverlapLock.renew``: refresh the lock's ``heartbeat_at`` (epoch ms); False when this try does not
        hold it."""
        return self.overlap.renew(job_id, run_id=run_id, attempt=attempt, worker=worker, now_ms=now_ms)

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> str | None:
        """``OverlapLock.release``: give the lock back if this try holds it, or hand it to the fire that waits for
        it (that fire's run id is returned)."""
        return self.overlap.release(job_id, run_id=run_id, attempt=attempt, worker=worker)

    def buffer_overlap(self, request: BufferRequest) -> BufferAnswer:
        """``OverlapLock.buffer``: make ``request``'s run the fire that waits for the held lock."""
        return self.overlap.buffer(request)

    # --- scheduler side: the due index (``store.due_index``) -------------------------------------

    def due_lanes(self) -> tuple[str, ...]:
        """``DueIndexTable.due_lanes``: the lanes a tick reads."""
        return self.due_index.due_lanes()

    def query_due(self, query: DueQuery) -> DuePage:
        """``DueIndexTable.query_due``: one page of ``query``'s lane. Raises ``ValueError`` for an item that is
        no due entry."""
        return self.due_index.query_due(query)

    def put_timers(self, entries: Sequence[DueEntry]) -> None:
        """``DueIndexTable.put_timers``: put the timer items of ``entries``."""
        self.due_index.put_timers(entries)

    def scheduling_states(self, job_ids: Sequence[str]) -> dict[str, SchedulingState | Unreadable]:
        """``DueIndexTable.scheduling_states``: the current states of ``job_ids``, read strongly consistent."""
        return self.due_index.scheduling_states(job_ids)

    def move(self, move: Move) -> None:
        """``DueIndexTable.move``: the fenced move of a job after a fire. Raises ``Conflict``."""
        self.due_index.move(move)

    def highest_due_partition(self) -> int | None:
        """``DueIndexTable.highest_due_partition`` (a scan of the table: bootstrap only)."""
        return self.due_index.highest_due_partition()

    def highest_due_shard(self) -> int | None:
        """``DueIndexTable.highest_due_shard`` (a scan of the table: bootstrap only)."""
        return self.due_index.highest_due_shard()

    def oldest_due_bucket(self, partition: int) -> int | None:
        """``DueIndexTable.oldest_due_bucket`` (a scan of the table: bootstrap only)."""
        return self.due_index.oldest_due_bucket(partition)
