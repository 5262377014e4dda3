"""Deployment configuration of the CDK app: CDK context in, validated settings out.

Two kinds of knobs, both set with ``cdk deploy -c name=value`` (or the ``context`` block of
``cdk.json``), named in snake case exactly like their runtime counterparts:

* Runtime knobs: every field of ``jobsched.settings.Settings`` that is not a resource name
  (``scheduler_partitions``, ``due_shards``, ``min_interval_s``, ``retention_days``,
  ``allow_shell_targets``, ``allow_private_http_targets``, ...). Their defaults and bounds are the
  ones ``Settings`` declares (no second copy here); the stack passes them to every function as
  environment variables named after the field in upper case (``SCHEDULER_PARTITIONS=4``), which
  is what ``Settings`` reads at cold start.
* Infrastructure knobs (``InfraOptions``): worker batch size, maximum concurrency or provisioned
  pollers, log retention, API throttling, alarm thresholds, memory sizes, warm throughput, extra
  (cross-account) targets. Which targets a job may use is the runtime knob ``target_owner_tag_key``
  (see ``infra.functions``).

A preset (``-c scale=large``, :data:`SCALE_PRESETS`) sets a group of both kinds at once; a value given
explicitly wins over the preset's.

Context values given on the command line arrive as strings (``-c allow_shell_targets=true``);
pydantic coerces and validates them, so a bad value fails ``cdk synth`` with the field's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from jobsched import resources
from jobsched.settings import Settings

if TYPE_CHECKING:
    from constructs import Node

RESOURCE_ENV_VARS: tuple[str, ...] = (
    *(t.env_var for t in resources.TABLES),
    *(q.env_var for q in resources.QUEUES),
    resources.ALERTS_TOPIC_ENV,
)
"""Environment variables that carry resource names (set by the stack from the resources it creates)."""

TARGET_ROLE_ENV = "TARGET_ROLE_ARN"
"""The worker's environment variable naming the target role it assumes for a job's owner (set by the stack
on the worker only: ``Settings.target_role_arn``)."""

ARCHIVE_ENV_VARS = ("ARCHIVE_WORKGROUP", "ARCHIVE_DATABASE")
"""The API's environment variables naming the run archive's Athena workgroup and Glue database
(``Settings.archive_workgroup``, ``Settings.archive_database``: set by the stack from the archive it creates)."""

LOCAL_ONLY_SETTINGS = frozenset({"local_tokens_file", "allow_loopback_http_targets"})
"""``Settings`` fields that only mean something in local mode; a deployment never sets them."""

RUNTIME_KNOBS: tuple[str, ...] = tuple(
    name
    for name in Settings.model_fields
    if name.upper() not in (*RESOURCE_ENV_VARS, TARGET_ROLE_ENV, *ARCHIVE_ENV_VARS)
    and name not in LOCAL_ONLY_SETTINGS
)
"""``Settings`` fields a deployment may set through CDK context (defaults from ``Settings``)."""

WORKER_BOOKKEEPING_S = 30
"""Seconds a worker keeps, after a job's timeout, to record the try before its Lambda times out."""

MAX_STACK_PARTITIONS = 180
"""The most scheduler partitions one stack deploys: each adds an EventBridge rule and its Lambda permission, and
a CloudFormation stack holds at most 500 resources (the rest of the stack is about 130, the run archive's about 20
of them; the margin leaves room for a few more resources). ``Settings`` allows more (256) for local mode."""

SCHEDULER_CONCURRENCY_PER_PARTITION = 2
"""Concurrent executions reserved for each scheduler partition (``reserve_scheduler_concurrency``): an invocation
and its successor overlap for a few seconds at each minute's hand-over."""

SQS_MAX_VISIBILITY_S = 43_200
"""The longest visibility timeout SQS accepts (12 hours): each heartbeat sets ``heartbeat_stale_s +
heartbeat_interval_s``."""

