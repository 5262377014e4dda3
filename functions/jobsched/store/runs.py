"""The runs table: the unique ``(job_id, scheduled_for)`` insert, the run history, and the run lifecycle
transitions of workers and the sweeper (claim, heartbeat, finish, retry, dead, skip, sweep index)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from jobsched.models import RunStatus
from jobsched.store.dynamo import is_condition_failure, old_item
from jobsched.store.layout import plain


class RunStore:
    """DynamoDB adapter of the runs table (``resources.RUNS``); rows as built by ``store.layout``.

    ``table`` is a boto3 ``Table`` resource.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    def put_new(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """Insert a run unless ``(job_id, scheduled_for)`` exists. 1 request.

        Returns None when the run was created, else the existing row (read from the refused write, at no
        extra cost): the pair names exactly one run (walkthrough, "exactly once").
        """
        try:
            self.table.put_item(
                Item=item,
                ConditionExpression="attribute_not_exists(job_id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                return old_item(error) or {}
            raise
        return None

    def put_new_keyed(
        self, item: dict[str, Any], key_item: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Insert a run together with the item of the idempotency key that asked for it, in one transaction
        (``layout.trigger_key_item``); neither is written unless both are new. 1 request (2 write units each).

        Returns ``(None, None)`` when both were written; ``(stored key item, None)`` when the key was used
        before (its run is the answer); ``(None, existing run row)`` when the run's key is taken.
        """
        try:
            self.table.meta.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table.name,
                            "Item": key_item,
                            "ConditionExpression": "attribute_not_exists(job_id)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table.name,
                            "Item": item,
                            "ConditionExpression": "attribute_not_exists(job_id)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                ]
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            reasons = error.response.get("CancellationReasons") or [{}, {}]
            key_reason, run_reason = [*reasons, {}, {}][:2]
            if key_reason.get("Code") == "ConditionalCheckFailed":
                return _deserialized(key_reason.get("Item")) or {**key_item, "run_scheduled_for": None}, None
            return None, _deserialized(run_reason.get("Item")) or {}
        return None, None

    def get(self, job_id: str, scheduled_for_ms: int) -> dict[str, Any] | None:
        """One run row (strongly consistent), or None."""
        item = self.table.get_item(
            Key={"job_id": job_id, "scheduled_for": scheduled_for_ms}, ConsistentRead=True
        ).get("Item")
        return plain(item) if item else None

    def list_for_job(
        self,
        job_id: str,
        limit: int,
        *,
        status: str | None = None,
        before_ms: int | None = None,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """A page of a job's runs, newest first, optionally only ``status``, older than ``before_ms``.

        Returns ``(rows, scheduled_for of the last row when more may follow, else None)``.
        """
        condition = Key("job_id").eq(job_id)
        if before_ms is not None:
            condition = condition & Key("scheduled_for").lt(before_ms)
        rows: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"KeyConditionExpression": condition, "ScanIndexForward": False}
        if status:
            kwargs["FilterExpression"] = Attr("status").eq(status)
        while len(rows) < limit:
            kwargs["Limit"] = limit - len(rows) if not status else max(limit, 100)
            page = self.table.query(**kwargs)
            rows.extend(plain(i) for i in page["Items"])
            if "LastEvaluatedKey" not in page:
                return rows[:limit], (rows[limit - 1]["scheduled_for"] if len(rows) > limit else None)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return rows[:limit], rows[limit - 1]["scheduled_for"]

    def rows_between(self, job_id: str, first_ms: int, last_ms: int, limit: int) -> list[dict[str, Any]]:
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
        return rows

    # --- worker side ----------------------------------------------------------------------------
    #
    # Every worker transition after the claim is conditioned on "still ours": status running with the
    # attempt number and worker id the claim wrote (each claim increments attempt, so the pair names one
    # claim). The sweeper passes the stale ``heartbeat_at`` it saw as well, so a beat since then wins.
    # Claims and heartbeats never touch ``sweep_pk``/``sweep_at`` (the sweep index is KEYS_ONLY, so they cost
    # no index write); finishing as succeeded or skipped removes them (the run leaves the sparse index).

    def claim(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        worker: str,
        now_ms: int,
        stale_before_ms: int,
        retry_due_by_ms: int,
    ) -> tuple[bool, dict[str, Any] | None]:
        """Claim a run for one try: ``queued|retrying -> running``, or take over a ``running`` run whose
        ``heartbeat_at`` is older than ``stale_before_ms`` (a lost worker). 1 request.

        A ``retrying`` run is claimable once its ``retry_at`` is at most ``retry_due_by_ms`` (an early extra
        copy of its message is dropped; the delayed one, or the sweeper, delivers it on time). Sets ``worker``,
        ``attempt`` + 1, ``started_at`` and ``heartbeat_at`` (epoch ms), and ``lateness_ms`` on the first try.
        Returns ``(True, the row as it was before)`` when claimed, else ``(False, the row as stored or None
        when there is no such run)``: the caller drops the delivery.
        """
        try:
            response = self.table.update_item(
                Key=_key(job_id, scheduled_for_ms),
                UpdateExpression=(
                    "SET #s = :running, worker = :worker, attempt = if_not_exists(attempt, :zero) + :one,"
                    " started_at = :now, heartbeat_at = :now, lateness_ms = if_not_exists(lateness_ms, :late)"
                    " REMOVE retry_at"
                ),
                ConditionExpression=(
                    "#s = :queued"
                    " OR (#s = :retrying AND (attribute_not_exists(retry_at) OR retry_at <= :due))"
                    " OR (#s = :running AND heartbeat_at < :stale)"
                ),
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":running": RunStatus.RUNNING.value,
                    ":queued": RunStatus.QUEUED.value,
                    ":retrying": RunStatus.RETRYING.value,
                    ":worker": worker,
                    ":zero": 0,
                    ":one": 1,
                    ":now": now_ms,
                    ":late": now_ms - scheduled_for_ms,
                    ":due": retry_due_by_ms,
                    ":stale": stale_before_ms,
                },
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False, old_item(error)
            raise
        return True, plain(response.get("Attributes", {}))

    def heartbeat(
        self, job_id: str, scheduled_for_ms: int, *, attempt: int, worker: str, now_ms: int
    ) -> bool:
        """Set ``heartbeat_at = now_ms`` if the run is still this claim's. 1 request. False: no longer ours."""
        return self._transition(
            job_id,
            scheduled_for_ms,
            sets={"heartbeat_at": now_ms},
            condition=_ours(attempt, worker, None),
        )

    def succeed(self, job_id: str, scheduled_for_ms: int, *, attempt: int, worker: str, now_ms: int) -> bool:
        """``running -> succeeded`` (clears the last error, leaves the sweep index). 1 request. False: not ours."""
        return self._transition(
            job_id,
            scheduled_for_ms,
            sets={"status": RunStatus.SUCCEEDED.value, "finished_at": now_ms},
            removes=("sweep_pk", "sweep_at", "error", "retry_at"),
            condition=_ours(attempt, worker, None),
        )

    def retry(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        attempt: int,
        worker: str,
        error: str,
        retry_at_ms: int,
        sweep_at_ms: int,
        heartbeat_at: int | None = None,
    ) -> bool:
        """``running -> retrying`` after a failed try: records ``error`` and when the next try is due
        (``retry_at``, epoch ms) and moves ``sweep_at`` past it, so the sweeper re-enqueues the run only if
        the retry message never comes. 1 request. False: not ours (or, with ``heartbeat_at``, it beat since).
        """
        return self._transition(
            job_id,
            scheduled_for_ms,
            sets={
                "status": RunStatus.RETRYING.value,
                "error": error,
                "retry_at": retry_at_ms,
                "sweep_at": sweep_at_ms,
            },
            condition=_ours(attempt, worker, heartbeat_at),
        )

    def dead(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        attempt: int,
        worker: str,
        now_ms: int,
        error: str,
        final_attempt: int,
        notify_at_ms: int,
        heartbeat_at: int | None = None,
    ) -> bool:
        """``running -> dead`` (out of attempts). 1 request. False: not ours.

        The row keeps its sweep keys with ``notify_pending`` and ``sweep_at = notify_at_ms`` until
        ``notified``: if the dead-letter message or the alert is lost to a crash, the sweeper sends them.
        ``final_attempt`` is the attempt count to record (the last try that ran).
        """
        return self._transition(
            job_id,
            scheduled_for_ms,
            sets={
                "status": RunStatus.DEAD.value,
                "error": error,
                "finished_at": now_ms,
                "attempt": final_attempt,
                "notify_pending": True,
                "sweep_at": notify_at_ms,
            },
            removes=("retry_at",),
            condition=_ours(attempt, worker, heartbeat_at),
        )

    def notified(self, job_id: str, scheduled_for_ms: int) -> bool:
        """A dead run's dead-letter message and alert went out: it leaves the sweep index. 1 request."""
        return self._transition(
            job_id,
            scheduled_for_ms,
            removes=("notify_pending", "sweep_pk", "sweep_at"),
            condition=("#s = :dead", {":dead": RunStatus.DEAD.value}),
        )

    def give_back(
        self, job_id: str, scheduled_for_ms: int, *, attempt: int, worker: str, before: dict[str, Any]
    ) -> bool:
        """Undo the claim ``(attempt, worker)``: the row returns to ``before`` (the row as the claim found it:
        its status, attempt, worker, start, heartbeat, retry and lateness), so the try the claim opened does not
        count. For a failure after the claim and before the target started. 1 request. False: not ours."""
        restored = ("worker", "started_at", "heartbeat_at", "retry_at", "lateness_ms")
        return self._transition(
            job_id,
            scheduled_for_ms,
            sets={
                "status": before.get("status", RunStatus.QUEUED.value),
                "attempt": int(before.get("attempt", 0)),
                **{name: before[name] for name in restored if before.get(name) is not None},
            },
            removes=tuple(name for name in restored if before.get(name) is None),
            condition=_ours(attempt, worker, None),
        )

    def skip(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        attempt: int,
        worker: str,
        now_ms: int,
        reason: str,
        heartbeat_at: int | None = None,
    ) -> bool:
        """``running -> skipped`` with ``reason`` in ``error`` (job deleted, overlap). 1 request. False: not ours."""
        return self._transition(
            job_id,
            scheduled_for_ms,
            sets={"status": RunStatus.SKIPPED.value, "error": reason, "finished_at": now_ms},
            removes=("sweep_pk", "sweep_at", "retry_at"),
            condition=_ours(attempt, worker, heartbeat_at),
        )

    # --- sweeper side ---------------------------------------------------------------------------

    def sweep_due(
        self, shard: int, now_ms: int, limit: int, start_key: dict[str, Any] | None = None
    ) -> tuple[list[tuple[str, int]], dict[str, Any] | None]:
        """One page of the sparse ``sweep`` index of shard ``shard`` (``sweep_pk = sweep#<shard>``, see
        ``layout.new_run_item``) with ``sweep_at <= now_ms``, oldest first. 1 request.

        Returns ``([(job_id, scheduled_for), ...], start key of the next page or None)``.
        """
        kwargs: dict[str, Any] = {
            "IndexName": "sweep",
            "KeyConditionExpression": Key("sweep_pk").eq(f"sweep#{shard}") & Key("sweep_at").lte(now_ms),
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = start_key
        page = self.table.query(**kwargs)
        keys = [(str(i["job_id"]), int(i["scheduled_for"])) for i in page["Items"]]
        return keys, page.get("LastEvaluatedKey")

    def get_many(self, keys: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
        """The rows of ``[(job_id, scheduled_for), ...]`` (consistent reads, batches of 100; absent rows are
        left out). One request per 100 keys, plus retries of unprocessed keys."""
        rows: list[dict[str, Any]] = []
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
                rows.extend(plain(i) for i in response["Responses"].get(self.table.name, []))
                request = response.get("UnprocessedKeys") or {}
        return rows

    def defer_sweep(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        status: str,
        seen_sweep_at: int,
        sweep_at_ms: int,
        sweeps: int | None = None,
    ) -> bool:
        """Move a run's ``sweep_at`` to ``sweep_at_ms`` if its status and ``sweep_at`` are still what the
        sweeper saw; ``sweeps`` records how many times the sweeper re-enqueued it. 1 request."""
        sets: dict[str, Any] = {"sweep_at": sweep_at_ms}
        if sweeps is not None:
            sets["sweeps"] = sweeps
        return self._transition(
            job_id,
            scheduled_for_ms,
            sets=sets,
            condition=(
                "#s = :seen_s AND sweep_at = :seen_at",
                {":seen_s": status, ":seen_at": seen_sweep_at},
            ),
        )

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

    # --- helpers --------------------------------------------------------------------------------

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


def _ours(attempt: int, worker: str, heartbeat_at: int | None) -> tuple[str, dict[str, Any]]:
    """Condition: the run is running under the claim ``(attempt, worker)`` [with this heartbeat]."""
    expression = "#s = :running AND attempt = :attempt AND worker = :worker"
    values: dict[str, Any] = {":running": RunStatus.RUNNING.value, ":attempt": attempt, ":worker": worker}
    if heartbeat_at is not None:
        expression += " AND heartbeat_at = :hb"
        values[":hb"] = heartbeat_at
    return expression, values
