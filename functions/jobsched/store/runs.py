"""The runs table: the unique ``(job_id, scheduled_for)`` insert and the run history."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

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
