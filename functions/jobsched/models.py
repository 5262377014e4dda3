"""The domain's pydantic models: a job and its settings (targets, retry and alert policies), a run and its
tries, the fires to come, and the enums of their statuses and kinds, with the validation of each field.

Field names are the public API contract of design §2; the API's request and response bodies built on them are
in ``jobsched.api.schemas``. Instants in the API are ISO 8601 strings in UTC (``2026-12-04T18:00:00Z``);
storage keeps them as epoch milliseconds (``jobsched.clock.from_ms``/``to_ms``). Limits are those of design §2
unless said otherwise.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from jobsched.clock import from_ms
from jobsched.http_rules import (
    ALWAYS_SECRET_HEADERS,
    HEADER_NAME,
    HEADER_VALUE,
    credential_parts,
    url_secrets,
)
from jobsched.http_rules import url_problem as _url_problem  # the name HttpTarget's API description cites
from jobsched.labels import LABELS_DESCRIPTION, check_labels, labels_schema
from jobsched.schedule.engine import ceil_to_ms

MAX_INPUT_BYTES = 64 * 1024
MAX_INPUT_DEPTH = 128
"""Deepest nesting of arrays/objects in ``input`` (serde_json's default recursion limit; deeper JSON is
refused by many of the parsers targets use, and past ~250 levels pydantic cannot serialize the job)."""
MAX_ERROR_CHARS = 2000
DEFAULT_CANCEL_GRACE_S = 5
MAX_CANCEL_GRACE_S = 300
"""A job's ``cancel_grace_s``: its default and upper bound (s); 0 sends SIGKILL right after SIGTERM."""
INSTANT_YEARS = (1000, 8999)
"""The years (as written, before the offset) ``start_at`` and ``end_at`` may have: with a margin from
Python's 1-9999, so that any instant can be localized to any zone without leaving the datetime range."""


class RunStatus(StrEnum):
    """Lifecycle of a run (design §2). Terminal: succeeded, dead, skipped, cancelled (an operator stopped it:
    ``POST /jobs/{id}/runs/{run_id}/cancel``, design §5.8)."""

    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.SKIPPED, RunStatus.CANCELLED)


class MissedPolicy(StrEnum):
    """What the scheduler does with fires missed during downtime (design §4.4)."""

    CATCH_UP = "catch_up"
    SKIP = "skip"


class OverlapPolicy(StrEnum):
    """Whether a run may start while another run of the same job is running (design §5.4): ``allow``: yes;
        ``skip``: no, the fire is recorded ``skipped``; ``buffer_one``: no, the first such fire waits and runs once the
        running try ends, the later ones while it waits are recorded ``skipped``; ``replace``: no, the fire cancels
    the running try's run (``cancelled``) and runs once that try has stopped."""

    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    REPLACE = "replace"

    @property
    def locks(self) -> bool:
        """Whether a try of a job with this policy takes the job's overlap lock."""
        return self is not OverlapPolicy.ALLOW

    @property
    def waits(self) -> bool:
        """Whether a fire that finds the job's overlap lock held waits for it (``buffer_one``, ``replace``)
        rather than being recorded ``skipped``."""
        return self in (OverlapPolicy.BUFFER_ONE, OverlapPolicy.REPLACE)

    @property
    def replaces(self) -> bool:
        """Whether a fire that finds the job's overlap lock held cancels the holder's run (``replace``) and is never
        recorded ``skipped`` for overlap."""
        return self is OverlapPolicy.REPLACE


class Priority(StrEnum):
    """How a job's due fires are ordered among those due at the same time (design §4.10): ``high`` before
    ``normal`` before ``low``, in every tick and across a carried backlog."""

    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """The order of dispatch: 0 for ``high``, 1 for ``normal``, 2 for ``low`` (lower goes first)."""
        return _PRIORITY_RANKS[self]


_PRIORITY_RANKS = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}


