"""The chain mark on the jobs table (design §2.1): the spec item's ``downstream`` count (``layout.DOWNSTREAM``).

A job that names an upstream in ``after`` is counted on the upstream's spec item in the very transaction that
writes it (``count_write``, refused when the upstream is gone), and uncounted after a delete or a re-point has
landed (``uncount``, best effort): the count is never below the jobs that name the upstream, so a worker that
reads it 0 with the spec it already reads may skip the ``by_upstream`` query. A failed uncount leaves it high:
one query per run of that upstream too many, never a chained run missed.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import ClientError

from jobsched.dynamodb.layout import DOWNSTREAM, SPEC_SK, job_pk

logger = logging.getLogger(__name__)


def count_write(table_name: str, upstream_id: str) -> dict[str, Any]:
    """The ``TransactWriteItems`` ``Update`` adding 1 to job ``upstream_id``'s chain mark, only while its spec
    item is live (``doc``: not a tombstone, not gone); 1 write unit."""
    return {
        "Update": {
            "TableName": table_name,
            "Key": {"pk": job_pk(upstream_id), "sk": SPEC_SK},
            "UpdateExpression": "ADD #down :one",
            "ConditionExpression": "attribute_exists(doc)",
            "ExpressionAttributeNames": {"#down": DOWNSTREAM},
            "ExpressionAttributeValues": {":one": 1},
        }
    }


def mark_condition(count: int) -> tuple[str, dict[str, Any]]:
    """The condition (and its values) a spec item Put that carries chain mark ``count`` (as read) adds, so a
    rewrite of an upstream never undoes a count made meanwhile (it is refused as a ``Conflict`` instead)."""
    if count == 0:
        return "(attribute_not_exists(#down) OR #down = :down)", {":down": 0}
    return "#down = :down", {":down": count}


def uncount(table: Any, upstream_id: str) -> bool:
    """Take 1 from job ``upstream_id``'s chain mark while it is live and above 0 (one UpdateItem, 1 write unit).
    False when refused (the upstream is gone, or its count is 0) or failed (logged: the count stays high)."""
    try:
        table.update_item(
            Key={"pk": job_pk(upstream_id), "sk": SPEC_SK},
            UpdateExpression="ADD #down :minus",
            ConditionExpression="attribute_exists(doc) AND #down > :zero",
            ExpressionAttributeNames={"#down": DOWNSTREAM},
            ExpressionAttributeValues={":minus": -1, ":zero": 0},
        )
    except ClientError as error:
        logger.warning(
            "chain mark not lowered; the upstream's runs keep reading their downstream jobs",
            extra={"job_id": upstream_id, "error": error.response.get("Error", {}).get("Code")},
        )
        return False
    return True
