"""Small helpers over boto3's DynamoDB errors."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

_deserializer = TypeDeserializer()


def is_condition_failure(error: ClientError) -> bool:
    """True for a refused conditional write (single item or inside a transaction)."""
    code = error.response.get("Error", {}).get("Code")
    return code in ("ConditionalCheckFailedException", "TransactionCanceledException")


def old_item(error: ClientError) -> dict[str, Any] | None:
    """The stored item returned with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``, as plain Python types."""
    raw = error.response.get("Item")
    if not raw:
        return None
    return {k: _deserializer.deserialize(v) for k, v in raw.items()}
