"""The HTTP API's request and response bodies (design §3) and their validation, built on the domain's models.

Request bodies (``JobCreate``, ``JobPatch``, ``PauseRequest``, ``BackfillRequest``) refuse unknown fields and
name the field of every error; response bodies (``BackfillResult``, ``JobEvent``, ``Page``) are what the routes
return beside the domain's ``Job``, ``Run``, ``RunDetail`` and ``Fires`` (``jobsched.models``). Their class
names, fields and docstrings are the OpenAPI document's schemas (``jobsched.api.openapi``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from jobsched.domain.cancels import Stop
from jobsched.models import (
    CONTROL_CHARS,
    MAX_CANCEL_GRACE_S,
    SPACE_CHARS,
    After,
    AlertPolicy,
    Count,
    Flag,
    Instant,
    Job,
    JobEventKind,
    JobSettings,
    Labels,
    MissedPolicy,
    OverlapPolicy,
    Priority,
    RetryPolicy,
    RunDetail,
    StrictModel,
    Target,
    check_input,
    optional_bounds,
    whole_ms,
)

T = TypeVar("T")

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"

_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
REASON_PATTERN = f"^[^{CONTROL_CHARS}]*[^{CONTROL_CHARS}{SPACE_CHARS}][^{CONTROL_CHARS}]*$"
"""A pause's ``reason``: one line of text, not blank (some character neither a control character nor whitespace);
its validation and its OpenAPI ``pattern``."""


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
    """Document ``command`` as the alternative to ``target`` (never both; on create, one of them), and on create
    ``after`` as the alternative to ``schedule`` (exactly one of them: design §2.1, a job that runs after another
    has no schedule)."""
    schema["not"] = {"required": ["command", "target"]}
    if target_required:
        schema["required"] = [name for name in schema.get("required", []) if name != "target"]
        schema["allOf"] = [
            {"anyOf": [{"required": ["target"]}, {"required": ["command"]}]},
            {"anyOf": [{"required": ["schedule"]}, {"required": ["after"]}]},
            {"not": {"required": ["schedule", "after"]}},
        ]
        for name in ("schedule", "after"):  # optional, never null
            drop_null(schema["properties"][name])
            schema["properties"][name].pop("default", None)


def _refuse_null(value: Any, info: ValidationInfo) -> Any:
    """A create body's ``schedule`` and ``after`` are optional (one of them is given) but never null."""
    if value is None:
        raise PydanticCustomError("not_null", "{field} cannot be null; omit it", {"field": info.field_name})
    return value


class JobCreate(JobSettings):
    """Body of ``POST /jobs``. ``owner`` is never taken from the body; ``command`` is the shorthand for a
    command target (read, never stored or returned). Exactly one of ``schedule`` and ``after`` (design §2.1: a
    job that runs after another has no schedule), neither of them null."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema: _command_shorthand_schema(schema, target_required=True)
    )

    name: str = Field(pattern=NAME_PATTERN)
    schedule: Annotated[
        str | None,
        BeforeValidator(_refuse_null),
        Field(min_length=1, max_length=256, examples=["0 2 * * *", "rate(5 minutes)"]),
    ] = None
    after: Annotated[After | None, BeforeValidator(_refuse_null)] = None
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


def _patch_schema(schema: dict[str, Any]) -> None:
    """``JobPatch``'s document: the command shorthand, and no null for fields outside
    ``PATCH_NULLABLE_FIELDS`` (their ``None`` default only means "absent")."""
    _command_shorthand_schema(schema, target_required=False)
    for name, prop in schema.get("properties", {}).items():
        if name not in PATCH_NULLABLE_FIELDS:
            drop_null(prop)
    optional_bounds(schema)


class JobPatch(StrictModel):
    """Body of ``PATCH /jobs/{id}``: any subset of the settings; absent fields keep their value; only
    ``input``, ``start_at`` and ``end_at`` may be set to null (cleared), so the others are documented without
    null (a null one is refused, 400 naming it). ``schedule`` replaces a job's ``after`` and ``after`` its
    ``schedule`` (a job has one of them, design §2.1; both in one PATCH: 400 naming ``after``). ``command`` is
    the shorthand for a command target, as on create."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _patch_schema(schema))

    schedule: str | None = Field(None, min_length=1, max_length=256)
    after: After | None = None
    timezone: str | None = Field(None, max_length=64)
    target: Target | None = None
    input: Any = None
    labels: Labels | None = None
    retry: RetryPolicy | None = None
    alerts: AlertPolicy | None = None
    timeout_s: Annotated[Count, Field(ge=1)] | None = None
    cancel_grace_s: Annotated[Count, Field(ge=0, le=MAX_CANCEL_GRACE_S)] | None = None
    missed: MissedPolicy | None = None
    catch_up_window_s: Annotated[Count, Field(ge=0, le=30 * 86400)] | None = None
    misfire_grace_s: Annotated[Count, Field(ge=0, le=86400)] | None = None
    overlap: OverlapPolicy | None = None
    priority: Priority | None = None
    jitter_s: Annotated[Count, Field(ge=0, le=86400)] | None = None
    start_at: Instant | None = None
    end_at: Instant | None = None
    paused: Flag | None = None
    command: CommandShorthand = None

    _input = field_validator("input")(classmethod(lambda cls, v: check_input(v)))

    @model_validator(mode="before")
    @classmethod
    def _command(cls, data: Any) -> Any:
        return _expand_command(data)