_LIST_ITEMS: dict[str, tuple[re.Pattern[str], str]] = {
    "target_function_arns": (
        re.compile(r"arn:[^:]+:lambda:[^:]*:[^:]*:function:[^:/]+(:[^:/]+)?"),
        "Lambda function ARN",
    ),
    "target_queue_arns": (re.compile(r"arn:[^:]+:sqs:[^:]*:[^:]*:[^:/]+"), "SQS queue ARN"),
    "alarm_emails": (re.compile(r"[^@\s,]+@[^@\s,]+\.[^@\s,]+"), "e-mail address (name@domain)"),
}
"""What each item of a list-valued setting must be (matched whole): an extra target a Lambda function ARN
(optionally qualified) or an SQS queue ARN, IAM wildcards allowed (IAM refuses, at deploy time, a policy resource
that is no ARN: a function name, a queue URL); an alarm address one SNS's ``email`` protocol takes (one ``@``, a
dotted domain, no spaces or commas)."""


def _listed(value: Any) -> Any:
    """A list given on the command line (``-c key=...``) arrives as a string: a JSON array, or comma-separated
    items; anything else is left to the field's own validation."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


# CloudWatch Logs accepts only these retention periods (days); 0 means "never expire".
_RETENTION_NAMES: dict[int, str] = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
    0: "INFINITE",
}


ON_DEMAND_WARM_WRITE_UNITS = 4_000
"""Write units a second every on-demand DynamoDB table (and index) takes at once from its creation: its warm
throughput when none is set (DynamoDB developer guide, "Understanding DynamoDB warm throughput"). DynamoDB never
lowers a warm throughput, so an on-demand ``*_warm_write_units`` below it would change nothing or fail the deploy."""

ON_DEMAND_WARM_READ_UNITS = 12_000
"""Read units a second every on-demand table takes at once from its creation (same page)."""

SCALE_KEY = "scale"
"""The context key naming a preset of :data:`SCALE_PRESETS` (``-c scale=large``)."""

SCALE_PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "large": {
        "scheduler_partitions": 16,
        "due_shards": 2,
        "scheduler_memory_mb": 1769,
        "worker_min_pollers": 200,
        "worker_max_pollers": 2000,
        "worker_batch_size": 20,
        "worker_batching_window_s": 1,
        "jobs_warm_write_units": 40_000,
        "jobs_warm_read_units": 40_000,
        "runs_warm_write_units": 20_000,
    },
}
"""Context values a preset sets when the deployment does not set them itself (an explicit ``-c key=value`` wins).

``large`` is the configuration ``bench/rush_fair.py`` models for the seed's scale (10 million jobs, a million due at
00:00:00 UTC): 16 scheduler partitions of 2 due shards, each at 1,769 MB (one vCPU); the worker's SQS event source
in provisioned mode (200 pollers ready, up to 2,000) with batches of 20 gathered for up to 1 s; the jobs table
pre-warmed to 40,000 write and read units a second and the runs table to 20,000 write units (DynamoDB's default
table-level quota is 40,000 each way). The model also assumes the account's concurrent executions raised to 10,000
(a Service Quotas request, not a stack setting). What each costs at rest: docs/deploy.md, "Presets"."""


WARM_THROUGHPUT_KEYS: dict[str, dict[Literal["write", "read"], str]] = {
    resources.JOBS.id: {"write": "jobs_warm_write_units", "read": "jobs_warm_read_units"},
    resources.RUNS.id: {"write": "runs_warm_write_units"},
}
"""The ``InfraOptions`` key that sets each dimension of each pre-warmable table's warm throughput (by
``resources.TableDef.id``)."""


class ConfigError(ValueError):
    """A CDK context value is invalid; the message names the context key."""


class _ContextSettings(Settings):
    """``Settings`` validated from explicit values only: the synth machine's environment never leaks in."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def _capacity_units(default: int, which: str) -> Any:
    """The field of one provisioned-mode capacity bound (``which``: "least read", "most write"...), in capacity
    units, 1..40,000 (DynamoDB's default per-table quota)."""
    return Field(
        default,
        ge=1,
        le=40_000,
        description=f"provisioned mode: {which} capacity units of each table and index",
    )


