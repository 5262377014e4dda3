"""Pydantic models shared by the API, the scheduler, the workers and storage.

Field names are the public API contract of design §2. Instants in the API are ISO 8601
strings in UTC (``2026-12-04T18:00:00Z``); storage keeps them as epoch milliseconds (see
``jobsched.store``). Limits are those of design §2 unless said otherwise.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import math
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Generic, Literal, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from jobsched.schedules import ceil_to_ms

T = TypeVar("T")

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
MAX_INPUT_BYTES = 64 * 1024
MAX_INPUT_DEPTH = 128
"""Deepest nesting of arrays/objects in ``input`` (serde_json's default recursion limit; deeper JSON is
refused by many of the parsers targets use, and past ~250 levels pydantic cannot serialize the job)."""
MAX_ERROR_CHARS = 2000
INSTANT_YEARS = (1000, 8999)
"""The years (as written, before the offset) ``start_at`` and ``end_at`` may have: with a margin from
Python's 1-9999, so that any instant can be localized to any zone without leaving the datetime range."""


class RunStatus(StrEnum):
    """Lifecycle of a run (design §2). Terminal: succeeded, dead, skipped."""

    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    SKIPPED = "skipped"

    @property
    def terminal(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.SKIPPED)


class MissedPolicy(StrEnum):
    """What the scheduler does with fires missed during downtime (design §4.4)."""

    CATCH_UP = "catch_up"
    SKIP = "skip"


class OverlapPolicy(StrEnum):
    """Whether a run may start while another run of the same job is running."""

    ALLOW = "allow"
    SKIP = "skip"


class RunKind(StrEnum):
    """Why a run exists: a fire of the schedule, a manual ``POST /jobs/{id}/trigger``, or a past fire run by
    ``POST /jobs/{id}/backfill``."""

    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"


class JobEventKind(StrEnum):
    """What a job's audit event records (``GET /jobs/{id}/events``, design §3.2)."""

    CREATED = "created"
    UPDATED = "updated"
    PAUSED = "paused"
    RESUMED = "resumed"
    TRIGGERED = "triggered"
    RUN_RETRIED = "run_retried"
    BACKFILLED = "backfilled"
    AUTO_PAUSED = "auto_paused"
    DELETED = "deleted"


class _Strict(BaseModel):
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


def _whole_number(value: Any) -> Any:
    """A JSON number without a fractional part is an integer, as JSON Schema's ``integer`` says: ``30.0`` is 30."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Count = Annotated[int, BeforeValidator(_whole_number), Strict()]
"""A JSON integer as the schema says (``30`` or ``30.0``): no ``"30"``, ``30.5`` or ``true`` coerced into one."""
Flag = Annotated[bool, Strict()]
"""A JSON boolean as the schema says: no ``0``, ``"yes"`` or ``"true"`` coerced into one."""


def _whole_ms(value: datetime | None, info: ValidationInfo) -> datetime | None:
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


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 section 5.1: a field name is a ``token``."""
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?")
"""RFC 9110 section 5.5 field value, ASCII only (httpx encodes header values as ASCII): visible characters
with inner spaces or tabs; no CR/LF or other control characters, no leading or trailing whitespace."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""C0 control characters, DEL and C1 control characters (CR, LF, tab, NUL, NEL U+0085, CSI U+009B, ...), and the
LINE and PARAGRAPH SEPARATORs (U+2028, U+2029): what breaks a line of text or drives a terminal (Unicode
category Cc, and the line breaks of Unicode's ``splitlines``)."""
_HOST_LABEL = re.compile(r"(?:[A-Za-z0-9_-]|[^\x00-\x7f])+")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*", re.IGNORECASE)
# (all four are used with fullmatch: "$" would let a trailing newline through)


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be requested (None when it can): the checks of RFC 3986 and the WHATWG URL standard
    that decide whether the worker's HTTP client reaches a host. Host names are DNS names (labels of letters,
    digits, ``-`` and ``_``, or internationalized); a host ending in a numeric label must be an IPv4 address
    (WHATWG "ends in a number"); a bracketed host an IPv6 address; the port 1-65535."""
    if not re.match(r"^https?://", url):
        return "url must be an absolute http:// or https:// URL"
    if re.search(r"[\x00-\x20\x7f]", url):
        return "url must not contain spaces or control characters (percent-encode them, e.g. %20)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:  # unbalanced brackets, a bad IPv6 literal, a port out of range
        return f"url is not a valid URL: {error}"
    host = parts.hostname or ""
    if not host:
        return "url has no host"
    if port == 0:
        return "url has port 0; use a port from 1 to 65535"
    if "[" in parts.netloc:
        return None  # urlsplit checked the IPv6 literal
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or any(not _HOST_LABEL.fullmatch(label) or len(label) > 63 for label in labels):
        return f"url host {host!r} is not a valid host name"
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        try:
            ipaddress.IPv4Address(host.removesuffix("."))
        except ValueError:
            return f"url host {host!r} is neither a host name nor an IPv4 address (four numbers 0-255)"
    return None


ALWAYS_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Request headers whose values a run's output and error never show, whether or not ``secret_headers`` names them."""
MIN_SECRET_PART_CHARS = 4
"""Parts of a secret (a password, an auth scheme's credentials, a cookie's value, a segment of a secret path)
shorter than this are not redacted on their own (they are within their whole value): a one-letter password
would blank every such letter of an output."""
MIN_QUERY_SECRET_CHARS = 8
"""A URL's query values this long or longer count as secret (API keys, signatures and tokens travel there);
shorter ones (``page=2``, ``format=json``) do not, so an output is not blanked by words of its own."""
_AUTH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*")