MAX_REASON_CHARS = 500


class ReasonRequest(StrictModel):
    """An optional ``reason``: one line of text, not blank (``PauseRequest``, ``CancelRequest``)."""

    reason: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_REASON_CHARS,
        description="why, one line of text",
        json_schema_extra={"pattern": REASON_PATTERN},
    )

    @field_validator("reason")
    @classmethod
    def _one_line_of_text(cls, reason: str | None) -> str | None:
        """A reason is shown in tables and alerts: ``REASON_PATTERN`` (no control characters, CR/LF, NUL, ...;
        not blank)."""
        if reason is None or re.fullmatch(REASON_PATTERN, reason):
            return reason
        if _CONTROL.search(reason):
            raise PydanticCustomError(
                "reason_control", "reason must be one line of text, without control characters"
            )
        raise PydanticCustomError("blank_reason", "reason must not be blank")


class PauseRequest(ReasonRequest):
    """Optional body of ``POST /jobs/{id}/pause``: the ``reason`` is shown on the job while it is paused."""


class CancelRequest(ReasonRequest):
    """Optional body of ``POST /jobs/{id}/runs/{run_id}/cancel``: the ``reason`` is kept on the cancelled run
    (``cancel_reason``)."""


class RunCancel(RunDetail):
    """The answer of ``POST /jobs/{id}/runs/{run_id}/cancel``: the cancelled run, and what became of its try."""

    stop: Stop = Field(
        description="`not_started`: the run was queued or retrying, no try of it starts; `terminated`: its "
        "running `shell` or `command` try is stopped within one heartbeat interval (SIGTERM to the process "
        "group, SIGKILL after the job's `cancel_grace_s`); `aborted`: its running `http` request is shut "
        "within one heartbeat interval; `not_recalled`: a `lambda` invocation or `sqs` message already sent "
        "cannot be recalled and may still finish (the run stays `cancelled`)"
    )
    note: str = Field(description="the same, in a sentence")


class BackfillRequest(StrictModel):
    """Body of ``POST /jobs/{id}/backfill``: run the job's fires in ``[start, end)`` that have no run yet."""

    start: Instant = Field(description="first instant of the window (inclusive), ISO 8601 with an offset")
    end: Instant = Field(description="end of the window (exclusive), at most now, ISO 8601 with an offset")

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime, info: ValidationInfo) -> datetime:
        if value.tzinfo is None:
            raise ValueError(f"{info.field_name} needs an offset or Z (e.g. 2026-12-04T18:00:00Z)")
        whole = whole_ms(value, info)
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


class JobLink(BaseModel):
    """Another job of a chain (design §2.1), as ``GET /jobs/{id}`` names it: its ``id`` and ``name``, and for a
    downstream job the upstream ends it runs after (``on``)."""

    id: str
    name: str
    on: list[str] | None = None


class JobDetail(Job):
    """``GET /jobs/{id}``: the job with its chain (design §2.1): ``upstream``, the job named by its ``after``
    (null without one, or when that job was deleted), and ``downstream``, the owner's jobs that run after it."""

    upstream: JobLink | None = None
    downstream: list[JobLink] = Field(default_factory=list)


class Page(BaseModel, Generic[T]):
    """A page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None = None
