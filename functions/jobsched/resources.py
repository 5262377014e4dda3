"""The one definition of every table, index, queue and topic.

Both the CDK stack (``infra/``) and the local/test set-up (``provision``) build their resources
from these objects, so the key schema exists exactly once. Environment variable names are the
ones ``jobsched.settings.Settings`` reads and the CDK stack sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

KeyType = Literal["S", "N"]
Projection = Literal["ALL", "KEYS_ONLY", "INCLUDE"]


@dataclass(frozen=True)
class Key:
    """One key attribute: its name and DynamoDB scalar type (S string, N number)."""

    name: str
    type: KeyType


@dataclass(frozen=True)
class Index:
    """A global secondary index. ``non_key`` lists the attributes of an INCLUDE projection."""

    name: str
    partition: Key
    sort: Key | None
    projection: Projection
    non_key: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableDef:
    """A DynamoDB table: keys, indexes, TTL attribute, and the env var that carries its name."""

    id: str
    env_var: str
    partition: Key
    sort: Key | None = None
    indexes: tuple[Index, ...] = ()
    ttl_attribute: str | None = None
    point_in_time_recovery: bool = False
    stream_view: Literal["OLD_IMAGE"] | None = None
    """The table's DynamoDB stream, if it has one (deployed by the stack only; local mode reads no stream)."""

    def create_table_kwargs(self, table_name: str) -> dict[str, Any]:
        """Arguments for boto3 ``create_table`` (on-demand billing)."""
        keys = [self.partition, *([self.sort] if self.sort else [])]
        attributes = {k.name: k.type for k in keys}
        for index in self.indexes:
            for k in (index.partition, index.sort):
                if k:
                    attributes[k.name] = k.type
        kwargs: dict[str, Any] = {
            "TableName": table_name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": _key_schema(self.partition, self.sort),
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in attributes.items()],
        }
        if self.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": i.name,
                    "KeySchema": _key_schema(i.partition, i.sort),
                    "Projection": {
                        "ProjectionType": i.projection,
                        **({"NonKeyAttributes": list(i.non_key)} if i.projection == "INCLUDE" else {}),
                    },
                }
                for i in self.indexes
            ]
        return kwargs


def _key_schema(partition: Key, sort: Key | None) -> list[dict[str, str]]:
    schema = [{"AttributeName": partition.name, "KeyType": "HASH"}]
    if sort:
        schema.append({"AttributeName": sort.name, "KeyType": "RANGE"})
    return schema


# Attributes the scheduler's poll needs from a job's scheduling item (the due index projects only these).
DUE_PROJECTION = (
    "job_id",
    "next_run_at",
    "schedule",
    "timezone",
    "anchor_at",
    "end_at",
    "missed",
    "catch_up_window_s",
    "misfire_grace_s",
    "jitter_offset_ms",
    "term",
)

JOBS = TableDef(
    id="Jobs",
    env_var="JOBS_TABLE",
    partition=Key("pk", "S"),
    sort=Key("sk", "S"),
    indexes=(
        # The due index (design §4.1): partition "p<partition>#b<bucket>#s<shard>", sort the dispatch
        # instant (next_run_at + jitter offset, epoch ms). Sparse: only active scheduling items carry it.
        Index("due", Key("due_pk", "S"), Key("due_at", "N"), "INCLUDE", DUE_PROJECTION),
        # A team's jobs by name: only job spec items carry "owner" (a deleted job's tombstone does not).
        Index("by_owner", Key("owner", "S"), Key("name", "S"), "ALL"),
        # A job's downstream jobs by name (design §2.1): only spec items of jobs with ``after`` carry
        # "after_job" (the upstream's id), so jobs without a chain cost it nothing.
        Index("by_upstream", Key("after_job", "S"), Key("name", "S"), "ALL"),
    ),
    # Deleted jobs' tombstones, timer items and audit events carry it: they go once the job's run history has
    # expired (timers once passed); and the owners' manual-request counters (``dynamodb.quotas``: a minute after
    # their window).
    ttl_attribute="expires_at",
    point_in_time_recovery=True,
    # The archive function reads the TTL deletions of audit events from it (design §11).
    stream_view="OLD_IMAGE",
)

RUNS = TableDef(
    id="Runs",
    env_var="RUNS_TABLE",
    partition=Key("job_id", "S"),
    sort=Key("scheduled_for", "N"),
    indexes=(
        # The sweeper index: sparse, only runs not yet finished carry "sweep_pk"; "sweep_at" is when the
        # sweeper should next look at the run. Keys only, so claims and heartbeats cost no index write.
        Index("sweep", Key("sweep_pk", "S"), Key("sweep_at", "N"), "KEYS_ONLY"),
        # An owner's failed runs across their jobs (design §3.4): sparse, only rows in a failure status
        # (retrying, dead, skipped) whose owner is known carry "fail_owner". Nothing on the happy path writes it.
        Index("failures", Key("fail_owner", "S"), Key("scheduled_for", "N"), "ALL"),
    ),
    ttl_attribute="expires_at",
    # Feeds the archive function (design §11): TTL deletions, filtered at the event source, carry the row.
    stream_view="OLD_IMAGE",
)

CONTROL = TableDef(
    id="Control",
    env_var="CONTROL_TABLE",
    partition=Key("pk", "S"),
)
"""Leader leases (``lease#<partition>``) and scheduler watermarks (``watermark#<partition>``)."""

IDEMPOTENCY = TableDef(
    id="Idempotency",
    env_var="IDEMPOTENCY_TABLE",
    partition=Key("id", "S"),
    ttl_attribute="expiration",
)
"""Idempotency-Key records, in the layout of Powertools' DynamoDBPersistenceLayer."""

TABLES = (JOBS, RUNS, CONTROL, IDEMPOTENCY)


@dataclass(frozen=True)
class QueueDef:
    """An SQS queue; ``dead_letter`` names the queue that receives messages after ``max_receive_count``."""

    id: str
    env_var: str
    visibility_timeout_s: int = 30
    retention_s: int = 4 * 86400
    dead_letter: str | None = None
    max_receive_count: int = 0
    attributes: dict[str, str] = field(default_factory=dict)

    def create_queue_attributes(self) -> dict[str, str]:
        """Attributes for boto3 ``create_queue`` (the redrive policy is added by ``provision``)."""
        return {
            "VisibilityTimeout": str(self.visibility_timeout_s),
            "MessageRetentionPeriod": str(self.retention_s),
            **self.attributes,
        }


# Worker function timeout (s). The run queue's visibility timeout is 6x it, as AWS advises for SQS event
# sources; workers heartbeat the visibility of long runs, and the sweeper recovers lost workers after 2 min.
WORKER_FUNCTION_TIMEOUT_S = 900
RUN_QUEUE_DLQ = QueueDef(id="RunDlq", env_var="RUN_DLQ_URL", retention_s=14 * 86400)
RUN_QUEUE = QueueDef(
    id="RunQueue",
    env_var="RUN_QUEUE_URL",
    visibility_timeout_s=6 * WORKER_FUNCTION_TIMEOUT_S,
    dead_letter=RUN_QUEUE_DLQ.id,
    max_receive_count=5,
)
DEAD_RUN_QUEUE = QueueDef(id="DeadRunQueue", env_var="DEAD_RUN_QUEUE_URL", retention_s=14 * 86400)
QUEUES = (RUN_QUEUE_DLQ, RUN_QUEUE, DEAD_RUN_QUEUE)

ALERTS_TOPIC_ENV = "ALERTS_TOPIC_ARN"
ALERTS_TOPIC_ID = "Alerts"
