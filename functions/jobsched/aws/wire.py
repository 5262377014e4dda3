"""The JSON wire formats of the run side's messages, one definition each: the run-queue message body
(``run_message_body``/``parse_run_message``, written by every run-queue adapter and read by the worker and the
sweeper's dead-letter drain) and the dead-run queue message (``dead_run_envelope``).

Every instant in a run-queue body is a JSON integer of epoch milliseconds (UTC); the dead-run message's are ISO
8601 UTC strings."""

from __future__ import annotations

import json
from typing import Any

from jobsched.clock import from_ms, iso_utc
from jobsched.ports.lateness import LatenessLabels
from jobsched.ports.run_messages import DeadRun, RunMessage


def run_message_body(message: RunMessage) -> str:
    """The body of ``message``: a compact JSON object of ``job_id`` and ``scheduled_for``, plus
    ``dispatch_at``, ``enqueued_at``, ``term`` and ``labels`` (``{"priority": ..., "owner": ...}``) when set
    (``delay_s`` travels as the queue's delay, and ``owner`` as its ``MessageGroupId``, not in the body)."""
    data: dict[str, Any] = {"job_id": message.job_id, "scheduled_for": message.scheduled_for}
    if message.dispatch_at is not None:
        data["dispatch_at"] = message.dispatch_at
    if message.enqueued_at is not None:
        data["enqueued_at"] = message.enqueued_at
    if message.term is not None:
        data["term"] = message.term
    if message.labels is not None:
        data["labels"] = {"priority": message.labels.priority, "owner": message.labels.owner}
    return json.dumps(data, separators=(",", ":"))


def parse_run_message(body: str) -> RunMessage:
    """Parse a message body: a JSON object with ``job_id`` (a string) and ``scheduled_for`` (a JSON integer),
    and optionally ``dispatch_at``, ``enqueued_at`` and ``term`` (JSON integers or null) and ``labels`` (an object
    of two strings, ``priority`` and ``owner``, or null). Raises ValueError
    (the parse's own errors wrapped) for a malformed one: a field missing or of another type (``true``,
    ``1.5``, ``1.0`` or ``"1"`` is not an integer), an instant outside years 1-9999 (``from_ms``: no run has
    such a fire, and no date can show it), or a ``term`` outside 0..2^63-1 (a 64-bit column's)."""
    try:
        data = json.loads(body)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object is expected, not {type(data).__name__}")
        job_id = data["job_id"]
        if not isinstance(job_id, str):
            raise TypeError(f"job_id is a {type(job_id).__name__}, not a string")
        optional = {
            name: _integer(data, name)
            for name in ("dispatch_at", "enqueued_at", "term")
            if data.get(name) is not None
        }
        scheduled_for = _integer(data, "scheduled_for")
        for instant in (scheduled_for, optional.get("dispatch_at"), optional.get("enqueued_at")):
            if instant is not None:
                from_ms(instant)
        if not 0 <= optional.get("term", 0) < 2**63:
            raise ValueError(f"term {optional['term']} is outside 0..2^63-1")
        return RunMessage(
            job_id=job_id,
            scheduled_for=scheduled_for,
            dispatch_at=optional.get("dispatch_at"),
            enqueued_at=optional.get("enqueued_at"),
            term=optional.get("term"),
            labels=_labels(data.get("labels")),
        )
    except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as error:
        raise ValueError(f"malformed run message: {body[:200]!r}") from error


def _labels(value: Any) -> LatenessLabels | None:
    """The ``labels`` of a body: None for null or absent, else an object whose ``priority`` and ``owner`` are
    strings. Raises TypeError/KeyError for any other value."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"labels is a {type(value).__name__}, not an object")
    priority, owner = value["priority"], value["owner"]
    if not isinstance(priority, str) or not isinstance(owner, str):
        raise TypeError("labels.priority and labels.owner are strings")
    return LatenessLabels(priority, owner)


def _integer(data: dict[str, Any], name: str) -> int:
    """``data[name]`` when it is an integer (a bool is not one, though Python's ``bool`` is an ``int``). Raises
    KeyError when absent, TypeError for any other type."""
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is a {type(value).__name__}, not an integer")
    return value


def dead_run_envelope(dead: DeadRun) -> dict[str, Any]:
    """The dead-run queue message of ``dead``: the run envelope (``run_id, job_id, scheduled_for, attempt,
    input``) plus ``owner``, ``job_name``, ``schedule``, ``timezone``, ``target_type``, ``error``, ``dead_at``
    (instants as ISO 8601 UTC strings)."""
    return {
        "run_id": dead.run_id,
        "job_id": dead.job_id,
        "scheduled_for": iso_utc(dead.scheduled_for_ms),
        "attempt": dead.attempts,
        "input": dead.input,
        "owner": dead.owner,
        "job_name": dead.job_name,
        "schedule": dead.schedule,
        "timezone": dead.timezone,
        "target_type": dead.target_type,
        "error": dead.error,
        "dead_at": iso_utc(dead.dead_at_ms),
    }