def _base64_spellings(pair: str) -> set[str]:
    """``pair`` (``user:password``) in base64 as HTTP Basic sends it, and as a server may echo it: without its
    ``=`` padding, and in the URL-safe alphabet (``-_`` for ``+/``) with and without."""
    standard = base64.b64encode(pair.encode()).decode()
    url_safe = base64.urlsafe_b64encode(pair.encode()).decode()
    return {standard, standard.rstrip("="), url_safe, url_safe.rstrip("=")}


def _credential_parts(name: str, value: str) -> set[str]:
    """The parts of secret header ``name``'s ``value`` a server may echo on their own: an auth scheme's
    credentials (``Bearer <token>``), the ``user:password`` and password a ``Basic`` value encodes (and that pair's
    ``_base64_spellings``), a cookie's values; each at least ``MIN_SECRET_PART_CHARS`` long."""
    parts: set[str] = set()
    scheme, _, credentials = value.partition(" ")
    credentials = credentials.strip()
    if name.lower() != "cookie" and _AUTH_SCHEME.fullmatch(scheme) and credentials:
        parts.add(credentials)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(credentials, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                pair = ""
            if pair:
                parts.update({pair, pair.partition(":")[2], *_base64_spellings(pair)})
    if name.lower() == "cookie":
        parts.update(cookie.partition("=")[2].strip() for cookie in value.split(";"))
    return {part for part in parts if len(part) >= MIN_SECRET_PART_CHARS}


def url_secrets(url: str, *, secret_path: bool = False) -> set[str]:
    """The secrets ``url`` carries: its credentials (``user:password@``: the password, ``user:password`` and
    its base64 as HTTP Basic sends it, ``_base64_spellings``), its query values of ``MIN_QUERY_SECRET_CHARS`` or more characters
    (percent-decoded), and with ``secret_path`` its path and each of the path's segments (of at least
    ``MIN_SECRET_PART_CHARS``)."""
    parts = urlsplit(url)
    found: set[str] = set()
    if parts.password:
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        found.update({pair, *_base64_spellings(pair), unquote(parts.password)})
    found.update(v for _, v in parse_qsl(parts.query) if len(v) >= MIN_QUERY_SECRET_CHARS)
    if secret_path and parts.path.strip("/"):
        found.add(parts.path)
        found.update(unquote(s) for s in parts.path.split("/") if len(unquote(s)) >= MIN_SECRET_PART_CHARS)
    return {value for value in found if len(value) >= MIN_SECRET_PART_CHARS}


class HttpTarget(_Strict):
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
        for name, text in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(
                    f"header name {name!r} is not a valid HTTP field name (RFC 9110 token: letters, digits "
                    "and !#$%&'*+-.^_`|~)"
                )
            if not _HEADER_VALUE.fullmatch(text):
                raise ValueError(
                    f"the value of header {name!r} must be printable ASCII: no CR, LF or other control "
                    "characters, no leading or trailing spaces (RFC 9110 field value)"
                )
        return value

    @field_validator("secret_headers")
    @classmethod
    def _secret_headers(cls, value: list[str], info: ValidationInfo) -> list[str]:
        given = {name.lower() for name in info.data.get("headers", {})}
        for name in value:
            if name.lower() not in given:
                raise ValueError(f"secret header {name!r} is not one of the target's headers")
        return value

    def secret_values(self) -> list[str]:
        """What a run's output, error, logs and alerts must never show (``jobsched.targets.redaction``): the
        values of the secret headers (``secret_headers`` and ``ALWAYS_SECRET_HEADERS``) with the parts a server
        may echo alone (``_credential_parts``), and the URL's secrets (``url_secrets``); longest first (so a
        value containing another is redacted whole)."""
        secret = {name.lower() for name in self.secret_headers} | ALWAYS_SECRET_HEADERS
        values: set[str] = set()
        for name, text in self.headers.items():
            if name.lower() in secret and text:
                values.add(text)
                values.update(_credential_parts(name, text))
        values.update(url_secrets(self.url, secret_path=self.secret_path))
        return sorted(values, key=len, reverse=True)


class LambdaTarget(_Strict):
    """Synchronous invoke of a Lambda function with the run envelope; FunctionError is failure."""

    type: Literal["lambda"] = "lambda"
    function: str = Field(min_length=1, max_length=256, description="function name or ARN")


class SqsTarget(_Strict):
    """Send the run envelope to a queue; FIFO queues get MessageDeduplicationId = run id."""

    type: Literal["sqs"] = "sqs"
    queue_url: str = Field(min_length=1, max_length=2048)


class CommandTarget(_Strict):
    """A Python callable registered with the worker by name (``echo``, ``sleep``, ``fail`` ship)."""

    type: Literal["command"] = "command"
    name: str = Field(min_length=1, max_length=128)


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A shell target's environment variable name (``JOBSCHED_*`` are reserved for the run's own)."""
MAX_SHELL_ENV = 64


class ShellTarget(_Strict):
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
        description="environment variables for the command: names [A-Za-z_][A-Za-z0-9_]*, values without NUL",
    )
    shell: str | None = Field(
        None,
        exclude_if=lambda value: value is None,
        min_length=2,
        max_length=256,
        description="absolute path, e.g. /bin/bash",
    )

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not ENV_NAME.fullmatch(name) or name.startswith("JOBSCHED_"):
                raise ValueError(
                    f"env name {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*; JOBSCHED_* are set "
                    "by the worker)"
                )
            if "\0" in text or len(text) > 8192:
                raise ValueError(
                    f"the value of env {name!r} must have no NUL character and at most 8192 characters"
                )
        return value

    @field_validator("shell")
    @classmethod
    def _shell(cls, value: str | None) -> str | None:
        if value is not None and (
            not value.startswith("/") or "\0" in value or any(c.isspace() for c in value)
        ):
            raise ValueError(f"shell {value!r} must be an absolute path without spaces, such as /bin/bash")
        return value


Target = Annotated[
    HttpTarget | LambdaTarget | SqsTarget | CommandTarget | ShellTarget, Field(discriminator="type")
]


class RetryPolicy(_Strict):
    """Retries of a failed try: delay ``min(backoff_s * 2**(attempt-1), max_backoff_s)`` seconds."""

    max_attempts: Count = Field(4, ge=1, le=10)
    backoff_s: Count = Field(60, ge=0, le=900)
    max_backoff_s: Count = Field(900, ge=0, le=900, description="SQS delays cap at 900 s")

    def delay_s(self, attempt: int) -> int:
        """Delay before try ``attempt + 1`` after try ``attempt`` (1-based) failed, in seconds."""
        return int(min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s))


def _optional_bounds(schema: dict[str, Any]) -> None:
    """Bounds of optional ``Count`` fields under their JSON Schema names (pydantic leaves them under their Python
    names when a validator wraps the type), in every branch of each property."""
    for prop in schema.get("properties", {}).values():
        for branch in prop.get("anyOf", [prop]):
            for python, json_schema in _BOUND_KEYWORDS:
                if python in branch:
                    branch[json_schema] = branch.pop(python)


class AlertPolicy(_Strict):
    """When a job's owner is alerted on the alerts topic (design §5.6), beyond the run history itself.

    ``on_dead``: a run out of attempts; ``on_skipped``: fires recorded skipped (missed, or overlap); ``late_after_s``: a
    run whose first try starts later than this after its ``scheduled_for``; ``after_consecutive_failures``: the
    N-th dead run in a row (once per streak); ``pause_after_consecutive_dead``: after N dead runs in a row the
    job pauses itself (``paused_by`` ``jobsched``, with the reason) and one alert says so.
    """

    model_config = ConfigDict(json_schema_extra=lambda schema: _optional_bounds(schema))

    on_dead: Flag = True
    on_skipped: Flag = False
    late_after_s: Count | None = Field(None, ge=1, le=30 * 86400)
    after_consecutive_failures: Count | None = Field(None, ge=1, le=100)
    pause_after_consecutive_dead: Count | None = Field(None, ge=1, le=100)


def _check_input(value: Any) -> Any:
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


def _expand_command(data: Any) -> Any:
    """``"command": "send-report"`` is shorthand for a command target (design §5.5).

    Alone, it becomes ``"target": {"type": "command", "name": ...}``; given with ``target`` it is left in place
    for the ``command`` field's validator to refuse, so the error names ``command``.
    """
    if isinstance(data, dict) and "command" in data and "target" not in data:
        data = dict(data)
        data["target"] = {"type": "command", "name": data.pop("command")}
    return data


def _refuse_command_with_target(value: Any) -> Any:
    """Validator of the ``command`` field: only reached when ``target`` was given too (see ``_expand_command``)."""
    raise PydanticCustomError("command_and_target", "give either command or target, not both")


_COMMAND_DESCRIPTION = (
    'shorthand for "target": {"type": "command", "name": <command>}; give command or target, not both'
)

CommandShorthand = Annotated[
    str | SkipJsonSchema[None],
    BeforeValidator(_refuse_command_with_target),
    Field(min_length=1, max_length=128, exclude=True, description=_COMMAND_DESCRIPTION),
]
"""The ``command`` field of a job's create and patch bodies: read, never stored or returned; refused beside
``target`` (``_expand_command`` turns it alone into the target before field validation)."""


def _command_shorthand_schema(schema: dict[str, Any], *, target_required: bool) -> None:
    """Document ``command`` as the alternative to ``target`` (never both; on create, one of them)."""
    schema["not"] = {"required": ["command", "target"]}
    if target_required:
        schema["required"] = [name for name in schema.get("required", []) if name != "target"]
        schema["anyOf"] = [{"required": ["target"]}, {"required": ["command"]}]


class JobSettings(_Strict):
    """The fields of a job its owner sets (everything but identity and scheduling state)."""

    schedule: str = Field(min_length=1, max_length=256, examples=["0 2 * * *", "rate(5 minutes)"])
    timezone: str = Field("UTC", max_length=64, description="IANA zone name")
    target: Target
    input: Any = None
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    alerts: AlertPolicy = Field(default_factory=AlertPolicy)
    timeout_s: Count = Field(300, ge=1, description="at most the worker's cap (deployment setting)")
    missed: MissedPolicy = MissedPolicy.CATCH_UP
    catch_up_window_s: Count = Field(86400, ge=0, le=30 * 86400)
    misfire_grace_s: Count = Field(60, ge=0, le=86400)
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    jitter_s: Count = Field(0, ge=0, le=86400)
    start_at: Instant | None = None
    end_at: Instant | None = None
    paused: Flag = False

    _input = field_validator("input")(classmethod(lambda cls, v: _check_input(v)))

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
        return _whole_ms(value, info)


class JobCreate(JobSettings):
    """Body of ``POST /jobs``. ``owner`` is never taken from the body; ``command`` is the shorthand for a
    command target (read, never stored or returned)."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema: _command_shorthand_schema(schema, target_required=True)
    )

    name: str = Field(pattern=NAME_PATTERN)
    command: CommandShorthand = None

    @model_validator(mode="before")
    @classmethod
    def _command(cls, data: Any) -> Any:
        return _expand_command(data)