class RunKind(StrEnum):
    """Why a run exists: a fire of the schedule, a manual ``POST /jobs/{id}/trigger``, a past fire run by
    ``POST /jobs/{id}/backfill``, or the end of a run of the job's upstream (``after``, design §2.1)."""

    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"
    CHAINED = "chained"


class ChainOn(StrEnum):
    """Which ends of an upstream run make a run of the job that names it in ``after`` (design §2.1): ``any`` is
    either end (a skipped fire never ran, so it makes none)."""

    SUCCEEDED = "succeeded"
    DEAD = "dead"
    ANY = "any"


class JobEventKind(StrEnum):
    """What a job's audit event records (``GET /jobs/{id}/events``, design §3.2)."""

    CREATED = "created"
    UPDATED = "updated"
    PAUSED = "paused"
    RESUMED = "resumed"
    TRIGGERED = "triggered"
    RUN_RETRIED = "run_retried"
    RUN_CANCELLED = "run_cancelled"
    BACKFILLED = "backfilled"
    AUTO_PAUSED = "auto_paused"
    DELETED = "deleted"


class StrictModel(BaseModel):
    """A model that refuses fields it does not declare (``extra="forbid"``): a misspelt field is an error naming
    it, never silently dropped."""

    model_config = ConfigDict(extra="forbid")


def _instant_text(value: Any, info: ValidationInfo) -> Any:
    """An instant is an ISO 8601 string (or, from Python, a datetime): never a number pydantic would read as
    epoch seconds (or milliseconds, past 2e10), which the API's schema (``format: date-time``) does not offer,
    whether a JSON number or a number in a string (``"1772445600"``, as a query parameter always is)."""
    if isinstance(value, int | float) or (isinstance(value, str) and _is_number(value)):
        raise PydanticCustomError(
            "datetime_type",
            "{field} must be an ISO 8601 date-time string with an offset, e.g. 2026-12-04T18:00:00Z",
            {"field": info.field_name or "the instant"},
        )
    return value


def _is_number(text: str) -> bool:
    """Whether ``text`` reads as a number (``float`` takes it: ``1772445600``, ``-1``, ``1.5e9``)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _checked_map(
    value: dict[str, str], names: re.Pattern[str], bad_name: str, texts: re.Pattern[str], bad_text: str
) -> dict[str, str]:
    """``value`` when every key matches ``names`` and every value ``texts`` (whole-string matches). Raises
    ValueError with ``bad_name`` or ``bad_text`` (``str.format`` templates of ``{name!r}``, the key) for the first
    key or value that does not."""
    for name, text in value.items():
        if not names.fullmatch(name):
            raise ValueError(bad_name.format(name=name))
        if not texts.fullmatch(text):
            raise ValueError(bad_text.format(name=name))
    return value


def _whole_number(value: Any) -> Any:
    """A JSON number without a fractional part is an integer, as JSON Schema's ``integer`` says: ``30.0`` is 30."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Count = Annotated[int, BeforeValidator(_whole_number), Strict()]
"""A JSON integer as the schema says (``30`` or ``30.0``): no ``"30"``, ``30.5`` or ``true`` coerced into one."""
Flag = Annotated[bool, Strict()]
"""A JSON boolean as the schema says: no ``0``, ``"yes"`` or ``"true"`` coerced into one."""


def whole_ms(value: datetime | None, info: ValidationInfo) -> datetime | None:
    """Instants are whole milliseconds from parsing on: sub-millisecond digits round up (never early), except on
    ``end_at``, a last allowed instant, where they round down (never a fire after the end the owner wrote)."""
    if value is None:
        return None
    if info.field_name == "end_at":
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    try:
        return ceil_to_ms(value)
    except OverflowError:
        raise ValueError(
            f"{info.field_name} is past the last instant jobsched supports (year 9999)"
        ) from None


Instant = Annotated[datetime, BeforeValidator(_instant_text)]
"""An owner-set instant: ISO 8601 text (naive ones are refused by the models that take them)."""


