"""Batch reads of the jobs table's items by job id, with the retries of what DynamoDB leaves unprocessed."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from jobsched.dynamodb.layout import job_pk, plain
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.jobs import STATE_BATCH

UNPROCESSED_BACKOFF_S = (0.05, 0.1, 0.2)
"""Seconds waited before each retry of the items or keys a batch request returned unprocessed (DynamoDB
throttled part of it: the SDK retries only a request refused whole), exponential as the DynamoDB developer
guide asks of BatchGetItem and BatchWriteItem callers."""

STATES_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8)
"""The tick's read of its due jobs' states (``scheduling_states``) waits longer for keys left unprocessed (1.55 s
in all) before the tick fails: a failed tick throws away its read, and the next starts over."""


def until_processed(
    send: Callable[[dict[str, Any]], dict[str, Any] | None],
    request: dict[str, Any],
    backoff_s: Sequence[float],
) -> None:
    """Send a batch ``request`` (``RequestItems``) with ``send``, which returns what DynamoDB left unprocessed
    (``UnprocessedItems``/``UnprocessedKeys``: part of the batch throttled, which the SDK does not retry), and
    send that again after each of ``backoff_s`` seconds. Raises ``StoreUnavailable`` when some is still
    unprocessed after the last."""
    for wait_s in (*backoff_s, None):
        left = send(request)
        if not left:
            return
        if wait_s is None:
            raise StoreUnavailable("batch items left unprocessed (throttled)")
        request = left
        time.sleep(wait_s)


def batch_get(
    table: Any,
    job_ids: Sequence[str],
    sk: str,
    *,
    consistent: bool = False,
    backoff_s: Sequence[float] = UNPROCESSED_BACKOFF_S,
) -> dict[str, dict[str, Any]]:
    """The items ``sk`` (``SPEC_SK``, ``SCHED_SK``) of ``job_ids`` in ``table`` (a boto3 ``Table``) by job id,
    as plain values, 100 keys a BatchGetItem. Keys DynamoDB returns unprocessed (a throttled partition) are asked
    again after each of ``backoff_s`` (``UNPROCESSED_BACKOFF_S`` by default); raises ``StoreUnavailable`` when
    some are still unprocessed after that (never reported as absent)."""
    found: dict[str, dict[str, Any]] = {}
    ids = list(dict.fromkeys(job_ids))
    for start in range(0, len(ids), STATE_BATCH):
        keys = [{"pk": job_pk(j), "sk": sk} for j in ids[start : start + STATE_BATCH]]

        def get(request: dict[str, Any]) -> dict[str, Any] | None:
            response = table.meta.client.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(table.name, []):
                found[item["job_id"]] = plain(item)
            return response.get("UnprocessedKeys")

        until_processed(get, {table.name: {"Keys": keys, "ConsistentRead": consistent}}, backoff_s)
    return found