PATCH_NULLABLE_FIELDS = frozenset({"input", "start_at", "end_at"})
"""The PATCH fields that may be set to null (which clears them); any other field given as null is refused."""


def drop_null(schema: dict[str, Any]) -> None:
    """Remove the ``{"type": "null"}`` variant of a JSON schema's ``anyOf`` in place (an ``anyOf`` left with one
    variant becomes that variant), for a value that is optional (may be absent) but never null."""
    variants = schema.get("anyOf")
    if not isinstance(variants, list):
        return
    concrete = [variant for variant in variants if variant.get("type") != "null"]
    if len(concrete) == 1:
        schema.pop("anyOf")
        schema.update(concrete[0])
    elif concrete:
        schema["anyOf"] = concrete


_BOUND_KEYWORDS = (
    ("ge", "minimum"),
    ("le", "maximum"),
    ("gt", "exclusiveMinimum"),
    ("lt", "exclusiveMaximum"),
)


def _patch_schema(schema: dict[str, Any]) -> None:
    """``JobPatch``'s document: the command shorthand, and no null for fields outside
    ``PATCH_NULLABLE_FIELDS`` (their ``None`` default only means "absent")."""
    _command_shorthand_schema(schema, target_required=False)
    for name, prop in schema.get("properties", {}).items():
        if name not in PATCH_NULLABLE_FIELDS:
            drop_null(prop)
    _optional_bounds(schema)


