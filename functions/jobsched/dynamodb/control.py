"""The CONTROL table: the scheduler's leader leases and due-index watermarks, one item each per partition.

Items (key ``pk``):
- ``lease#<partition>``: ``holder`` (contender id), ``term`` (fencing token, only grows), ``expires_at``
  (epoch ms, by the holder's clock). Never deleted: a release sets ``expires_at`` to the instant before the
  release, so the next holder knows when the earlier terms stopped.
- ``watermark#<partition>``: ``bucket`` (the oldest due-index bucket not yet drained, an integer
  ``due_at // bucket width``), ``term`` of the leader that wrote it, ``updated_at`` (epoch ms).
- ``positions#<partition>``: ``positions`` (the read positions of the partition's due-index lanes, JSON as
  ``aws.positions.JsonPositions`` encodes them), ``term`` of the leader that wrote them.
- ``lateness#<partition>``: ``summary`` (the partition's dispatch lateness per priority and owner over its last
  minute of dispatches, JSON as ``aws.lateness.JsonLateness`` encodes it; at most one write a minute), ``term`` of
  the leader that wrote it.
- ``partitions``: ``high_water``, the most scheduler partitions any deployment ran (see
  ``raise_partition_high_water``).
- ``due_shards``: ``high_water``, the most due shards any deployment filed entries in (see
  ``raise_shard_high_water``).
"""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from jobsched.domain.lease import LeaseRecord
from jobsched.dynamodb.dynamo import is_condition_failure
from jobsched.dynamodb.layout import plain

_deserializer = TypeDeserializer()


def lease_key(partition: int) -> dict[str, str]:
    return {"pk": f"lease#{partition}"}


def watermark_key(partition: int) -> dict[str, str]:
    return {"pk": f"watermark#{partition}"}


def positions_key(partition: int) -> dict[str, str]:
    return {"pk": f"positions#{partition}"}


def lateness_key(partition: int) -> dict[str, str]:
    return {"pk": f"lateness#{partition}"}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


