"""The owners' quota counters on the jobs table (``jobsched.ports.quotas``, design §4.11).

Items (``docs/protocol.md``, Keys):

- ``quota#<owner>`` / ``usage``: ``jobs`` and ``fire_rate`` (micro-fires per minute), added to by an ``Update``
  in the transaction of each job create, re-timing edit and delete (``usage_update``);
- ``quota#<owner>`` / ``requests#<window_ms>``: ``count`` of the owner's manual requests (triggers, backfills)
  in the minute starting at ``window_ms`` (epoch ms), with ``expires_at`` (epoch s, the table's TTL attribute) a
  minute after the window ends. One conditional ``UpdateItem`` per request.

Neither carries ``owner`` nor ``due_pk``: no index holds them. Nothing on the run path reads or writes them.

A job's spec item carries the rate it is counted with (``layout.QUOTA_RATE``), written with the usage change; a
rewrite or a delete lands only while it still holds the rate read (``quota_condition``). The recount of spec
items without it (``QuotaRecountTable``, ``jobsched.domain.quota_recount``) keeps its progress on
``layout#quota`` / ``recount`` (:data:`RECOUNT_KEY`).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from botocore.exceptions import ClientError

from jobsched.clock import to_ms
from jobsched.domain.quotas import MICRO, QuotaExceeded, check_usage, count_change
from jobsched.dynamodb.dynamo import is_condition_failure
from jobsched.dynamodb.errors import unavailable_on_failure
from jobsched.dynamodb.layout import QUOTA_RATE, SPEC_SK, job_from_items, job_pk, plain
from jobsched.models import Job
from jobsched.ports.errors import Conflict
from jobsched.ports.quotas import OwnerUsage, QuotaCounters, RecountProgress, UsageChange

logger = logging.getLogger(__name__)

USAGE_SK = "usage"

RECOUNT_KEY = {"pk": "layout#quota", "sk": "recount"}
"""The jobs table's item holding the recount's progress (``cursor``: JSON of the ``by_owner`` Scan's last key,
``clean``, ``done``, ``began_ms``, ``round_ms``: ``ports.quotas.RecountProgress``)."""


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


UNCOUNTED = (
    f"(attribute_not_exists({QUOTA_RATE}) OR NOT attribute_type({QUOTA_RATE}, :number_type)"
    f" OR {QUOTA_RATE} < :no_count)"
)
"""The condition that a spec item holds no count: no ``layout.QUOTA_RATE``, or one that is not a number of at least
0 (``domain.quotas.stored_count`` reads it as not counted), with :data:`UNCOUNTED_VALUES`."""
UNCOUNTED_VALUES: dict[str, Any] = {":number_type": "N", ":no_count": 0}


def quota_condition(rate: int | None) -> tuple[str, dict[str, Any]]:
    """The condition (and its values) that a spec item still holds ``rate`` as its ``layout.QUOTA_RATE`` (None:
    none, the job uncounted: :data:`UNCOUNTED`): what a rewrite or a delete of the job as read adds, so that it
    never undoes a count made meanwhile nor takes away what was not counted."""
    if rate is None:
        return UNCOUNTED, dict(UNCOUNTED_VALUES)
    return f"{QUOTA_RATE} = :quota_rate", {":quota_rate": rate}


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


class QuotaRecountTable:
    """``QuotaRecount`` on the jobs table (a boto3 ``Table``): spec items read from the ``by_owner`` index (live
    spec items only, eventually consistent: a job changed a moment ago fails its count's condition and is
    counted in the next round), each counted by a transaction of 2 updates (4 write units)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @unavailable_on_failure
    def recount_progress(self) -> RecountProgress:
        """The progress item, read strongly consistent (the start when absent)."""
        item = self.table.get_item(Key=RECOUNT_KEY, ConsistentRead=True).get("Item") or {}
        cursor, began, round_ = item.get("cursor"), item.get("began_ms"), item.get("round_ms")
        return RecountProgress(
            str(cursor) if cursor else None,
            bool(item.get("clean", True)),
            bool(item.get("done", False)),
            int(began) if began is not None else None,
            int(round_) if round_ is not None else None,
        )

    @unavailable_on_failure
    def save_recount_progress(self, progress: RecountProgress) -> None:
        """Put the progress item."""
        kept = {"cursor": progress.cursor, "began_ms": progress.began_ms, "round_ms": progress.round_ms}
        present = {name: value for name, value in kept.items() if value is not None}
        self.table.put_item(Item={**RECOUNT_KEY, **present, "clean": progress.clean, "done": progress.done})

    @unavailable_on_failure
    def uncounted_jobs(self, cursor: str | None, limit: int) -> tuple[list[Job], str | None]:
        """One Scan page of ``limit`` items of the ``by_owner`` index after ``cursor``, filtered to those without
        a count (:data:`UNCOUNTED`); a spec item this code cannot read is logged and left out (uncounted: its delete
        takes nothing away)."""
        kwargs: dict[str, Any] = {
            "IndexName": "by_owner",
            "Limit": limit,
            "FilterExpression": UNCOUNTED,
            "ExpressionAttributeValues": UNCOUNTED_VALUES,
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = json.loads(cursor)
        page = self.table.scan(**kwargs)
        last = page.get("LastEvaluatedKey")
        jobs = []
        for item in page["Items"]:
            try:
                jobs.append(job_from_items(plain(item), None))
            except (ValueError, KeyError):  # a spec this code cannot read (a newer version's): left uncounted
                logger.warning("job spec not readable; not counted", extra={"job_id": item.get("job_id")})
        return jobs, (json.dumps(plain(last), sort_keys=True) if last else None)

    @unavailable_on_failure
    def count_job(self, job: Job, rate: int) -> bool:
        """One transaction: set the spec item's ``layout.QUOTA_RATE`` while it is live, without one and at
        ``job``'s ``updated_at``, and add the count to the owner's usage item (``usage_update``)."""
        spec = {
            "TableName": self.table.name,
            "Key": {"pk": job_pk(job.id), "sk": SPEC_SK},
            "UpdateExpression": f"SET {QUOTA_RATE} = :rate",
            "ConditionExpression": f"attribute_exists(doc) AND {UNCOUNTED} AND updated_at = :updated",
            "ExpressionAttributeValues": {
                ":rate": rate,
                ":updated": to_ms(job.updated_at),
                **UNCOUNTED_VALUES,
            },
        }
        usage = usage_update(self.table.name, count_change(job.owner, None, rate))
        try:
            self.table.meta.client.transact_write_items(TransactItems=[{"Update": spec}, *usage])
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True
