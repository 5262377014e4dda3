"""Deployment settings, validated once at cold start.

Names are the environment variables the CDK stack sets (``infra/``) and local mode passes; logic
receives a ``Settings`` object and never reads ``os.environ`` itself.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from jobsched.domain.quotas import QuotaTable


class Settings(BaseSettings):
    """Every knob of a deployment, with its documented default.

    Table/queue/topic names come from ``jobsched.resources`` definitions' ``env_var``.
    """

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    jobs_table: str = Field(description="JOBS_TABLE")
    runs_table: str = Field(description="RUNS_TABLE")
    control_table: str = Field(description="CONTROL_TABLE")
    idempotency_table: str = Field(description="IDEMPOTENCY_TABLE")
    run_queue_url: str = Field(description="RUN_QUEUE_URL")
    dead_run_queue_url: str = Field(description="DEAD_RUN_QUEUE_URL")
    run_dlq_url: str | None = Field(
        None, description="RUN_DLQ_URL: the run queue's dead-letter queue, drained by the sweeper"
    )
    alerts_topic_arn: str = Field(description="ALERTS_TOPIC_ARN")

    scheduler_partitions: int = Field(1, ge=1, le=256, description="jobs hash into N scheduler partitions")
    due_shards: int = Field(4, ge=1, le=64, description="write shards per due-index bucket")
    due_bucket_s: int = Field(60, ge=1, le=3600, description="width of a due-index time bucket, seconds")
    dispatch_lookahead_ms: int = Field(
        1000,
        ge=0,
        le=1000,
        description="a tick also reads the fires due before the next tick (the next whole second), at most "
        "this far ahead, and its loop ticks again at the earliest one's instant to send it then (0: off, a fire "
        "between two ticks is sent by the next whole-second tick)",
    )
    min_interval_s: float = Field(1.0, ge=0.001, description="smallest allowed gap between fires, seconds")
    retention_days: int = Field(90, ge=1, description="run history kept this long (DynamoDB TTL)")
    lease_ttl_s: float = Field(5.0, gt=0, description="a leader silent this long loses its lease")
    sweep_queued_after_s: int = Field(120, ge=1, description="a run queued this long is re-enqueued")
    backfill_rate_per_s: int = Field(
        10, ge=2, le=1000, description="a backfill's runs are dispatched at most this many per second"
    )
    heartbeat_interval_s: int = Field(30, ge=1, description="worker heartbeat period, seconds")
    heartbeat_stale_s: int = Field(120, ge=1, description="a running run silent this long lost its worker")
    worker_timeout_cap_s: int = Field(840, ge=1, description="largest timeout_s a job may have")
    allow_shell_targets: bool = Field(False, description="run `shell` targets (only where trusted)")
    allow_private_http_targets: bool = Field(False, description="http targets on private/link-local hosts")
    allow_loopback_http_targets: bool = Field(False, description="http targets on 127.0.0.0/8 and ::1")
    api_max_body_bytes: int = Field(256 * 1024, description="larger request bodies get 413")
    local_tokens_file: str | None = Field(None, description="JSON token->owner map (local mode auth)")
    archive_workgroup: str | None = Field(
        None,
        description="ARCHIVE_WORKGROUP: the Athena workgroup the API queries the run archive in (set by the stack "
        "with the archive; unset: windows before retention_days are refused, naming where the history went)",
    )
    archive_database: str | None = Field(
        None, description="ARCHIVE_DATABASE: the Glue database of the archive's table `runs`"
    )
    target_owner_tag_key: str = Field(
        "jobsched:owner",
        min_length=1,
        max_length=128,
        description="resource tag naming the owner whose jobs may use a lambda/sqs target",
    )
    owner_from: str = Field(
        "arn",
        description="how the API maps an IAM caller to its owner: `arn` (the role or user ARN) or `tag:<key>` "
        "(the value of the caller's role or user tag <key>, e.g. `tag:team`; docs/deploy.md)",
    )
    quotas: QuotaTable = Field(
        QuotaTable(),
        description='QUOTAS: quotas per owner, JSON `{"default": {"jobs": 1000, "fires_per_minute": 600, '
        '"triggers_per_minute": 60}, "owners": {"team-a": {"jobs": 5000}}}` (an owner\'s fields override the '
        "default's; a field left out or null: no limit; design §4.11, docs/deploy.md)",
    )
    target_role_arn: str | None = Field(
        None,
        description="TARGET_ROLE_ARN: the role workers assume for a job's owner to reach lambda/sqs targets "
        "(set by the stack; unset in local mode, where the owner tag is checked in code)",
    )

    @field_validator("quotas", mode="before")
    @classmethod
    def _quotas(cls, value: Any) -> Any:
        """JSON text (a CDK context value, local mode's file) is read as the table it holds."""
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("owner_from")
    @classmethod
    def _owner_from(cls, value: str) -> str:
        parse_owner_from(value)
        return value


OWNER_FROM_TAG = "tag:"
"""The prefix of ``Settings.owner_from`` naming the IAM tag whose value is a caller's owner."""

_IAM_TAG_KEY = re.compile(r"[\w\s.:/=+\-@]{1,128}")
"""An IAM tag key (IAM's rule: 1..128 Unicode letters, digits, white space and ``_ . : / = + - @``)."""


def parse_owner_from(value: str) -> str | None:
    """The tag key of an ``owner_from`` value: None for ``"arn"``, ``"team"`` for ``"tag:team"``.

    Raises ValueError (naming the accepted forms) for anything else: another word, an empty key, a key IAM
    would refuse (characters, over 128 characters, the reserved ``aws:`` prefix)."""
    if value == "arn":
        return None
    key = value[len(OWNER_FROM_TAG) :] if value.startswith(OWNER_FROM_TAG) else None
    if key is None or not _IAM_TAG_KEY.fullmatch(key) or key.lower().startswith("aws:"):
        raise ValueError(
            f"{value!r} is neither 'arn' nor 'tag:<key>' with <key> an IAM tag key (1 to 128 letters, digits, "
            "spaces and _.:/=+-@, not starting with aws:)"
        )
    return key


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings from the environment (cached; raises pydantic ValidationError if wiring is wrong)."""
    return Settings()  # type: ignore[call-arg]


MEMORY_RUN_QUEUE_URL = "memory://run-queue"
MEMORY_DEAD_RUN_QUEUE_URL = "memory://dead-run-queue"


def memory_settings(**knobs: Any) -> Settings:
    """Settings for components on the in-memory fakes, which call no AWS service (the tests, the bench's
    simulation): the table, queue and topic names only label them. ``knobs`` (``due_shards=1``, ...) change the
    other settings from their defaults; a bad one raises pydantic ``ValidationError``."""
    return Settings(
        jobs_table="jobs",
        runs_table="runs",
        control_table="control",
        idempotency_table="idempotency",
        run_queue_url=MEMORY_RUN_QUEUE_URL,
        dead_run_queue_url=MEMORY_DEAD_RUN_QUEUE_URL,
        alerts_topic_arn="arn:aws:sns:us-east-1:123456789012:alerts",
        **knobs,
    )
