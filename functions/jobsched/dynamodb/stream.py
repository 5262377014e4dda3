"""The runs table's stream records, read (design §11): which records are TTL deletions of a run, and the
``RunRow`` each one held.

DynamoDB's TTL deletes an expired item as the service itself: its stream record is a ``REMOVE`` whose
``userIdentity`` is ``{"type": "Service", "principalId": "dynamodb.amazonaws.com"}``, with the item in
``dynamodb.OldImage`` (stream view ``OLD_IMAGE``). ``TTL_DELETION_FILTER`` is the Lambda event filter that lets
only those records of run rows (which carry ``status``; a manual trigger's key item does not) invoke the
archive function; :func:`expired_runs` checks the same again, so a record the filter let through by mistake is
ignored, never archived.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from jobsched.dynamodb.layout import run_row
from jobsched.ports.runs import RunRow

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
TTL_DELETION_FILTER: dict[str, Any] = {
    "eventName": ["REMOVE"],
    "userIdentity": {"type": ["Service"], "principalId": [TTL_PRINCIPAL]},
    "dynamodb": {"OldImage": {"status": {"S": [{"exists": True}]}}},
}
"""The Lambda event filter pattern (``FilterCriteria``) of the archive function's stream mapping."""

_DESERIALIZE = TypeDeserializer()


def is_ttl_deletion(record: Mapping[str, Any]) -> bool:
    """True when stream ``record`` is a deletion by DynamoDB's TTL of an item that held a run (``status``)."""
    identity = record.get("userIdentity") or {}
    image = (record.get("dynamodb") or {}).get("OldImage") or {}
    return (
        record.get("eventName") == "REMOVE"
        and identity.get("type") == "Service"
        and identity.get("principalId") == TTL_PRINCIPAL
        and "status" in image
    )


def expired_runs(records: Sequence[Mapping[str, Any]]) -> tuple[list[RunRow], int]:
    """The run rows TTL deleted in stream ``records`` (a Lambda event's ``Records``), and how many records were
    ignored (no TTL deletion of a run). Raises ``KeyError``/``ValueError`` for a run image that is malformed:
    the batch fails and is retried, then reaches the mapping's on-failure destination."""
    rows = []
    for record in records:
        if not is_ttl_deletion(record):
            continue
        image = record["dynamodb"]["OldImage"]
        rows.append(run_row({name: _DESERIALIZE.deserialize(value) for name, value in image.items()}))
    return rows, len(records) - len(rows)
