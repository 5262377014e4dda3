"""Small helpers over boto3's DynamoDB requests and errors."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

_deserializer = TypeDeserializer()


def is_condition_failure(error: ClientError) -> bool:
    """True for a refused conditional write (single item or inside a transaction)."""
    code = error.response.get("Error", {}).get("Code")
    return code in ("ConditionalCheckFailedException", "TransactionCanceledException")


def transact_put(
    table_name: str,
    item: dict[str, Any],
    condition: str | None = None,
    *,
    values: dict[str, Any] | None = None,
    names: dict[str, str] | None = None,
    return_old: bool = False,
) -> dict[str, Any]:
    """One ``Put`` of a ``TransactWriteItems`` request: ``item`` into ``table_name``, written only while
    ``condition`` holds (None: always), with ``values``/``names`` for its placeholders; ``return_old``: a refusal's
    cancellation reason carries the stored item (``ALL_OLD``)."""
    put: dict[str, Any] = {"TableName": table_name, "Item": item}
    if condition is not None:
        put["ConditionExpression"] = condition
    if values:
        put["ExpressionAttributeValues"] = values
    if names:
        put["ExpressionAttributeNames"] = names
    if return_old:
        put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Put": put}


def old_item(error: ClientError) -> dict[str, Any] | None:
    """The stored item returned with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``, as plain Python types."""
    raw = error.response.get("Item")
    if not raw:
        return None
    return {k: _deserializer.deserialize(v) for k, v in raw.items()}
