"""The runs table: the DynamoDB adapter of the run port (``jobsched.ports.run_stores``: ``RunRows``, ``SweepRows``,
the scheduler's and the API's inserts and reads). The unique ``(job_id, scheduled_for)`` insert, the run
history, and the run lifecycle transitions of workers and the sweeper (claim, heartbeat, finish, retry, dead,
skip, sweep index, re-run): each transition is one conditional request rendered from the run state machine's
table (``jobsched.domain.run_states``, by ``jobsched.dynamodb.run_expressions``), one write unit for a row under
1 KB (plus the sparse indexes' entries a transition files or removes). Takes and returns ``RunRow`` records;
item layouts are ``jobsched.dynamodb.layout``'s. Transient DynamoDB failures are raised as
``jobsched.ports.errors.StoreUnavailable``.

Claims and heartbeats never touch ``sweep_pk``/``sweep_at`` (the sweep index is KEYS_ONLY, so they cost no index
write); a scheduled run whose first try succeeds was never in it, and removing absent attributes writes no
index entry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Attr, Key
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from jobsched.domain.run_steps import Outcome, RunStateMachine, Step, insert_step
from jobsched.dynamodb import run_expressions
from jobsched.dynamodb.dynamo import is_condition_failure, old_item, transact_put
from jobsched.dynamodb.errors import unavailable_on_failure
from jobsched.dynamodb.layout import FAIL_OWNER, plain, run_row, sweep_pk, trigger_key_item
from jobsched.ports.runs import EVERY_RUN, KeyedInsert, RunFilter, RunKey, SweepPage

if TYPE_CHECKING:
    from jobsched.ports.runs import RunRow


class RunStore(RunStateMachine):
    """DynamoDB adapter of the runs table (``resources.RUNS``); items as built by ``store.layout``.

    ``table`` is a boto3 ``Table`` resource.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    @unavailable_on_failure
    def apply_step(self, step: Step) -> Outcome:
        """``RunStateMachine.apply_step``: one conditional request rendered from the table
        (``store.run_expressions``): a ``PutItem`` for an insert, else an ``UpdateItem``. A refusal answers the
        stored row when the transition answers with one (read from the refused write, at no extra cost)."""
        method, kwargs = run_expressions.request(step)
        try:
            response = getattr(self.table, method)(**kwargs)
        except ClientError as error:
            if is_condition_failure(error):
                old = old_item(error)
                row = run_row(old) if old else None
                return Outcome(False, before=row, after=row)
            raise
        attributes = response.get("Attributes")
        row = run_row(attributes) if attributes else None
        if step.transition.answers == "after":
            return Outcome(True, after=row)
        return Outcome(True, before=row)

    def put_new(self, row: RunRow) -> RunRow | None:
        """Insert a run unless ``(job_id, scheduled_for)`` exists. 1 request.

        Returns None when the run was created, else the existing row (read from the refused write, at no
        extra cost; if the refusal carries none, one consistent read, and ``row`` itself if that finds none
        either): the pair names exactly one run.
        """
        outcome = self.apply_step(insert_step(row))
        if outcome.applied:
            return None
        return outcome.before or self.get(row.job_id, row.scheduled_for) or row

    @unavailable_on_failure
    def put_new_keyed(self, row: RunRow, *, owner: str, idempotency_key: str) -> KeyedInsert:
        """Insert a run together with the item of the manual trigger's ``idempotency_key`` (of ``owner``) that
        asked for it, in one transaction (``layout.trigger_key_item``, expiring with the run); neither is
        written unless both are new. 1 request (2 write units each).

        Returns ``KeyedInsert(created=True)`` when both were written; ``key_used`` with ``key_run_at`` when the
        key was used before (its run is the answer); ``existing`` when the run's key is taken.
        """
        _, put = run_expressions.request(insert_step(row))
        item = put["Item"]
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
                    transact_put(
                        self.table.name,
                        written,
                        put["ConditionExpression"],
                        names=put["ExpressionAttributeNames"],
                        return_old=True,
                    )
                    for written in (key_item, item)
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


def _key(job_id: str, scheduled_for_ms: int) -> dict[str, Any]:
    return {"job_id": job_id, "scheduled_for": scheduled_for_ms}