class JobPatch(_Strict):
    """Body of ``PATCH /jobs/{id}``: any subset of the settings; absent fields keep their value; only
    ``input``, ``start_at`` and ``end_at`` may be set to null (cleared), so the others are documented without
    null (a null one is refused, 400 naming it). ``command`` is the shorthand for a command target, as on
    create."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _patch_schema(schema))

    schedule: str | None = Field(None, min_length=1, max_length=256)
    timezone: str | None = Field(None, max_length=64)
    target: Target | None = None
    input: Any = None
    retry: RetryPolicy | None = None
    alerts: AlertPolicy | None = None
    timeout_s: Annotated[Count, Field(ge=1)] | None = None
    missed: MissedPolicy | None = None
    catch_up_window_s: Annotated[Count, Field(ge=0, le=30 * 86400)] | None = None
    misfire_grace_s: Annotated[Count, Field(ge=0, le=86400)] | None = None
    overlap: OverlapPolicy | None = None
    jitter_s: Annotated[Count, Field(ge=0, le=86400)] | None = None
    start_at: Instant | None = None
    end_at: Instant | None = None
    paused: Flag | None = None
    command: CommandShorthand = None

    _input = field_validator("input")(classmethod(lambda cls, v: _check_input(v)))

    @model_validator(mode="before")
    @classmethod
    def _command(cls, data: Any) -> Any:
        return _expand_command(data)


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

    def spec_fingerprint(self) -> dict[str, Any]:
        """The owner-set fields, for comparing a repeated create with the stored job."""
        return self.model_dump(mode="json", include=set(JobCreate.model_fields))


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
    lateness_ms: int | None = None
    skipped_count: int | None = Field(
        None, description="on a skipped summary row: how many fires it stands for"
    )
    skipped_through: datetime | None = Field(
        None,
        description="on a skipped summary row: the end (inclusive) of the range of fires it stands for, "
        "which starts at scheduled_for",
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


MAX_REASON_CHARS = 500


class PauseRequest(_Strict):
    """Optional body of ``POST /jobs/{id}/pause``."""

    reason: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_REASON_CHARS,
        description="why, one line of text; shown on the job while it is paused",
        json_schema_extra={
            "pattern": r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*[^\s\x7f-\x9f][^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
        },
    )

    @field_validator("reason")
    @classmethod
    def _one_line_of_text(cls, reason: str | None) -> str | None:
        """A reason is shown in tables and alerts: not blank, and no control characters (CR/LF, NUL, ...)."""
        if reason is not None and not reason.strip():
            raise PydanticCustomError("blank_reason", "reason must not be blank")
        if reason is not None and _CONTROL.search(reason):
            raise PydanticCustomError(
                "reason_control", "reason must be one line of text, without control characters"
            )
        return reason


class BackfillRequest(_Strict):
    """Body of ``POST /jobs/{id}/backfill``: run the job's fires in ``[start, end)`` that have no run yet."""

    start: Instant = Field(description="first instant of the window (inclusive), ISO 8601 with an offset")
    end: Instant = Field(description="end of the window (exclusive), at most now, ISO 8601 with an offset")

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime, info: ValidationInfo) -> datetime:
        if value.tzinfo is None:
            raise ValueError(f"{info.field_name} needs an offset or Z (e.g. 2026-12-04T18:00:00Z)")
        whole = _whole_ms(value, info)
        assert whole is not None
        return whole


