"""The overlap lock of a job with ``overlap: skip`` on the jobs table: one try at a time.

Its worker holds the item ``pk=job#<id> sk=running`` (``run_id``, ``attempt``, ``worker``, ``heartbeat_at`` epoch
ms, ``expires_at`` epoch s) from before the target starts until its result is recorded, refreshing
``heartbeat_at`` with each heartbeat. Exact whatever the history length, 1 write to take it and 1 to give it
back; a holder whose heartbeat went stale (its worker died) loses it to the next claim."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from jobsched.dynamodb.dynamo import is_condition_failure, old_item
from jobsched.dynamodb.errors import unavailable_on_failure
from jobsched.dynamodb.layout import RUNNING_SK, job_pk, plain
from jobsched.ports.runs import OverlapHolder, OverlapRequest


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
    def release(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> None:
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
