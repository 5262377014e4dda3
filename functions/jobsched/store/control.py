"""The CONTROL table: the scheduler's leader leases and due-index watermarks, one item each per partition.

Items (key ``pk``):
- ``lease#<partition>``: ``holder`` (contender id), ``term`` (fencing token, only grows), ``expires_at``
  (epoch ms, by the holder's clock). Never deleted: a release sets ``expires_at = 0``.
- ``watermark#<partition>``: ``bucket`` (the oldest due-index bucket not yet drained, an integer
  ``due_at // bucket width``), ``term`` of the leader that wrote it, ``updated_at`` (epoch ms).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from jobsched.lease import LeaseRecord
from jobsched.store.dynamo import is_condition_failure
from jobsched.store.layout import plain


def lease_key(partition: int) -> dict[str, str]:
    return {"pk": f"lease#{partition}"}


def watermark_key(partition: int) -> dict[str, str]:
    return {"pk": f"watermark#{partition}"}


class ControlStore:
    """DynamoDB adapter of the CONTROL table (``resources.CONTROL``): implements ``lease.LeaseStore``
    and the scheduler's ``WatermarkStore``. ``table`` is a boto3 ``Table`` resource. Every method is
    1 request; conditional writes return False when refused and raise ``ClientError`` otherwise."""

    def __init__(self, table: Any) -> None:
        self.table = table

    # --- leases ---------------------------------------------------------------------------------

    def read_lease(self, partition: int) -> LeaseRecord | None:
        """The lease record of ``partition`` (strongly consistent read), or None."""
        item = self.table.get_item(Key=lease_key(partition), ConsistentRead=True).get("Item")
        if not item:
            return None
        item = plain(item)
        return LeaseRecord(partition, str(item.get("holder", "")), int(item["term"]), int(item["expires_at"]))

    def take_lease(self, record: LeaseRecord, *, previous: LeaseRecord | None, now_ms: int) -> bool:
        """Write a new holder's lease if the stored one is still ``previous`` (same term) and has expired
        by ``now_ms``; with ``previous=None``, only if no lease exists yet."""
        if previous is None:
            condition = "attribute_not_exists(pk)"
            values: dict[str, Any] = {}
        else:
            condition = "#term = :previous AND expires_at < :now"
            values = {":previous": previous.term, ":now": now_ms}
        return self._write(
            record, condition, values, names={"#term": "term"} if previous is not None else None
        )

    def renew_lease(self, record: LeaseRecord) -> bool:
        """Move ``expires_at`` of the held lease, if holder and term are unchanged."""
        return self._update_expiry(record, record.expires_at)

    def release_lease(self, record: LeaseRecord) -> bool:
        """Expire the held lease now (``expires_at = 0``), if holder and term are unchanged."""
        return self._update_expiry(record, 0)

    def _write(
        self, record: LeaseRecord, condition: str, values: dict[str, Any], names: dict[str, str] | None
    ) -> bool:
        kwargs: dict[str, Any] = {
            "Item": {
                **lease_key(record.partition),
                "holder": record.holder,
                "term": record.term,
                "expires_at": record.expires_at,
            },
            "ConditionExpression": condition,
        }
        if values:
            kwargs["ExpressionAttributeValues"] = values
        if names:
            kwargs["ExpressionAttributeNames"] = names
        try:
            self.table.put_item(**kwargs)
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True

    def _update_expiry(self, record: LeaseRecord, expires_at: int) -> bool:
        try:
            self.table.update_item(
                Key=lease_key(record.partition),
                UpdateExpression="SET expires_at = :expires",
                ConditionExpression="holder = :holder AND #term = :term",
                ExpressionAttributeNames={"#term": "term"},
                ExpressionAttributeValues={
                    ":expires": expires_at,
                    ":holder": record.holder,
                    ":term": record.term,
                },
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True

    # --- watermarks -----------------------------------------------------------------------------

    def read_watermark(self, partition: int) -> int | None:
        """The stored watermark bucket of ``partition`` (strongly consistent), or None."""
        item = self.table.get_item(Key=watermark_key(partition), ConsistentRead=True).get("Item")
        return int(item["bucket"]) if item else None

    def advance_watermark(self, partition: int, bucket: int, *, term: int, now_ms: int) -> bool:
        """Store ``bucket`` as the watermark if it is ahead of the stored one and no newer term wrote it
        (or none exists). Watermarks never move back."""
        try:
            self.table.update_item(
                Key=watermark_key(partition),
                UpdateExpression="SET #bucket = :bucket, #term = :term, updated_at = :now",
                ConditionExpression="attribute_not_exists(pk) OR (#bucket < :bucket AND #term <= :term)",
                ExpressionAttributeNames={"#bucket": "bucket", "#term": "term"},
                ExpressionAttributeValues={":bucket": bucket, ":term": term, ":now": now_ms},
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True
