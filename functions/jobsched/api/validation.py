"""Pydantic validation errors as the API reports them: the field (dotted, as the request spells it) and one
sentence a person can act on.

Used for request validation (``errors.validation_error_response``) and for the job a PATCH produces
(``service.JobService.update_job``), so both name fields and word messages alike. No HTTP here.

Message rules: ``error.field`` already names the field, so a message does not repeat it as a ``field: ``
prefix. The models' own validators write messages that name their subject (``url must be ...``) and are
shown as they are; pydantic's generic ones (``Input should be ...``) get the field as their subject
(``timeout_s should be ...``); a message that names nothing keeps the field in front, since it would be
ambiguous without it.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any

from jobsched.models import Target

TARGET_TYPES = tuple(
    sorted(member.model_fields["type"].default for member in typing.get_args(typing.get_args(Target)[0]))
)
"""The ``type`` tags of the target union (``command``, ``http``, ...)."""

_GENERIC_SUBJECTS = ("Input ", "String ", "Value ", "List ", "Dictionary ", "Object ", "Tuple ", "Set ")
"""How pydantic's built-in messages start (``Input should be a valid integer``)."""
_VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")


def field_of(loc: Sequence[Any]) -> str | None:
    """The request field of a pydantic error location, which starts with its location kind.

    ``("body", "target", "http", "url")`` -> ``"target.url"`` (location kind, list indexes and the union tag
    pydantic puts after ``target`` dropped); ``("query", "limit")`` -> ``"limit"``; a header keeps its
    canonical spelling (``("header", "idempotency-key")`` -> ``"Idempotency-Key"``); the body as a whole is
    ``"body"``.
    """
    if loc and loc[0] == "header" and len(loc) > 1:
        return "-".join(word.capitalize() for word in str(loc[1]).split("-"))
    parts = [str(p) for p in loc[1:] if isinstance(p, str)] if loc else []
    cleaned = [
        p for i, p in enumerate(parts) if not (i > 0 and parts[i - 1] == "target" and p in TARGET_TYPES)
    ]
    if not cleaned:
        return "body" if loc and loc[0] == "body" else None
    return ".".join(cleaned)


def describe(error: Mapping[str, Any]) -> tuple[str | None, str]:
    """``(field, message)`` of one request validation error (a dict of ``ValidationError.errors()`` whose
    ``loc`` starts with the location kind, as Powertools reports them), per the module's message rules."""
    field = field_of(error.get("loc") or ())
    return field, _message(error, field)


def _message(error: Mapping[str, Any], field: str | None) -> str:
    kind = error.get("type", "")
    msg = str(error.get("msg", "invalid value"))
    for prefix in _VALIDATOR_PREFIXES:
        msg = msg.removeprefix(prefix)
    where = "request body" if field in (None, "body") else field
    if kind == "missing":
        return f"{where} is required"
    if kind == "extra_forbidden":
        if field == "owner":
            return "owner is not accepted in the body: a job's owner is the authenticated caller"
        return f"{where} is not a known field"
    if kind == "union_tag_not_found":
        return f"{where} needs a type: one of {', '.join(TARGET_TYPES)}"
    if kind == "union_tag_invalid":
        tag = (error.get("ctx") or {}).get("tag")
        return f"{where} type {tag!r} is unknown; use one of {', '.join(TARGET_TYPES)}"
    if kind in ("model_attributes_type", "dict_type", "model_type"):
        return f"{where} must be a JSON object"
    for subject in _GENERIC_SUBJECTS:
        if msg.startswith(subject):
            return f"{where} {msg.removeprefix(subject)}"
    if _names_its_subject(msg, field):
        return msg
    return f"{where}: {msg}"


def _names_its_subject(message: str, field: str | None) -> bool:
    """Whether ``message`` says what it is about: it mentions the field's last name (singular or plural:
    ``header ...`` for ``target.headers``)."""
    if field in (None, "body"):
        return True
    leaf = str(field).rsplit(".", 1)[-1].lower()
    return leaf.removesuffix("s") in message.lower()