class BackfillResult(BaseModel):
    """What a backfill did: ``count`` runs created (kind ``backfill``) or re-run (fires recorded ``skipped``),
    the ``first`` and ``last`` of their fires (null when none), and the window's ``fires`` of which
    ``existing`` already had a run and were left alone, and ``left_to_scheduler`` were not run because the
    scheduler has not dispatched them yet."""

    count: int
    created: int
    rerun: int
    fires: int
    existing: int
    first: datetime | None = None
    last: datetime | None = None
    left_to_scheduler: int = Field(
        default=0,
        description="fires of the window the scheduler has not dispatched yet (at or after the job's "
        "next_run_at, or before their jittered dispatch instant): left to it, not run by this backfill",
    )


class JobEvent(BaseModel):
    """One entry of a job's audit trail (``GET /jobs/{id}/events``), newest first. ``at`` is UTC; ``actor`` the
    caller's identity (an IAM principal ARN, a local token's owner) or ``jobsched`` for the system's own acts;
    ``detail``: the changed fields of an update, a pause's reason, a run's id, a backfill's window."""

    at: datetime
    kind: JobEventKind
    actor: str
    detail: dict[str, Any] = Field(default_factory=dict)


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


class Page(BaseModel, Generic[T]):
    """A page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None = None


def paused_fields(actor: str, now_ms: int, reason: str | None, *, paused: bool = True) -> dict[str, Any]:
    """``paused`` and the who/when/why of a pause (``paused_by``, ``paused_at``, ``paused_reason``), all None
    for a resume."""
    if not paused:
        return {"paused": False, "paused_by": None, "paused_at": None, "paused_reason": None}
    return {"paused": True, "paused_by": actor, "paused_at": from_ms(now_ms), "paused_reason": reason}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_ms(ms: int) -> datetime:
    """Epoch milliseconds -> aware UTC datetime, exactly: integer arithmetic, as a float of epoch seconds is
    coarser than a microsecond past 2^33 s (year 2242) and landed before the instant. Raises ValueError for an
    instant outside years 1-9999."""
    try:
        return _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        raise ValueError(f"{ms} ms since the epoch is outside years 1-9999") from None


def to_ms(value: datetime) -> int:
    """Aware datetime -> epoch milliseconds (UTC)."""
    return round(value.timestamp() * 1000)
