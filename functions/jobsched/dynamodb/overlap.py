"""The overlap lock of a job with ``overlap: skip``, ``buffer_one`` or ``replace`` on the jobs table: one try at
a time.

Its worker holds the item ``pk=job#<id> sk=running`` (``run_id``, ``attempt``, ``worker``, ``heartbeat_at`` epoch
ms, ``expires_at`` epoch s) from before the target starts until its result is recorded, refreshing
``heartbeat_at`` with each heartbeat. Exact whatever the history length, 1 write to take it and 1 to give it
back; a holder whose heartbeat went stale (its worker died) loses it to the next claim. Under ``buffer_one`` the
item also names the fire that waits for it (``buffered``, a run id; design §5.4): the holder's release hands the
lock to that fire (``worker = RESERVED_WORKER``), which only that fire's try takes."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from jobsched.dynamodb.dynamo import is_condition_failure, old_item
from jobsched.dynamodb.errors import unavailable_on_failure
from jobsched.dynamodb.layout import RUNNING_SK, job_pk, plain
from jobsched.ports.runs import RESERVED_WORKER, BufferAnswer, BufferRequest, OverlapHolder, OverlapRequest


class OverlapLock:
    """The overlap locks of the jobs table (``resources.JOBS``): the ``acquire_overlap``, ``renew_overlap`` and
    ``release_overlap`` of ``ports.runs.JobSpecs`` (through ``store.jobs.JobStore``).

    ``table`` is a boto3 ``Table`` resource.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    @unavailable_on_failure
    def acquire(self, request: OverlapRequest) -> OverlapHolder | None:
        """Take the job's overlap lock for ``request``'s try ``(run_id, attempt, worker)``. 1 request.

        Succeeds when no one holds it, the holder is this run (a retry or a takeover of it, or the fire the lock
        was handed to), or its holder's ``heartbeat_at`` is older than ``stale_before_ms`` (epoch ms: the holder
        was lost) when the holder is not reserved (``RESERVED_WORKER``) and no other fire waits (``buffered``);
        with ``replacing`` (a holder as returned by a refusal), exactly when that holder still holds it (its try
        is known to be over: it finished but could not give the lock back) and no other fire waits. The write
        leaves ``buffered`` as stored. Returns None when taken, else the try holding it. ``expires_at_s`` (epoch
        s, the table's TTL) bounds how long a lock left behind by a crash is kept.
        """
        replacing = request.replacing
        names = {"#b": "buffered"}
        values: dict[str, Any] = {":run": request.run_id}
        queue_free = "(attribute_not_exists(#b) OR #b = run_id OR #b = :run)"
        if replacing is None:
            own = "run_id = :run"
            if request.held_after_ms is not None:  # not a lock held on past its try's record
                own = "(run_id = :run AND (worker = :reserved OR heartbeat_at <= :held))"
                values[":held"] = request.held_after_ms
            condition = (
                f"attribute_not_exists(pk) OR {own}"
                f" OR (heartbeat_at < :stale AND worker <> :reserved AND {queue_free})"
            )
            values.update({":stale": request.stale_before_ms, ":reserved": RESERVED_WORKER})
        else:
            condition = (
                f"run_id = :held_run AND attempt = :held_attempt AND worker = :held_worker AND {queue_free}"
            )
            values.update(
                {
                    ":held_run": replacing.run_id,
                    ":held_attempt": replacing.attempt,
                    ":held_worker": replacing.worker,
                }
            )
        values.update(
            {
                ":attempt": request.attempt,
                ":worker": request.worker,
                ":now": request.now_ms,
                ":expires": request.expires_at_s,
            }
        )
        try:
            self.table.update_item(
                Key={"pk": job_pk(request.job_id), "sk": RUNNING_SK},
                UpdateExpression=(
                    "SET run_id = :run, attempt = :attempt, worker = :worker, heartbeat_at = :now,"
                    " expires_at = :expires"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                return _holder(old_item(error)) or OverlapHolder(run_id="?")
            raise
        return None

    @unavailable_on_failure
    def renew(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool:
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
    def release(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> str | None:
        """Give the lock back if this try holds it (else nothing): 1 request; or, when a fire waits for it
        (``buffered``), hand it to that fire (``RESERVED_WORKER``, attempt 0): 1 more. Returns the run id of the
        fire it was handed to, else None."""
        key = {"pk": job_pk(job_id), "sk": RUNNING_SK}
        names = {"#b": "buffered"}
        values: dict[str, Any] = {":run": run_id, ":attempt": attempt, ":worker": worker}
        ours = "run_id = :run AND attempt = :attempt AND worker = :worker"
        try:
            self.table.delete_item(
                Key=key,
                ConditionExpression=f"{ours} AND (attribute_not_exists(#b) OR #b = run_id)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return None
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            held = _holder(old_item(error))
        if held is None or (held.run_id, held.attempt, held.worker) != (run_id, attempt, worker):
            return None
        try:
            self.table.update_item(
                Key=key,
                UpdateExpression="SET run_id = #b, attempt = :zero, worker = :reserved",
                ConditionExpression=f"{ours} AND attribute_exists(#b) AND #b <> run_id",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={**values, ":zero": 0, ":reserved": RESERVED_WORKER},
            )
        except ClientError as error:
            if is_condition_failure(error):
                return None
            raise
        return held.waiting

    @unavailable_on_failure
    def buffer(self, request: BufferRequest) -> BufferAnswer:
        """Make ``request``'s run the fire that waits for the held lock (``buffered``): when no other fire waits,
        or with ``replacing``, exactly when that fire waits. 1 request."""
        names = {"#b": "buffered"}
        values: dict[str, Any] = {":run": request.run_id}
        if request.replacing is None:
            condition = "attribute_exists(pk) AND (attribute_not_exists(#b) OR #b = run_id OR #b = :run)"
        else:
            condition = "attribute_exists(pk) AND #b = :old AND #b <> run_id"
            values[":old"] = request.replacing
        try:
            answer = self.table.update_item(
                Key={"pk": job_pk(request.job_id), "sk": RUNNING_SK},
                UpdateExpression="SET #b = :run",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                return BufferAnswer(False, _holder(old_item(error)))
            raise
        return BufferAnswer(True, _holder(answer.get("Attributes")))


def _holder(item: dict[str, Any] | None) -> OverlapHolder | None:
    """The lock item ``item`` (None or empty: no lock) as an ``OverlapHolder``."""
    if not item:
        return None
    held = plain(item)
    return OverlapHolder(
        run_id=str(held.get("run_id", "?")),
        attempt=held.get("attempt"),
        worker=held.get("worker"),
        heartbeat_at=held.get("heartbeat_at"),
        buffered=held.get("buffered"),
    )
