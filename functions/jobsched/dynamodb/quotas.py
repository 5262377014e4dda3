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

import math
from typing import Any

from botocore.exceptions import ClientError

from jobsched.domain.quotas import MICRO, QuotaExceeded, check_usage
from jobsched.dynamodb.dynamo import is_condition_failure
from jobsched.dynamodb.errors import unavailable_on_failure
from jobsched.ports.errors import Conflict
from jobsched.ports.quotas import OwnerUsage, QuotaCounters, UsageChange

USAGE_SK = "usage"


def quota_pk(owner: str) -> str:
    """Partition key of the owner's quota items: ``quota#<owner>``."""
    return f"quota#{owner}"


def requests_sk(window_ms: int) -> str:
    """Sort key of the owner's manual-request counter for the window starting at ``window_ms`` (epoch ms)."""
    return f"requests#{window_ms}"


def usage_update(table_name: str, usage: UsageChange | None) -> list[dict[str, Any]]:
    """The ``TransactWriteItems`` entry adding ``usage`` to its owner's usage item (none for no change), on the
    condition that the sums stay within the limits it carries (``usage_limits``)."""
    if usage is None or usage.empty:
        return []
    condition, values = usage_limits(usage)
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": {"pk": quota_pk(usage.owner), "sk": USAGE_SK},
        "UpdateExpression": "ADD jobs :jobs, fire_rate :rate",
        "ExpressionAttributeValues": {":jobs": usage.jobs, ":rate": usage.fire_rate, **values},
    }
    if condition:
        update["ConditionExpression"] = condition
    return [{"Update": update}]


def usage_limits(usage: UsageChange) -> tuple[str, dict[str, int]]:
    """The condition (empty: none) and its values keeping ``usage``'s owner within the limits the change
    carries (``domain.quotas.check_usage``'s rule: the stored sum plus what it adds at most the limit), for
    the limits it raises usage against."""
    conditions, values = [], {}
    most = {
        "jobs": usage.limit_jobs - usage.jobs if usage.limit_jobs is not None and usage.jobs > 0 else None,
        "fire_rate": (
            math.floor(usage.limit_fires_per_minute * MICRO) - usage.fire_rate
            if usage.limit_fires_per_minute is not None and usage.fire_rate > 0
            else None
        ),
    }
    for name, value in most.items():
        if (
            value is not None
        ):  # an absent sum is 0: within the limit when the limit leaves room for the change
            values[f":most_{name}"] = value
            within = f"{name} <= :most_{name}"
            conditions.append(f"(attribute_not_exists({name}) OR {within})" if value >= 0 else within)
    return " AND ".join(conditions), values


def over_quota(counters: QuotaCounters, usage: UsageChange) -> Exception:
    """The error for a write whose usage condition (``usage_limits``) failed: ``QuotaExceeded`` with the
    owner's numbers read again, or ``Conflict`` (retry) when the usage has dropped back within since."""
    try:
        check_usage(usage, counters.usage(usage.owner))
    except QuotaExceeded as refused:
        return refused
    return Conflict("the owner's quota usage changed meanwhile; retry")


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
