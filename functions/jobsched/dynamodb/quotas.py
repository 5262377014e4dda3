"""The owners' quota counters on the jobs table (``jobsched.ports.quotas``, design §4.11).

Items (``docs/protocol.md``, Keys):

- ``quota#<owner>`` / ``usage``: ``jobs`` and ``fire_rate`` (micro-fires per minute), added to by an ``Update``
  in the transaction of each job create, re-timing edit and delete (``usage_update``);
- ``quota#<owner>`` / ``requests#<window_ms>``: ``count`` of the owner's manual requests (triggers, backfills)
  in the minute starting at ``window_ms`` (epoch ms), with ``expires_at`` (epoch s, the table's TTL attribute) a
  minute after the window ends. One conditional ``UpdateItem`` per request.

Neither carries ``owner`` nor ``due_pk``: no index holds them. Nothing on the run path reads or writes them.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from jobsched.dynamodb.dynamo import is_condition_failure
from jobsched.dynamodb.errors import unavailable_on_failure
from jobsched.ports.quotas import OwnerUsage, UsageChange

USAGE_SK = "usage"


def quota_pk(owner: str) -> str:
    """Partition key of the owner's quota items: ``quota#<owner>``."""
    return f"quota#{owner}"


def requests_sk(window_ms: int) -> str:
    """Sort key of the owner's manual-request counter for the window starting at ``window_ms`` (epoch ms)."""
    return f"requests#{window_ms}"


def usage_update(table_name: str, usage: UsageChange | None) -> list[dict[str, Any]]:
    """The ``TransactWriteItems`` entry adding ``usage`` to its owner's usage item (none for no change)."""
    if usage is None or usage.empty:
        return []
    return [
        {
            "Update": {
                "TableName": table_name,
                "Key": {"pk": quota_pk(usage.owner), "sk": USAGE_SK},
                "UpdateExpression": "ADD jobs :jobs, fire_rate :rate",
                "ExpressionAttributeValues": {":jobs": usage.jobs, ":rate": usage.fire_rate},
            }
        }
    ]


class QuotaTable:
    """``QuotaCounters`` on the jobs table (a boto3 ``Table``)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @unavailable_on_failure
    def usage(self, owner: str) -> OwnerUsage:
        """The owner's usage item, read strongly consistent (zeros when absent)."""
        item = self.table.get_item(Key={"pk": quota_pk(owner), "sk": USAGE_SK}, ConsistentRead=True).get(
            "Item"
        )
        if not item:
            return OwnerUsage()
        return OwnerUsage(int(item.get("jobs", 0)), int(item.get("fire_rate", 0)))

    @unavailable_on_failure
    def count_request(self, owner: str, window_ms: int, limit: int, expires_at_s: int) -> int | None:
        """One conditional ``ADD count 1`` on the window's counter, refused (None) when it holds ``limit``."""
        try:
            answer = self.table.update_item(
                Key={"pk": quota_pk(owner), "sk": requests_sk(window_ms)},
                UpdateExpression="ADD #count :one SET expires_at = :expires",
                ConditionExpression="attribute_not_exists(#count) OR #count < :limit",
                ExpressionAttributeNames={"#count": "count"},
                ExpressionAttributeValues={":one": 1, ":limit": limit, ":expires": expires_at_s},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as error:
            if is_condition_failure(error):
                return None
            raise
        return int(answer["Attributes"]["count"])

    @unavailable_on_failure
    def requests_in(self, owner: str, window_ms: int) -> int:
        """The window's count (0 when absent)."""
        item = self.table.get_item(
            Key={"pk": quota_pk(owner), "sk": requests_sk(window_ms)}, ConsistentRead=True
        ).get("Item")
        return int(item.get("count", 0)) if item else 0
