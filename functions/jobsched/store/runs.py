"""The runs table: the DynamoDB adapter of the run port (``jobsched.ports.runs``: ``RunRows``, ``SweepRows``,
the scheduler's and the API's inserts and reads). The unique ``(job_id, scheduled_for)`` insert, the run
history, and the run lifecycle transitions of workers and the sweeper (claim, heartbeat, finish, retry, dead,
skip, sweep index). Takes and returns ``RunRow`` records; item layouts are ``jobsched.store.layout``'s.
Transient DynamoDB failures are raised as ``jobsched.ports.errors.StoreUnavailable``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Attr, Key
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from jobsched.models import RunStatus
from jobsched.ports.runs import (
    EVERY_RUN,
    FAILURE_STATUSES,
    Claim,
    KeyedInsert,
    RunFilter,
    RunKey,
    SweepPage,
    sweep_shard,
)
from jobsched.ports.tries import Rerun, TryRecord
from jobsched.store.dynamo import is_condition_failure, old_item, transact_put
from jobsched.store.errors import unavailable_on_failure
from jobsched.store.layout import (
    FAIL_OWNER,
    TRIES_ATTRIBUTE,
    plain,
    run_item,
    run_row,
    sweep_keys,
    sweep_pk,
    tries_value,
    trigger_key_item,
)

if TYPE_CHECKING:
    from jobsched.ports.runs import (
        ClaimRequest,
        DeadTransition,
        Owned,
        RerunRequest,
        RetryTransition,
        RunRow,
        SweepDeferral,
    )


class RunStore:
    """DynamoDB adapter of the runs table (``resources.RUNS``); items as built by ``store.layout``.

    ``table`` is a boto3 ``Table`` resource.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    @unavailable_on_failure
    def put_new(self, row: RunRow) -> RunRow | None:
        """Insert a run unless ``(job_id, scheduled_for)`` exists. 1 request.

        Returns None when the run was created, else the existing row (read from the refused write, at no
        extra cost; if the refusal carries none, one consistent read, and ``row`` itself if that finds none
        either): the pair names exactly one run.
        """
        try:
            self.table.put_item(
                Item=run_item(row),
                ConditionExpression="attribute_not_exists(job_id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                old = old_item(error)
                return run_row(old) if old else (self.get(row.job_id, row.scheduled_for) or row)
            raise
        return None

    @unavailable_on_failure
    def put_new_keyed(self, row: RunRow, *, owner: str, idempotency_key: str) -> KeyedInsert:
        """Insert a run together with the item of the manual trigger's ``idempotency_key`` (of ``owner``) that
        asked for it, in one transaction (``layout.trigger_key_item``, expiring with the run); neither is
        written unless both are new. 1 request (2 write units each).

        Returns ``KeyedInsert(created=True)`` when both were written; ``key_used`` with ``key_run_at`` when the
        key was used before (its run is the answer); ``existing`` when the run's key is taken.
        """
        item = run_item(row)
        key_item = trigger_key_item(
            row.job_id,
            owner,
            idempotency_key,
            scheduled_for_ms=row.scheduled_for,
            expires_at_s=int(item.get("expires_at", 0)),
        )
        try:
            self.table.meta.client.transact_write_items(
                TransactItems=[
                    transact_put(self.table.name, key_item, "attribute_not_exists(job_id)", return_old=True),
                    transact_put(self.table.name, item, "attribute_not_exists(job_id)", return_old=True),
                ]
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            reasons = error.response.get("CancellationReasons") or [{}, {}]
            key_reason, run_reason = [*reasons, {}, {}][:2]
            if key_reason.get("Code") == "ConditionalCheckFailed":
                stored = _deserialized(key_reason.get("Item")) or {}
                at = stored.get("run_scheduled_for")
                return KeyedInsert(
                    created=False, key_used=True, key_run_at=int(at) if at is not None else None
                )
            taken = _deserialized(run_reason.get("Item"))
            return KeyedInsert(
                created=False,
                existing=run_row(taken) if taken else (self.get(row.job_id, row.scheduled_for) or row),
            )
        return KeyedInsert(created=True)

    @unavailable_on_failure
    def get(self, job_id: str, scheduled_for_ms: int) -> RunRow | None:
        """One run row (strongly consistent), or None."""
        item = self.table.get_item(
            Key={"job_id": job_id, "scheduled_for": scheduled_for_ms}, ConsistentRead=True
        ).get("Item")
        return run_row(item) if item else None

    @unavailable_on_failure
    def list_for_job(
        self, job_id: str, limit: int, where: RunFilter = EVERY_RUN, before_ms: int | None = None
    ) -> tuple[list[RunRow], int | None]:
        """``RunHistory.list_for_job``: one Query of the job's partition, newest first, strongly consistent,
        until ``limit + 1`` matching items (a filter on status or kind may read more)."""
        condition = Key("job_id").eq(job_id)
        rows = self._query_newest({"ConsistentRead": True}, condition, where, before_ms, limit)
        return [run_row(r) for r in rows[:limit]], (
            rows[limit - 1]["scheduled_for"] if len(rows) > limit else None
        )

    @unavailable_on_failure
    def list_failed(
        self, owner: str, limit: int, where: RunFilter = EVERY_RUN, before: tuple[int, str] | None = None
    ) -> tuple[list[RunRow], tuple[int, str] | None]:
        """``RunHistory.list_failed`` from the sparse ``failures`` index (``fail_owner = owner``), newest first."""
        query: dict[str, Any] = {"IndexName": "failures"}
        if before is not None:
            query["ExclusiveStartKey"] = {FAIL_OWNER: owner, "scheduled_for": before[0], "job_id": before[1]}
        rows = self._query_newest(query, Key(FAIL_OWNER).eq(owner), where, None, limit)
        last = rows[limit - 1] if len(rows) > limit else None
        return [run_row(r) for r in rows[:limit]], (
            (int(last["scheduled_for"]), str(last["job_id"])) if last is not None else None
        )

    def _query_newest(
        self, query: dict[str, Any], key: Any, where: RunFilter, before_ms: int | None, limit: int
    ) -> list[dict[str, Any]]:
        """Up to ``limit + 1`` items of ``query`` on partition ``key`` (a key condition) kept by ``where`` and
        older than ``before_ms``, newest first (one more than asked: whether more follow), following pages."""
        before = where.before(before_ms)
        if before is not None or where.since_ms is not None:
            low, high = where.since_ms or 0, (before if before is not None else 2**63) - 1
            if high < low:
                return []  # an empty window (DynamoDB refuses a BETWEEN whose bounds are reversed)
            key = key & Key("scheduled_for").between(low, high)
        kwargs: dict[str, Any] = {**query, "KeyConditionExpression": key, "ScanIndexForward": False}
        condition = _filter(where)
        if condition is not None:
            kwargs["FilterExpression"] = condition
        rows: list[dict[str, Any]] = []
        while len(rows) <= limit:
            kwargs["Limit"] = limit + 1 - len(rows) if condition is None else max(limit + 1, 100)
            page = self.table.query(**kwargs)
            rows.extend(plain(i) for i in page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return rows

    @unavailable_on_failure
    def rows_between(self, job_id: str, first_ms: int, last_ms: int, limit: int) -> list[RunRow]:
        """The job's rows with ``first_ms <= scheduled_for <= last_ms`` (epoch ms), oldest first, at most
        ``limit`` (consistent reads). One Query per 1 MB page."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("job_id").eq(job_id)
            & Key("scheduled_for").between(first_ms, last_ms),
            "ConsistentRead": True,
        }
        rows: list[dict[str, Any]] = []
        while len(rows) < limit:
            page = self.table.query(**kwargs, Limit=limit - len(rows))
            rows.extend(plain(i) for i in page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return [run_row(r) for r in rows]

    # --- worker side ----------------------------------------------------------------------------
    #
    # Every worker transition after the claim is conditioned on "still ours": status running with the
    # attempt number and worker id the claim wrote (each claim increments attempt, so the pair names one
    # claim). The sweeper passes the stale ``heartbeat_at`` it saw as well, so a beat since then wins.
    # Claims and heartbeats never touch ``sweep_pk``/``sweep_at`` (the sweep index is KEYS_ONLY, so they cost
    # no index write); finishing as succeeded or skipped removes them when present (a manual run, a retried
    # one, or a row of the layout before issue [2.5]: the run leaves the sparse index; a scheduled run whose
    # first try succeeds was never in it, and removing absent attributes writes no index entry).

    @unavailable_on_failure
    def claim(self, request: ClaimRequest) -> Claim:
        """Claim a run for one try: ``queued|retrying -> running``, or take over a ``running`` run whose
        ``heartbeat_at`` is older than ``stale_before_ms`` (a lost worker), or, with ``create``, make the row of
        a run that has none (its message was its only record) already claimed. 1 request, one write unit: the
        row is small and a new one carries no sweep keys.

        A ``retrying`` run is claimable once its ``retry_at`` is at most ``retry_due_by_ms`` (an early extra
        copy of its message is dropped; the delayed one, or the sweeper, delivers it on time). Sets ``worker``,
        ``attempt`` + 1, ``started_at`` and ``heartbeat_at`` (epoch ms), and ``lateness_ms`` on the first try; a
        created row also gets ``create``'s ``run_id``, ``kind``, ``enqueued_at``, ``dispatch_at``, ``term``,
        ``owner`` and ``expires_at`` (each only where the row has none). Returns ``Claim(True, the row as it was
        before, create for a new row)`` when claimed, else ``Claim(False, the row as stored or None when there
        is no such run)``: the caller drops the delivery.
        """
        sets = [
            "#s = :running",
            "worker = :worker",
            "attempt = if_not_exists(attempt, :zero) + :one",
            "started_at = :now",
            "heartbeat_at = :now",
            "lateness_ms = if_not_exists(lateness_ms, :late)",
        ]
        condition = (
            "#s = :queued"
            " OR (#s = :retrying AND (attribute_not_exists(retry_at) OR retry_at <= :due))"
            " OR (#s = :running AND heartbeat_at < :stale)"
        )
        values: dict[str, Any] = {
            ":running": RunStatus.RUNNING.value,
            ":queued": RunStatus.QUEUED.value,
            ":retrying": RunStatus.RETRYING.value,
            ":worker": request.worker,
            ":zero": 0,
            ":one": 1,
            ":now": request.now_ms,
            ":late": request.now_ms - request.scheduled_for_ms,
            ":due": request.retry_due_by_ms,
            ":stale": request.stale_before_ms,
        }
        create = request.create
        names = {"#s": "status"}
        if create is not None:
            condition = f"attribute_not_exists(job_id) OR {condition}"
            fresh = {
                name: value
                for name, value in run_item(create).items()
                if name not in {"job_id", "scheduled_for", "status", "attempt", "sweep_pk", "sweep_at"}
                and name not in _CLAIM_WRITES
            }
            for i, (name, value) in enumerate(sorted(fresh.items())):
                names[f"#c{i}"] = name
                values[f":c{i}"] = value
                sets.append(f"#c{i} = if_not_exists(#c{i}, :c{i})")
        try:
            response = self.table.update_item(
                Key=_key(request.job_id, request.scheduled_for_ms),
                UpdateExpression="SET " + ", ".join(sets) + " REMOVE retry_at, fail_owner",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                old = old_item(error)
                return Claim(False, run_row(old) if old else None)
            raise
        old_attributes = response.get("Attributes")
        if not old_attributes:
            assert create is not None  # without create, an absent row fails the condition
            return Claim(True, create)
        return Claim(True, run_row(old_attributes))

    @unavailable_on_failure
    def heartbeat(self, owned: Owned, *, now_ms: int) -> bool:
        """Set ``heartbeat_at = now_ms`` if the run is still this claim's. 1 request. False: no longer ours."""
        return self._as_claim(
            owned,
            sets={"heartbeat_at": now_ms},
        )

    @unavailable_on_failure
    def succeed(self, owned: Owned, *, now_ms: int, tries: tuple[TryRecord, ...] | None = None) -> bool:
        """``running -> succeeded`` (clears the last error, leaves the sweep index; ``tries`` replace the stored
        ones when given). 1 request. False: not ours."""
        return self._as_claim(
            owned,
            sets={"status": RunStatus.SUCCEEDED.value, "finished_at": now_ms, **_tries(tries)},
            removes=("sweep_pk", "sweep_at", "error", "retry_at", FAIL_OWNER),
        )

    @unavailable_on_failure
    def retry(self, owned: Owned, change: RetryTransition) -> bool:
        """``running -> retrying`` after a failed try: records ``error`` and when the next try is due
        (``retry_at``, epoch ms) and moves ``sweep_at`` past it, so the sweeper re-enqueues the run only if
        the retry message never comes (``sweep_pk`` too: a scheduled run's row, made by its claim, enters the sparse
        index here). 1 request. False: not ours (or, with ``owned.heartbeat_at``, it beat since).
        """
        return self._as_claim(
            owned,
            sets={
                "status": RunStatus.RETRYING.value,
                "error": change.error,
                "retry_at": change.retry_at_ms,
                **sweep_keys(owned.job_id, change.sweep_at_ms),
                **_failing(owned),
                **_tries(change.tries),
            },
        )

    @unavailable_on_failure
    def dead(self, owned: Owned, change: DeadTransition) -> bool:
        """``running -> dead`` (out of attempts). 1 request. False: not ours.

        The row keeps its sweep keys with ``notify_pending`` and ``sweep_at = notify_at_ms`` until
        ``notified``: if the dead-letter message or the alert is lost to a crash, the sweeper sends them.
        ``final_attempt`` is the attempt count to record (the last try that ran).
        """
        return self._as_claim(
            owned,
            sets={
                "status": RunStatus.DEAD.value,
                "error": change.error,
                "finished_at": change.now_ms,
                "attempt": change.final_attempt,
                "notify_pending": True,
                **sweep_keys(owned.job_id, change.notify_at_ms),
                **_failing(owned),
                **_tries(change.tries),
            },
            removes=("retry_at",),
        )

    @unavailable_on_failure
    def notified(self, job_id: str, scheduled_for_ms: int) -> bool:
        """A dead run's dead-letter message and alert went out: it leaves the sweep index. 1 request."""
        return self._transition(
            job_id,
            scheduled_for_ms,
            removes=("notify_pending", "sweep_pk", "sweep_at"),
            condition=("#s = :dead", {":dead": RunStatus.DEAD.value}),
        )

    @unavailable_on_failure
    def give_back(self, owned: Owned, *, before: RunRow) -> bool:
        """Undo the claim ``(attempt, worker)``: the row returns to ``before`` (the row as the claim found it:
        its status, attempt, worker, start, heartbeat, retry and lateness), so the try the claim opened does not
        count. For a failure after the claim and before the target started. 1 request. False: not ours.

        The claim took the run out of its owner's failed runs (it removed ``fail_owner``): a ``retrying`` run
        given back returns to them, as its status says (``FAILURE_STATUSES``)."""
        failing = before.status in FAILURE_STATUSES and before.owner is not None
        restored = {
            "worker": before.worker,
            "started_at": before.started_at,
            "heartbeat_at": before.heartbeat_at,
            "retry_at": before.retry_at,
            "lateness_ms": before.lateness_ms,
        }
        return self._as_claim(
            owned,
            sets={
                "status": before.status.value,
                "attempt": before.attempt,
                **{name: value for name, value in restored.items() if value is not None},
                **({FAIL_OWNER: before.owner} if failing else {}),
            },
            removes=tuple(name for name, value in restored.items() if value is None),
        )

    @unavailable_on_failure
    def watch(self, owned: Owned, *, sweep_at_ms: int) -> bool:
        """``RunRows.watch``: a running row made by its claim has no sweep keys (its message guards it); this sets
        them, conditioned on the claim and on there being none. 1 request (1 write unit, plus the KEYS_ONLY
        sweep index's)."""
        expression, values = _ours(owned)
        return self._transition(
            owned.job_id,
            owned.scheduled_for,
            sets=sweep_keys(owned.job_id, sweep_at_ms),
            condition=(f"{expression} AND attribute_not_exists(sweep_at)", values),
        )

    @unavailable_on_failure
    def skip(self, owned: Owned, *, now_ms: int, reason: str) -> bool:
        """``running -> skipped`` with ``reason`` in ``error`` (job deleted, overlap). 1 request. False: not ours."""
        return self._as_claim(
            owned,
            sets={
                "status": RunStatus.SKIPPED.value,
                "error": reason,
                "finished_at": now_ms,
                **_failing(owned),
            },
            removes=("sweep_pk", "sweep_at", "retry_at"),
        )

    # --- sweeper side ---------------------------------------------------------------------------

    @unavailable_on_failure
    def sweep_due(self, shard: int, now_ms: int, limit: int, cursor: Any = None) -> SweepPage:
        """One page of at most ``limit`` keys of the sparse ``sweep`` index of shard ``shard`` (``sweep_pk =
        sweep#<shard>``, ``layout.sweep_pk``) with ``sweep_at <= now_ms``, oldest first; ``cursor`` is the
        previous page's. 1 request."""
        kwargs: dict[str, Any] = {
            "IndexName": "sweep",
            "KeyConditionExpression": Key("sweep_pk").eq(sweep_pk(shard)) & Key("sweep_at").lte(now_ms),
            "Limit": limit,
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = cursor
        page = self.table.query(**kwargs)
        keys = [RunKey(str(i["job_id"]), int(i["scheduled_for"])) for i in page["Items"]]
        return SweepPage(keys, page.get("LastEvaluatedKey"))

    @unavailable_on_failure
    def get_many(self, keys: Sequence[RunKey]) -> list[RunRow]:
        """The rows of ``[(job_id, scheduled_for), ...]`` (consistent reads, batches of 100; absent rows are
        left out). One request per 100 keys, plus retries of unprocessed keys."""
        rows: list[RunRow] = []
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 100):
            request: dict[str, Any] = {
                self.table.name: {
                    "Keys": [_key(j, s) for j, s in unique[start : start + 100]],
                    "ConsistentRead": True,
                }
            }
            while request:
                response = self.table.meta.client.batch_get_item(RequestItems=request)
                rows.extend(run_row(i) for i in response["Responses"].get(self.table.name, []))
                request = response.get("UnprocessedKeys") or {}
        return rows

    @unavailable_on_failure
    def defer_sweep(self, deferral: SweepDeferral) -> bool:
        """Move a run's ``sweep_at`` to ``sweep_at_ms`` if its status and ``sweep_at`` are still what the
        sweeper saw; ``sweeps`` records how many times the sweeper re-enqueued it. 1 request."""
        sets: dict[str, Any] = {"sweep_at": deferral.sweep_at_ms}
        if deferral.sweeps is not None:
            sets["sweeps"] = deferral.sweeps
        return self._transition(
            *deferral.key,
            sets=sets,
            condition=(
                "#s = :seen_s AND sweep_at = :seen_at",
                {":seen_s": RunStatus(deferral.status).value, ":seen_at": deferral.seen_sweep_at},
            ),
        )

    @unavailable_on_failure
    def clear_sweep(self, job_id: str, scheduled_for_ms: int) -> bool:
        """Remove the sweep keys of a finished run (not of a dead run still owing its alert). 1 request."""
        return self._transition(
            job_id,
            scheduled_for_ms,
            removes=("sweep_pk", "sweep_at"),
            condition=(
                "#s IN (:ok, :skipped) OR (#s = :dead AND attribute_not_exists(notify_pending))",
                {
                    ":ok": RunStatus.SUCCEEDED.value,
                    ":skipped": RunStatus.SKIPPED.value,
                    ":dead": RunStatus.DEAD.value,
                },
            ),
        )

    # --- re-runs (issue [2.6]) --------------------------------------------------------------------

    @unavailable_on_failure
    def rerun(self, request: RerunRequest) -> Rerun:
        """See ``RunHistory.rerun``. 1 request (the row enters the sweep index: 1 index write)."""
        sets = (
            "#s = :queued, attempt = :zero, reruns = if_not_exists(reruns, :zero) + :one, enqueued_at = :now,"
            " sweep_at = :sweep_at, sweep_pk = :sweep_pk"
        )
        # a queued run leaves its owner's failed runs (the sparse failures index); removing an absent
        # attribute writes nothing
        removes = [
            "worker",
            "started_at",
            "heartbeat_at",
            "finished_at",
            "retry_at",
            "#e",
            FAIL_OWNER,
            "skipped_count",
            "skipped_through",
        ]
        values: dict[str, Any] = {
            ":queued": RunStatus.QUEUED.value,
            ":dead": RunStatus.DEAD.value,
            ":skipped": RunStatus.SKIPPED.value,
            ":zero": 0,
            ":one": 1,
            ":now": request.now_ms,
            ":sweep_at": request.sweep_at_ms,
            ":sweep_pk": sweep_pk(sweep_shard(request.job_id)),
        }
        if request.key_digest is None:
            removes.append("rerun_key")
        else:
            sets += ", rerun_key = :key"
            values[":key"] = request.key_digest
        try:
            response = self.table.update_item(
                Key=_key(request.job_id, request.scheduled_for_ms),
                UpdateExpression=f"SET {sets} REMOVE {', '.join(removes)}",
                ConditionExpression=(
                    "(#s = :dead AND attribute_not_exists(notify_pending)) OR #s = :skipped"
                    if request.summary
                    else "(#s = :dead AND attribute_not_exists(notify_pending))"
                    " OR (#s = :skipped AND attribute_not_exists(skipped_count))"
                ),
                ExpressionAttributeNames={"#s": "status", "#e": "error"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                old = old_item(error)
                return Rerun(False, run_row(old) if old else None)
            raise
        return Rerun(True, run_row(response["Attributes"]))

    # --- helpers --------------------------------------------------------------------------------

    def _as_claim(self, owned: Owned, *, sets: dict[str, Any], removes: Sequence[str] = ()) -> bool:
        """One update of ``owned``'s run conditioned on that claim (``_ours``). False: no longer ours."""
        return self._transition(
            owned.job_id, owned.scheduled_for, condition=_ours(owned), sets=sets, removes=removes
        )

    def _transition(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        condition: tuple[str, dict[str, Any]],
        sets: dict[str, Any] | None = None,
        removes: Sequence[str] = (),
    ) -> bool:
        """One conditional update. ``condition`` is ``(expression using #s for status, its values)``.
        Returns False when the condition failed (the row changed, or is absent)."""
        names = {"#s": "status"}
        values = dict(condition[1])
        clauses = []
        if sets:
            assignments = []
            for i, (attribute, value) in enumerate(sets.items()):
                names[f"#a{i}"] = attribute
                values[f":v{i}"] = value
                assignments.append(f"#a{i} = :v{i}")
            clauses.append("SET " + ", ".join(assignments))
        if removes:
            for i, attribute in enumerate(removes):
                names[f"#r{i}"] = attribute
            clauses.append("REMOVE " + ", ".join(f"#r{i}" for i in range(len(removes))))
        try:
            self.table.update_item(
                Key=_key(job_id, scheduled_for_ms),
                UpdateExpression=" ".join(clauses),
                ConditionExpression=f"attribute_exists(job_id) AND ({condition[0]})",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True


def _failing(owned: Owned) -> dict[str, Any]:
    """The attribute that puts a run entering a failure status in its owner's ``failures`` index (none when the
    owner is not known: the run is then only in its job's history)."""
    return {FAIL_OWNER: owned.owner, "owner": owned.owner} if owned.owner is not None else {}


def _filter(where: RunFilter) -> Any:
    """The FilterExpression of a listing's status and kind (None: no filter)."""
    condition = None
    for attribute, value in (("status", where.status), ("kind", where.kind)):
        if value is not None:
            clause = Attr(attribute).eq(value.value)
            condition = clause if condition is None else condition & clause
    return condition


def _deserialized(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    """An item returned inside a transaction's cancellation reasons (low-level or plain), as plain Python."""
    if not raw:
        return None
    if all(isinstance(v, dict) and len(v) == 1 and next(iter(v)) in _TYPE_TAGS for v in raw.values()):
        return plain({k: _type_deserializer.deserialize(v) for k, v in raw.items()})
    return plain(raw)


_TYPE_TAGS = {"S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"}
_type_deserializer = TypeDeserializer()


_CLAIM_WRITES = {"worker", "started_at", "heartbeat_at", "lateness_ms", "retry_at"}
"""Attributes the claim itself sets (or removes): a created row takes them from the claim, not from ``create``."""


def _tries(tries: tuple[TryRecord, ...] | None) -> dict[str, Any]:
    """The ``SET`` of a transition's ``tries`` (none when None: left as stored)."""
    return {} if tries is None else {TRIES_ATTRIBUTE: tries_value(tries)}


def _key(job_id: str, scheduled_for_ms: int) -> dict[str, Any]:
    return {"job_id": job_id, "scheduled_for": scheduled_for_ms}


def _ours(owned: Owned) -> tuple[str, dict[str, Any]]:
    """Condition: the run is running under the claim ``(attempt, worker)`` [with the heartbeat ``owned`` saw]."""
    expression = "#s = :running AND attempt = :attempt AND worker = :worker"
    values: dict[str, Any] = {
        ":running": RunStatus.RUNNING.value,
        ":attempt": owned.attempt,
        ":worker": owned.worker,
    }
    if owned.heartbeat_at is not None:
        expression += " AND heartbeat_at = :hb"
        values[":hb"] = owned.heartbeat_at
    return expression, values