_BAD_HEADER_NAME = (
    "header name {name!r} is not a valid HTTP field name (RFC 9110 token: letters, digits and "
    "!#$%&'*+-.^_`|~)"
)
_BAD_HEADER_VALUE = (
    "the value of header {name!r} must be printable ASCII: no CR, LF or other control characters, no leading or "
    "trailing spaces (RFC 9110 field value)"
)


class HttpTarget(StrictModel):
    """Request ``method url`` with body ``input``; 2xx is success (design §5.5).

    ``url`` must be one the worker can request (see ``_url_problem``); ``headers`` names are RFC 9110 tokens
    and values printable ASCII without CR/LF, so a header can never break or inject into the request.
    """

    type: Literal["http"] = "http"
    url: str = Field(min_length=1, max_length=2048, description="http:// or https:// URL")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="extra request headers: names are RFC 9110 tokens, values printable ASCII",
    )
    secret_headers: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="names of `headers` whose values are secret (any case): a run's recorded output and "
        "error never show them (`Authorization`, `Proxy-Authorization` and `Cookie` always count as secret)",
    )
    secret_path: Flag = Field(
        False,
        description="the URL's path is a secret (a webhook URL such as `https://hooks.example.com/T0/B0/XyZ`): "
        "errors, logs and alerts show the URL as `scheme://host/[redacted]`, and the path and its segments "
        "are redacted from a run's output and error. The URL's credentials and its query values of 8 or "
        "more characters are always secret",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        problem = _url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        return _checked_map(value, HEADER_NAME, _BAD_HEADER_NAME, HEADER_VALUE, _BAD_HEADER_VALUE)

    @field_validator("secret_headers")
    @classmethod
    def _secret_headers(cls, value: list[str], info: ValidationInfo) -> list[str]:
        given = {name.lower() for name in info.data.get("headers", {})}
        for name in value:
            if name.lower() not in given:
                raise ValueError(f"secret header {name!r} is not one of the target's headers")
        return value

    def secret_values(self) -> list[str]:
        """What a run's output, error, logs and alerts must never show (``jobsched.domain.redaction``): the
        values of the secret headers (``secret_headers`` and ``ALWAYS_SECRET_HEADERS``) with the parts a server
        may echo alone (``credential_parts``), and the URL's secrets (``url_secrets``); longest first (so a
        value containing another is redacted whole)."""
        secret = {name.lower() for name in self.secret_headers} | ALWAYS_SECRET_HEADERS
        values: set[str] = set()
        for name, text in self.headers.items():
            if name.lower() in secret and text:
                values.add(text)
                values.update(credential_parts(name, text))
        values.update(url_secrets(self.url, secret_path=self.secret_path))
        return sorted(values, key=len, reverse=True)


class LambdaTarget(StrictModel):
    """Synchronous invoke of a Lambda function with the run envelope; FunctionError is failure."""

    type: Literal["lambda"] = "lambda"
    function: str = Field(min_length=1, max_length=256, description="function name or ARN")


class SqsTarget(StrictModel):
    """Send the run envelope to a queue; FIFO queues get MessageDeduplicationId = run id."""

    type: Literal["sqs"] = "sqs"
    queue_url: str = Field(min_length=1, max_length=2048)


class CommandTarget(StrictModel):
    """A Python callable registered with the worker by name (``echo``, ``sleep``, ``fail`` ship)."""

    type: Literal["command"] = "command"
    name: str = Field(min_length=1, max_length=128)


CONTROL_CHARS = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
"""A regular-expression character class body (the same in Python and in JSON Schema's ECMA-262 patterns): C0 and
C1 control characters and DEL (CR, LF, tab, NUL, NEL U+0085, CSI U+009B, ...), and the LINE and PARAGRAPH
SEPARATORs: what breaks a line of text or drives a terminal (Unicode category Cc, and the line breaks of
``str.splitlines``)."""
SPACE_CHARS = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""A character class body: the characters ``str.isspace`` calls whitespace (what ``str.strip`` removes), written
out so that a JSON Schema pattern means the same (ECMA-262's ``\\s`` is another set)."""
SHELL_PATTERN = rf"^/[^\x00{SPACE_CHARS}]+$"
"""A shell target's ``shell``: an absolute path without NUL or whitespace; its validation and its OpenAPI
``pattern``."""

ENV_NAME_PATTERN = r"^(?!JOBSCHED_)[A-Za-z_][A-Za-z0-9_]*$"
"""A shell target's environment variable name (``JOBSCHED_*`` are reserved for the run's own); its validation
and its OpenAPI ``propertyNames`` pattern."""
ENV_NAME = re.compile(ENV_NAME_PATTERN)
ENV_VALUE_PATTERN = r"^[^\x00]{0,8192}$"
"""A shell target's environment variable value: at most 8192 characters, no NUL; its validation and its OpenAPI
pattern."""
_ENV_VALUE = re.compile(ENV_VALUE_PATTERN)
_BAD_ENV_NAME = (
    "env name {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*; JOBSCHED_* are set by the worker)"
)
_BAD_ENV_VALUE = "the value of env {name!r} must have no NUL character and at most 8192 characters"
MAX_SHELL_ENV = 64


class ShellTarget(StrictModel):
    """A shell command; only where the deployment enables shell targets (local mode does).

    ``env``: variables set for the command on top of the worker's environment (crontab settings such as
    ``PATH`` land here); ``shell``: the absolute path of the shell that runs ``command`` with ``-c``
    (``/bin/sh`` when absent; a crontab's ``SHELL``).
    """

    type: Literal["shell"] = "shell"
    command: str = Field(min_length=1, max_length=8192)
    env: dict[str, str] = Field(
        default_factory=dict,
        exclude_if=lambda value: not value,  # absent when empty, so existing jobs read back unchanged
        max_length=MAX_SHELL_ENV,
        description="environment variables for the command: names [A-Za-z_][A-Za-z0-9_]* (not JOBSCHED_*), "
        "values without NUL",
        json_schema_extra={
            "propertyNames": {"pattern": ENV_NAME_PATTERN},
            "additionalProperties": {"type": "string", "pattern": ENV_VALUE_PATTERN},
        },
    )
    shell: str | None = Field(
        None,
        exclude_if=lambda value: value is None,
        min_length=2,
        max_length=256,
        description="absolute path without whitespace, e.g. /bin/bash",
        json_schema_extra={"pattern": SHELL_PATTERN},
    )

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return _checked_map(value, ENV_NAME, _BAD_ENV_NAME, _ENV_VALUE, _BAD_ENV_VALUE)

    @field_validator("shell")
    @classmethod
    def _shell(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(SHELL_PATTERN, value):
            raise ValueError(f"shell {value!r} must be an absolute path without spaces, such as /bin/bash")
        return value


Target = Annotated[
    HttpTarget | LambdaTarget | SqsTarget | CommandTarget | ShellTarget, Field(discriminator="type")
]


class RetryPolicy(StrictModel):
    """Retries of a failed try: delay ``min(backoff_s * 2**(attempt-1), max_backoff_s)`` seconds."""

    max_attempts: Count = Field(4, ge=1, le=10)
    backoff_s: Count = Field(60, ge=0, le=900)
    max_backoff_s: Count = Field(900, ge=0, le=900, description="SQS delays cap at 900 s")

    def delay_s(self, attempt: int) -> int:
        """Delay before try ``attempt + 1`` after try ``attempt`` (1-based) failed, in seconds."""
        return int(min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s))


_BOUND_KEYWORDS = (
    ("ge", "minimum"),
    ("le", "maximum"),
    ("gt", "exclusiveMinimum"),
    ("lt", "exclusiveMaximum"),
)


def optional_bounds(schema: dict[str, Any]) -> None:
    """Bounds of optional ``Count`` fields under their JSON Schema names (pydantic leaves them under their Python
    names when a validator wraps the type), in every branch of each property."""
    for prop in schema.get("properties", {}).values():
        for branch in prop.get("anyOf", [prop]):
            for python, json_schema in _BOUND_KEYWORDS:
                if python in branch:
                    branch[json_schema] = branch.pop(python)


class AlertPolicy(StrictModel):
    """When a job's owner is alerted on the alerts topic (design §5.6), beyond the run history itself.

    ``on_dead``: a run out of attempts; ``on_skipped``: fires recorded skipped (missed, or overlap);
    ``on_cancelled``: a run cancelled by an operator (``POST .../cancel``); ``late_after_s``: a
    run whose first try starts later than this after its ``scheduled_for``; ``after_consecutive_failures``: the
    N-th dead run in a row (once per streak); ``pause_after_consecutive_dead``: after N dead runs in a row the
    job pauses itself (``paused_by`` ``jobsched``, with the reason) and one alert says so.
    """

    model_config = ConfigDict(json_schema_extra=lambda schema: optional_bounds(schema))

    on_dead: Flag = True
    on_skipped: Flag = False
    on_cancelled: Flag = False
    late_after_s: Count | None = Field(None, ge=1, le=30 * 86400)
    after_consecutive_failures: Count | None = Field(None, ge=1, le=100)
    pause_after_consecutive_dead: Count | None = Field(None, ge=1, le=100)


def check_input(value: Any) -> Any:
    """``input`` must be plain JSON a target can receive unchanged, at most 64 KiB (design §2).

    Refuses NaN and Infinity (``NaN``, ``Infinity``, ``1e999`` parse to such floats in Python but are not
    JSON: they would reach targets as null), strings (values or keys) holding a lone surrogate (``"\\ud800"``
    is valid JSON but no UTF-8 text: a store or a target could not encode it), and arrays/objects nested
    deeper than ``MAX_INPUT_DEPTH`` (walked without recursion). Raises ValueError; returns ``value`` unchanged.
    """
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(
                "input holds NaN or Infinity, which JSON cannot carry (targets would receive null); "
                "send a finite number, a string or null"
            )
        if isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:
                raise ValueError(
                    "input holds a lone surrogate (a \\ud800-\\udfff escape outside a pair), which is not "
                    "Unicode text; send the character's pair or its text"
                ) from None
        if isinstance(item, dict | list | tuple):
            if depth > MAX_INPUT_DEPTH:
                raise ValueError(f"input nests arrays and objects more than {MAX_INPUT_DEPTH} levels deep")
            children = [*item, *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    size = len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode())
    if size > MAX_INPUT_BYTES:
        raise ValueError(f"input is {size} bytes as JSON; the limit is {MAX_INPUT_BYTES} (64 KiB)")
    return value


Labels = Annotated[
    dict[str, str],
    AfterValidator(check_labels),
    Field(description=LABELS_DESCRIPTION, json_schema_extra=labels_schema),
]
"""A job's labels (``jobsched.labels``: the rule, its JSON Schema, selectors)."""


class After(StrictModel):
    """A job's upstream (design §2.1): each run of job ``job`` (its id; the API also takes its name) that ends as
    ``on`` says makes one run of this job, keyed by that run's ``scheduled_for``."""

    job: str = Field(
        min_length=1, max_length=128, description="the upstream job's id or name (stored as its id)"
    )
    on: list[ChainOn] = Field(
        default_factory=lambda: [ChainOn.SUCCEEDED],
        min_length=1,
        max_length=3,
        description="the upstream run's ends that make a run: succeeded, dead, or any (either)",
    )

    def fires_on(self, status: RunStatus) -> bool:
        """Whether an upstream run that ended ``status`` makes a run (only ``succeeded`` and ``dead`` can)."""
        if status not in (RunStatus.SUCCEEDED, RunStatus.DEAD):
            return False
        return ChainOn.ANY in self.on or ChainOn(status.value) in self.on


class JobSettings(StrictModel):
    """The fields of a job its owner sets (everything but identity and scheduling state). A job has either a
    ``schedule`` or an upstream (``after``), never both (design §2.1)."""

    schedule: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        examples=["0 2 * * *", "rate(5 minutes)"],
        description="required unless after is given (a job that runs after another has no schedule)",
    )
    after: After | None = Field(
        None, description="run after each run of another job of the owner (design §2.1)"
    )
    timezone: str = Field("UTC", max_length=64, description="IANA zone name")
    target: Target
    input: Any = None
    labels: Labels = Field(default_factory=dict)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    alerts: AlertPolicy = Field(default_factory=AlertPolicy)
    timeout_s: Count = Field(300, ge=1, description="at most the worker's cap (deployment setting)")
    cancel_grace_s: Count = Field(
        DEFAULT_CANCEL_GRACE_S,
        ge=0,
        le=MAX_CANCEL_GRACE_S,
        description="seconds a stopped `shell` or `command` try (cancelled, or past `timeout_s`) has between "
        "SIGTERM to its process group and SIGKILL",
    )
    missed: MissedPolicy = MissedPolicy.CATCH_UP
    catch_up_window_s: Count = Field(86400, ge=0, le=30 * 86400)
    misfire_grace_s: Count = Field(60, ge=0, le=86400)
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    priority: Priority = Field(
        Priority.NORMAL,
        description="`high` fires go before `normal` ones due at the same time, `low` after (design §4.10)",
    )
    jitter_s: Count = Field(0, ge=0, le=86400)
    start_at: Instant | None = None
    end_at: Instant | None = None
    paused: Flag = False

    _input = field_validator("input")(classmethod(lambda cls, v: check_input(v)))

    @field_validator("start_at", "end_at")
    @classmethod
    def _in_range(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is not None and not INSTANT_YEARS[0] <= value.year <= INSTANT_YEARS[1]:
            raise ValueError(
                f"{info.field_name} must be in the years {INSTANT_YEARS[0]} to {INSTANT_YEARS[1]} "
                "(as written): outside them an instant cannot be moved to every time zone"
            )
        return value

    @field_validator("start_at", "end_at")
    @classmethod
    def _aware(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"{info.field_name} needs an offset or Z (e.g. 2026-12-04T18:00:00Z)")
        return whole_ms(value, info)


class Job(JobSettings):
    """A registered job as the API returns it. Instants are UTC."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    owner: str
    next_run_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    updated_by: str | None = Field(None, description="who made the last change (the caller's identity)")
    paused_by: str | None = Field(
        None, description="while paused: who paused it (`jobsched` when it paused itself)"
    )
    paused_at: datetime | None = Field(None, description="while paused: when")
    paused_reason: str | None = Field(None, description="while paused: the reason given, if any")
    downstream_count: int = Field(0, ge=0, exclude=True)
    """How many jobs run after this one as its store knew when it was read (design §2.1, the chain mark): the
    worker reads the job's downstream jobs only when it is above 0. Never below the true count; it may stay above
    it a while on DynamoDB (a decrement that failed). Not part of the API's answers."""
    quota_rate: int | None = Field(None, ge=0, strict=True, exclude=True)
    """The fire rate (micro-fires per minute, ``jobsched.domain.quotas.job_fire_rate``) this job is counted with in
    its owner's quota usage (design §4.11), as its store knew when it was read; None: not counted (a job written
    without usage, until the recount counts it). Not part of the API's answers."""

    def spec_fingerprint(self) -> dict[str, Any]:
        """The owner-set fields (``name`` and ``JobSettings``'s) as JSON, for comparing a repeated create with the
        stored job."""
        return self.model_dump(mode="json", include={"name", *JobSettings.model_fields})


class Run(BaseModel):
    """One run: the fire ``scheduled_for`` of job ``job_id`` (unique pair). Instants are UTC."""

    id: str
    job_id: str
    scheduled_for: datetime
    status: RunStatus
    kind: RunKind = RunKind.SCHEDULED
    attempt: int = 0
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    worker: str | None = None
    error: str | None = None
    lateness_ms: int | None = Field(None, description="the first try's start minus scheduled_for (ms)")
    last_try_lateness_ms: int | None = Field(
        None,
        description="on a run tried more than once in its round: the last try's start minus scheduled_for (ms), "
        "the try that ended a dead run",
    )
    skipped_count: int | None = Field(
        None, description="on a skipped summary row: how many fires it stands for"
    )
    skipped_through: datetime | None = Field(
        None,
        description="on a skipped summary row: the end (inclusive) of the range of fires it stands for, "
        "which starts at scheduled_for",
    )
    cancelled_by: str | None = Field(None, description="on a cancelled run: who cancelled it")
    cancel_reason: str | None = Field(None, description="on a cancelled run: the reason given, if any")
    upstream_run_id: str | None = Field(
        None, description="a chained run's upstream run, whose end made it (kind chained; design §2.1)"
    )


class RunAttempt(BaseModel):
    """One try of a run (``GET /jobs/{id}/runs/{run_id}``). Instants are UTC."""

    attempt: int = Field(description="1 for the first try of its round, 2 for its first retry, ...")
    started_at: datetime | None = Field(
        None, description="when the try started (null: unknown, a lost worker's)"
    )
    finished_at: datetime | None = Field(None, description="when its result was recorded")
    worker: str | None = Field(None, description="the worker that ran it")
    error: str | None = Field(None, description="why it failed (null: it succeeded); at most 1 KiB")
    output: str | None = Field(
        None,
        description="an excerpt of what the target said: http, the status and the head of the body; shell, the "
        "tails of stdout and stderr; lambda, the head of the response payload or of the function error; sqs, the "
        "message id; command, the returned value as JSON. At most 256 bytes for a successful try, 4 KiB with "
        "the error for a failed one; only the 5 newest tries keep theirs. Values of secret headers are redacted",
    )
    round: int = Field(0, description="0 for the run's own tries, n for the tries after its n-th re-run")


class RunDetail(Run):
    """One run with its tries (``GET /jobs/{id}/runs/{run_id}``; the listing of runs leaves the tries out)."""

    reruns: int = Field(0, description="how many times the run was re-run (POST .../retry)")
    attempts: list[RunAttempt] = Field(
        default_factory=list,
        description="the tries of the current round (since the last re-run), oldest first",
    )
    previous_attempts: list[RunAttempt] = Field(
        default_factory=list,
        description="the tries of earlier rounds (before each re-run), oldest first, each with its `round`; "
        "at most 30 tries are kept in all, the oldest dropped first",
    )


class Fire(BaseModel):
    """A fire to come (``GET /jobs/{id}/fires``), as the scheduler will dispatch it. Instants are UTC."""

    scheduled_for: datetime
    dispatch_at: datetime = Field(
        description="when the scheduler hands the run to a worker: scheduled_for plus the job's jitter offset"
    )
    local_time: str = Field(description="scheduled_for in the job's timezone, ISO 8601 with its UTC offset")
    note: str | None = Field(
        None, description="why daylight saving moves or merges this fire, or that it is already overdue"
    )


class Fires(BaseModel):
    """A job's next fires, oldest first, and why there are none or fewer than asked."""

    items: list[Fire]
    reason: str | None = Field(
        None, description="why the list is empty or shorter than asked (paused, ended), else null"
    )


def paused_fields(actor: str, now_ms: int, reason: str | None, *, paused: bool = True) -> dict[str, Any]:
    """``paused`` and the who/when/why of a pause (``paused_by``, ``paused_at``, ``paused_reason``), all None
    for a resume."""
    if not paused:
        return {"paused": False, "paused_by": None, "paused_at": None, "paused_reason": None}
    return {"paused": True, "paused_by": actor, "paused_at": from_ms(now_ms), "paused_reason": reason}