class InfraOptions(BaseModel):
    """Knobs of the AWS deployment itself (not read by the functions). Context key = field name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    worker_batch_size: int = Field(
        10,
        ge=1,
        le=100,
        description="runs per worker invocation (SQS batch, its runs started concurrently, one thread each; "
        "up to 10 needs no batching window, more needs worker_batching_window_s >= 1)",
    )
    worker_batching_window_s: int = Field(
        0,
        validate_default=True,
        ge=0,
        le=300,
        description="most seconds the SQS event source gathers a batch short of worker_batch_size before it "
        "invokes the worker (MaximumBatchingWindowInSeconds; a lone run then starts up to this late)",
    )
    worker_max_concurrency: int = Field(
        50,
        ge=2,
        le=1000,
        description="most concurrent worker invocations the SQS event source starts (standard mode; "
        "provisioned mode, worker_min_pollers, bounds it by its pollers instead)",
    )
    worker_min_pollers: int | None = Field(
        None,
        ge=2,
        le=200,
        description="SQS event source in provisioned mode: event pollers kept ready at all times (Lambda's "
        "MinimumPollers, 2-200; billed per event poller unit hour); unset: standard mode",
    )
    worker_max_pollers: int = Field(
        200,
        ge=2,
        le=2000,
        description="provisioned mode: the most event pollers the SQS event source scales to (MaximumPollers, "
        "2-2,000; each poller carries up to 10 concurrent invocations)",
    )
    jobs_warm_write_units: int | None = Field(
        None,
        ge=1,
        le=40_000,
        description="warm throughput of the jobs table: write units a second it takes at once (on-demand: at "
        "least the 4,000 a new table takes; provisioned: at most capacity_max_write; its indexes are written by job "
        "edits only and keep DynamoDB's; never lowered once deployed); unset: DynamoDB's own",
    )
    jobs_warm_read_units: int | None = Field(
        None,
        ge=1,
        le=40_000,
        description="warm throughput of the jobs table: read units a second (on-demand: at least the 12,000 a "
        "new table takes; provisioned: at most capacity_max_read); unset: DynamoDB's own",
    )
    runs_warm_write_units: int | None = Field(
        None,
        ge=1,
        le=40_000,
        description="warm throughput of the runs table and its indexes (written at each failed try): write "
        "units a second (on-demand: at least the 4,000 a new table takes; provisioned: at most "
        "capacity_max_write); unset: DynamoDB's own",
    )
    log_retention_days: int = Field(30, description="CloudWatch Logs retention of every log group, days")
    api_throttle_rate_limit: float = Field(50.0, gt=0, description="API Gateway steady-state requests/s")
    api_throttle_burst_limit: int = Field(100, ge=1, description="API Gateway burst, requests")
    reserve_scheduler_concurrency: bool = Field(
        True,
        description="reserve 2 concurrent executions per scheduler partition (so a flood of workers can "
        "never starve the clock); turn off in accounts whose concurrency limit is still 10",
    )
    api_memory_mb: int = Field(512, ge=128, le=10240, description="API function memory, MB")
    scheduler_memory_mb: int = Field(512, ge=128, le=10240, description="scheduler function memory, MB")
    worker_memory_mb: int = Field(512, ge=128, le=10240, description="worker function memory, MB")
    sweeper_memory_mb: int = Field(256, ge=128, le=10240, description="sweeper function memory, MB")
    scheduler_lag_alarm_ms: int = Field(
        10_000, ge=1000, description="alarm when the oldest due run waits longer than this, ms"
    )
    run_queue_age_alarm_s: int = Field(
        1200,
        ge=60,
        description="alarm when the run queue's oldest message is older than this, s (a message stays in the "
        "queue, in flight, while its try runs: above the longest job timeout, the default leaves 5 minutes "
        "of waiting on top of a whole 900 s try)",
    )
    capacity: Literal["on_demand", "provisioned"] = Field(
        "on_demand",
        description="DynamoDB capacity mode of every table and index: on_demand (pay per request, no "
        "planning) or provisioned (read and write capacity with target-tracking auto scaling)",
    )
    capacity_min_read: int = _capacity_units(5, "least read")
    capacity_max_read: int = _capacity_units(4000, "most read")
    capacity_min_write: int = _capacity_units(5, "least write")
    capacity_max_write: int = _capacity_units(4000, "most write")
    capacity_target_utilization: int = Field(
        70,
        ge=20,
        le=90,
        description="provisioned mode: consumed / provisioned capacity, percent, that auto scaling keeps "
        "(Application Auto Scaling accepts 20..90 for DynamoDB)",
    )
    target_function_arns: tuple[str, ...] = Field(
        (),
        description="extra Lambda function ARNs (e.g. in other accounts) the target role may invoke, still "
        "only for the owner their owner tag names",
    )
    target_queue_arns: tuple[str, ...] = Field(
        (),
        description="extra SQS queue ARNs (e.g. in other accounts) the target role may send to, still only "
        "for the owner their owner tag names",
    )
    archive_retention_days: int = Field(
        2555,
        ge=0,
        description="days an archived run (design §11) is kept in the archive bucket, from its upload; 0 = kept "
        "forever (default 7 years)",
    )
    archive_infrequent_access_days: int = Field(
        30,
        ge=30,
        description="days after which an archived object moves to S3 Standard-IA (S3 accepts 30 or more; objects "
        "under 128 KB stay in Standard, S3's default)",
    )
    archive_scan_limit_mb: int = Field(
        10_240,
        ge=10,
        description="the most one Athena query of the archive's workgroup may scan, MB (Athena's floor: 10 MB)",
    )
    alarm_emails: tuple[str, ...] = Field(
        (),
        description="e-mail addresses subscribed to the operations alarms' topic at deploy (each confirms the "
        "subscription from the mail AWS sends); more subscribers (a pager, chat) by hand, docs/deploy.md",
    )

    @field_validator("worker_batching_window_s")
    @classmethod
    def _batching_window(cls, value: int, info: ValidationInfo) -> int:
        batch = info.data.get("worker_batch_size")
        if batch is not None and batch > 10 and value < 1:
            raise ValueError(
                f"a worker_batch_size of {batch} (above 10) needs a batching window of at least 1 s "
                "(Lambda's MaximumBatchingWindowInSeconds)"
            )
        return value

    @field_validator("worker_max_pollers")
    @classmethod
    def _max_pollers(cls, value: int, info: ValidationInfo) -> int:
        least = info.data.get("worker_min_pollers")
        if least is not None and value < least:
            raise ValueError(f"{value} is below worker_min_pollers ({least})")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in _RETENTION_NAMES:
            allowed = ", ".join(str(d) for d in sorted(_RETENTION_NAMES))
            raise ValueError(f"CloudWatch Logs accepts only {allowed} (0 = never expire)")
        return value

    @field_validator(*_LIST_ITEMS, mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        return _listed(value)

    @field_validator(*_LIST_ITEMS)
    @classmethod
    def _items(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        pattern, what = _LIST_ITEMS[str(info.field_name)]
        for item in value:
            if not pattern.fullmatch(item):
                raise ValueError(f"{item!r} is not a {what}")
        return value

    @property
    def provisioned(self) -> bool:
        """True when the tables use provisioned capacity with auto scaling (``capacity=provisioned``)."""
        return self.capacity == "provisioned"

    def warm_throughput(self, table_id: str) -> tuple[int | None, int | None]:
        """``(write units/s, read units/s)`` of warm throughput for the table ``table_id`` (a
        ``resources.TableDef.id``; ``infra.storage.WARM_INDEXES`` says whose indexes get it too); ``None`` for a
        dimension left to DynamoDB (:data:`WARM_THROUGHPUT_KEYS` names the key of each)."""
        keys = WARM_THROUGHPUT_KEYS.get(table_id, {})
        write, read = keys.get("write"), keys.get("read")
        return (getattr(self, write) if write else None), (getattr(self, read) if read else None)

    @property
    def log_retention_name(self) -> str:
        """The ``aws_logs.RetentionDays`` member name of ``log_retention_days``."""
        return _RETENTION_NAMES[self.log_retention_days]


@dataclass(frozen=True)
class DeploymentConfig:
    """Everything the stack needs to know about one deployment.

    ``settings`` holds the runtime knobs (resource-name fields are placeholders: the stack fills
    them from the resources it creates); ``infra`` the infrastructure knobs.
    """

    settings: Settings
    infra: InfraOptions

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> DeploymentConfig:
        """Build from CDK context values (``{"scheduler_partitions": "4", ...}``; unknown keys ignored).

        Raises ``ConfigError`` naming the offending key when a value is invalid.
        """
        explicit = {key: value for key, value in context.items() if value is not None}
        scale = explicit.get(SCALE_KEY, "default")
        if not isinstance(scale, str) or scale not in SCALE_PRESETS:
            raise ConfigError(
                f"context value {SCALE_KEY!r}: {scale!r} is not a preset (one of {', '.join(SCALE_PRESETS)})"
            )
        given = {**SCALE_PRESETS[scale], **explicit}
        knobs = {name: given[name] for name in RUNTIME_KNOBS if name in given}
        infra_values = {name: given[name] for name in InfraOptions.model_fields if name in given}
        placeholders = {name.lower(): f"<{name}>" for name in RESOURCE_ENV_VARS}
        try:
            # Not Settings(...) nor Settings.model_validate: both would also read this machine's
            # environment (a developer's local-mode exports must not leak into a deployment).
            values: dict[str, Any] = {**placeholders, **knobs}
            settings = _ContextSettings(**values)
            infra = InfraOptions(**infra_values)
        except ValidationError as error:
            raise ConfigError(_describe(error)) from error
        # A job's timeout must end before the worker Lambda's own timeout, leaving time to record the
        # failed try (the worker abandons the target call at timeout_s, then writes the run row).
        margin = resources.WORKER_FUNCTION_TIMEOUT_S - WORKER_BOOKKEEPING_S
        if settings.scheduler_partitions > MAX_STACK_PARTITIONS:
            raise ConfigError(
                f"context value 'scheduler_partitions': at most {MAX_STACK_PARTITIONS} in a deployment (each "
                "partition adds an EventBridge rule and a Lambda permission; a CloudFormation stack holds 500 resources)"
            )
        if settings.heartbeat_interval_s >= settings.heartbeat_stale_s:
            raise ConfigError(
                f"context value 'heartbeat_interval_s': {settings.heartbeat_interval_s} must be below "
                f"heartbeat_stale_s ({settings.heartbeat_stale_s}), or a running run looks lost between two beats"
            )
        if settings.heartbeat_stale_s + settings.heartbeat_interval_s > SQS_MAX_VISIBILITY_S:
            raise ConfigError(
                f"context value 'heartbeat_stale_s': heartbeat_stale_s + heartbeat_interval_s is the visibility "
                f"each heartbeat sets, at most {SQS_MAX_VISIBILITY_S} s (SQS's maximum)"
            )
        if settings.worker_timeout_cap_s > margin:
            raise ConfigError(
                f"context value 'worker_timeout_cap_s': at most {margin} (the worker function times out "
                f"after {resources.WORKER_FUNCTION_TIMEOUT_S} s and needs {WORKER_BOOKKEEPING_S} s to record the try)"
            )
        if (
            infra.archive_retention_days
            and infra.archive_retention_days <= infra.archive_infrequent_access_days
        ):
            raise ConfigError(
                f"context value 'archive_retention_days': {infra.archive_retention_days} must be above "
                f"archive_infrequent_access_days ({infra.archive_infrequent_access_days}), or 0 to keep forever"
            )
        if infra.worker_min_pollers is None and "worker_max_pollers" in given:
            raise ConfigError(
                "context value 'worker_max_pollers': only with worker_min_pollers (provisioned mode); standard "
                "mode is bounded by worker_max_concurrency"
            )
        if infra.worker_min_pollers is not None and "worker_max_concurrency" in explicit:
            raise ConfigError(
                "context value 'worker_max_concurrency': not with worker_min_pollers (Lambda's SQS event source "
                "takes a maximum concurrency or provisioned pollers, not both: bound provisioned mode with "
                "worker_max_pollers)"
            )
        for kind in ("read", "write"):
            low, high = getattr(infra, f"capacity_min_{kind}"), getattr(infra, f"capacity_max_{kind}")
            if low > high:
                raise ConfigError(
                    f"context value 'capacity_min_{kind}': {low} is above capacity_max_{kind} ({high})"
                )
        _check_warm_throughput(infra)
        return cls(settings=settings, infra=infra)

    def runtime_environment(self) -> dict[str, str]:
        """The runtime knobs as Lambda environment variables: ``{"SCHEDULER_PARTITIONS": "1", ...}``.

        Booleans are ``true``/``false``, ``quotas`` JSON; every value round-trips through ``Settings``.
        """
        env: dict[str, str] = {}
        for name in RUNTIME_KNOBS:
            value = getattr(self.settings, name)
            if value is None:
                continue
            if isinstance(value, BaseModel):
                env[name.upper()] = value.model_dump_json(exclude_defaults=True)
            else:
                env[name.upper()] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return env


def _check_warm_throughput(infra: InfraOptions) -> None:
    """Refuse a warm throughput that cannot take effect. On-demand: one below what every on-demand table already
    has (:data:`ON_DEMAND_WARM_WRITE_UNITS`, :data:`ON_DEMAND_WARM_READ_UNITS`; DynamoDB never lowers a warm
    throughput: an update asking for less fails). Provisioned: one above ``capacity_max_<kind>``, which auto
    scaling never passes (pre-warmed partitions the table may never use, billed all the same).

    Raises ``ConfigError`` naming the key."""
    for key, kind in ((k, d) for keys in WARM_THROUGHPUT_KEYS.values() for d, k in keys.items()):
        units = getattr(infra, key)
        if units is None:
            continue
        if infra.provisioned:
            most = getattr(infra, f"capacity_max_{kind}")
            if units > most:
                raise ConfigError(
                    f"context value {key!r}: {units} is above capacity_max_{kind} ({most}), the most {kind} "
                    "capacity auto scaling gives a provisioned table: raise capacity_max_"
                    f"{kind} or lower {key}"
                )
        else:
            least = ON_DEMAND_WARM_WRITE_UNITS if kind == "write" else ON_DEMAND_WARM_READ_UNITS
            if units < least:
                raise ConfigError(
                    f"context value {key!r}: {units} is below the {least} {kind} units a second every on-demand "
                    "table already takes (DynamoDB never lowers a warm throughput): leave it unset or raise it"
                )


def context_keys() -> tuple[str, ...]:
    """Every context key this app reads besides CDK's own: runtime knobs, then infrastructure knobs."""
    return (SCALE_KEY, *RUNTIME_KNOBS, *InfraOptions.model_fields)


def context_values(node: Node) -> dict[str, Any]:
    """The values of ``context_keys()`` set on ``node`` (``cdk.json``, ``-c key=value``), unset ones left out."""
    values = {key: node.try_get_context(key) for key in context_keys()}
    return {key: value for key, value in values.items() if value is not None}


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        key = ".".join(str(p) for p in item["loc"])
        parts.append(f"context value {key!r}: {item['msg']}")
    return "; ".join(parts)