class ControlStore:
    """DynamoDB adapter of the CONTROL table (``resources.CONTROL``): implements ``lease.LeaseStore``, the
    scheduler's ``WatermarkStore`` and ``LatenessStore``.

    ``client`` is a low-level boto3 DynamoDB client (``Aws.dynamodb``, not a resource's client: every
    contender calls this once a second, so it skips the resource layer), ``table_name`` the CONTROL table's
    name. Every method is 1 request; conditional writes return False when refused and raise
    ``ClientError`` otherwise.
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.name = table_name

    def _key(self, key: dict[str, str]) -> dict[str, dict[str, str]]:
        return {"pk": _s(key["pk"])}

    def _get(self, key: dict[str, str]) -> dict[str, Any] | None:
        item = self.client.get_item(TableName=self.name, Key=self._key(key), ConsistentRead=True).get("Item")
        return {k: _deserializer.deserialize(v) for k, v in item.items()} if item else None

    def _conditional(self, operation: str, **kwargs: Any) -> bool:
        try:
            getattr(self.client, operation)(TableName=self.name, **kwargs)
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True

    # --- leases ---------------------------------------------------------------------------------

    def read_lease(self, partition: int) -> LeaseRecord | None:
        """The lease record of ``partition`` (strongly consistent read), or None."""
        item = self._get(lease_key(partition))
        if not item:
            return None
        item = plain(item)
        return LeaseRecord(partition, str(item.get("holder", "")), int(item["term"]), int(item["expires_at"]))

    def take_lease(self, record: LeaseRecord, *, previous: LeaseRecord | None, now_ms: int) -> bool:
        """Write a new holder's lease if the stored one is still ``previous`` (same term) and has expired
        by ``now_ms``; with ``previous=None``, only if no lease exists yet."""
        item = {
            "pk": _s(lease_key(record.partition)["pk"]),
            "holder": _s(record.holder),
            "term": _n(record.term),
            "expires_at": _n(record.expires_at),
        }
        if previous is None:
            return self._conditional("put_item", Item=item, ConditionExpression="attribute_not_exists(pk)")
        return self._conditional(
            "put_item",
            Item=item,
            ConditionExpression="#term = :previous AND expires_at < :now",
            ExpressionAttributeNames={"#term": "term"},
            ExpressionAttributeValues={":previous": _n(previous.term), ":now": _n(now_ms)},
        )

    def renew_lease(self, record: LeaseRecord) -> bool:
        """Move ``expires_at`` of the held lease, if holder and term are unchanged."""
        return self._update_expiry(record, record.expires_at)

    def release_lease(self, record: LeaseRecord) -> bool:
        """Expire the held lease at ``record.expires_at`` (the release instant), if holder and term are
        unchanged."""
        return self._update_expiry(record, record.expires_at)

    def _update_expiry(self, record: LeaseRecord, expires_at: int) -> bool:
        return self._conditional(
            "update_item",
            Key=self._key(lease_key(record.partition)),
            UpdateExpression="SET expires_at = :expires",
            ConditionExpression="holder = :holder AND #term = :term",
            ExpressionAttributeNames={"#term": "term"},
            ExpressionAttributeValues={
                ":expires": _n(expires_at),
                ":holder": _s(record.holder),
                ":term": _n(record.term),
            },
        )

    # --- watermarks -----------------------------------------------------------------------------

    def read_watermark(self, partition: int) -> int | None:
        """The stored watermark bucket of ``partition`` (strongly consistent), or None."""
        item = self._get(watermark_key(partition))
        return int(item["bucket"]) if item else None

    def advance_watermark(self, partition: int, bucket: int, *, term: int, now_ms: int) -> bool:
        """Store ``bucket`` as the watermark if it is ahead of the stored one and no newer term wrote it
        (or none exists). Watermarks never move back."""
        return self._conditional(
            "update_item",
            Key=self._key(watermark_key(partition)),
            UpdateExpression="SET #bucket = :bucket, #term = :term, updated_at = :now",
            ConditionExpression="attribute_not_exists(pk) OR (#bucket < :bucket AND #term <= :term)",
            ExpressionAttributeNames={"#bucket": "bucket", "#term": "term"},
            ExpressionAttributeValues={":bucket": _n(bucket), ":term": _n(term), ":now": _n(now_ms)},
        )

    def read_positions(self, partition: int) -> str | None:
        """The stored read positions of ``partition`` (strongly consistent), or None."""
        item = self._get(positions_key(partition))
        return str(item["positions"]) if item else None

    def save_positions(self, partition: int, positions: str, *, term: int) -> bool:
        """Store ``positions`` unless a newer ``term`` stored them."""
        return self._save_termed(positions_key(partition), "positions", positions, term)

    def read_lateness(self, partition: int) -> str | None:
        """The stored lateness summary of ``partition`` (``ports.lateness.LatenessStore``; strongly consistent),
        or None."""
        item = self._get(lateness_key(partition))
        return str(item["summary"]) if item else None

    def save_lateness(self, partition: int, summary: str, *, term: int) -> bool:
        """Store ``summary`` unless a newer ``term`` stored one."""
        return self._save_termed(lateness_key(partition), "summary", summary, term)

    def _save_termed(self, key: dict[str, str], attribute: str, text: str, term: int) -> bool:
        """Set ``attribute`` to ``text`` and ``term`` on the item ``key`` unless a newer term set them."""
        return self._conditional(
            "update_item",
            Key=self._key(key),
            UpdateExpression="SET #text = :text, #term = :term",
            ConditionExpression="attribute_not_exists(pk) OR #term <= :term",
            ExpressionAttributeNames={"#term": "term", "#text": attribute},
            ExpressionAttributeValues={":text": _s(text), ":term": _n(term)},
        )

    def read_partition_high_water(self) -> int | None:
        """The most scheduler partitions any deployment has run (``raise_partition_high_water``), or None when
        no scheduler of this code has recorded it. 1 consistent read."""
        item = self._get({"pk": "partitions"})
        return int(item["high_water"]) if item and "high_water" in item else None

    def raise_partition_high_water(self, partitions: int) -> tuple[int, bool]:
        """Record that a deployment runs ``partitions`` scheduler partitions. Returns ``(the most partitions any
        deployment has run, whether the mark was missing)`` (item ``pk=partitions``, attribute ``high_water``).
        Partitions at or above the current count but below that mark may still hold jobs: their adopters poll
        them (``scheduler.adopted_partitions``). A missing mark (a deployment from before it existed) is to be
        bootstrapped from the jobs themselves (``JobStore.highest_due_partition``). 1 request."""
        return self._raise("partitions", partitions)

    def raise_shard_high_water(self, shards: int) -> tuple[int, bool]:
        """Record that a deployment files due entries in ``shards`` due shards. Returns ``(the most shards any
        deployment has used, whether the mark was missing)`` (item ``pk=due_shards``, attribute ``high_water``).
        A due entry may be in any shard below that mark: the tick reads them all (``Scheduler.read_shards``). A
        missing mark is to be bootstrapped from the jobs themselves (``JobStore.highest_due_shard``). 1
        request."""
        return self._raise("due_shards", shards)

    def _raise(self, pk: str, count: int) -> tuple[int, bool]:
        """Raise item ``pk``'s ``high_water`` to ``count``: ``(the mark after, whether it was missing)``."""
        try:
            response = self.client.update_item(
                TableName=self.name,
                Key=self._key({"pk": pk}),
                UpdateExpression="SET high_water = :n",
                ConditionExpression="attribute_not_exists(high_water) OR high_water < :n",
                ExpressionAttributeValues={":n": _n(count)},
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            stored = error.response.get("Item", {}).get("high_water", {}).get("N")
            return (max(count, int(stored)) if stored is not None else count), False
        return count, "high_water" not in response.get("Attributes", {})
