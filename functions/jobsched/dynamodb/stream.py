"""The runs and jobs tables' stream records, read (design §11): which records are TTL deletions of a run or of an
audit event, and the ``RunRow`` or ``AuditEvent`` each one held.

DynamoDB's TTL deletes an expired item as the service itself: its stream record is a ``REMOVE`` whose
``userIdentity`` is ``{"type": "Service", "principalId": "dynamodb.amazonaws.com"}``, with the item in
``dynamodb.OldImage`` (stream view ``OLD_IMAGE``). ``TTL_DELETION_FILTER`` is the Lambda event filter that lets
only those records of run rows (which carry ``status``; a manual trigger's key item does not) invoke the
archive function; :func:`expired_runs` checks the same again, so a record the filter let through by mistake is
ignored, never archived; a TTL deletion whose image is no run row is returned whole (``malformed``), never
dropped and never failing its batch. ``AUDIT_TTL_DELETION_FILTER`` does the same for the jobs table's stream: only
TTL deletions of audit events (key ``pk`` starting ``events#``; the jobs table's timers, tombstones and locks
expire by TTL too) invoke the function, and :func:`expired_runs` returns their ``AuditEvent``.
"""

from __future__ import annotations

from base64 import b64decode
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from jobsched.dynamodb.layout import EVENTS_PK_PREFIX, event_from_item, plain, run_row_of_plain
from jobsched.ports.jobs import AuditEvent
from jobsched.ports.runs import RunRow

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
TTL_DELETION_FILTER: dict[str, Any] = {
    "eventName": ["REMOVE"],
    "userIdentity": {"type": ["Service"], "principalId": [TTL_PRINCIPAL]},
    "dynamodb": {"OldImage": {"status": {"S": [{"exists": True}]}}},
}
"""The Lambda event filter pattern (``FilterCriteria``) of the archive function's mapping on the runs table."""
AUDIT_TTL_DELETION_FILTER: dict[str, Any] = {
    "eventName": ["REMOVE"],
    "userIdentity": {"type": ["Service"], "principalId": [TTL_PRINCIPAL]},
    "dynamodb": {"Keys": {"pk": {"S": [{"prefix": EVENTS_PK_PREFIX}]}}},
}
"""The Lambda event filter pattern of the archive function's mapping on the jobs table: TTL deletions of audit
events only."""


def plain_attribute(value: Mapping[str, Any]) -> Any:
    """The plain Python value of one attribute in a stream image's typed JSON (``{"N": "12"}`` -> ``12``): ``S``
    str, ``N`` int (float when it has a fraction or exponent), ``B`` bytes (base64), ``BOOL``, ``NULL`` None,
    ``L`` list, ``M`` dict, ``SS``/``NS``/``BS`` sets. The same values as boto3's ``TypeDeserializer`` followed by
    ``layout.plain``, without the ``Decimal`` in between: a third of the archive function's time per batch
    (design §11). Raises ``ValueError`` for an unknown type or a malformed number."""
    [(kind, raw)] = value.items()
    if kind == "S":
        return raw
    if kind == "N":
        return _number(raw)
    if kind == "M":
        return {name: plain_attribute(item) for name, item in raw.items()}
    if kind == "L":
        return [plain_attribute(item) for item in raw]
    if kind == "BOOL":
        return bool(raw)
    if kind == "NULL":
        return None
    if kind == "B":
        return b64decode(raw)
    if kind == "SS":
        return set(raw)
    if kind == "NS":
        return {_number(item) for item in raw}
    if kind == "BS":
        return {b64decode(item) for item in raw}
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def _number(text: str) -> int | float:
    if "." in text or "e" in text or "E" in text:
        try:
            return plain(Decimal(text))  # type: ignore[no-any-return]
        except InvalidOperation as error:
            raise ValueError(f"malformed DynamoDB number {text!r}") from error
    return int(text)


def _by_ttl(record: Mapping[str, Any]) -> bool:
    identity = record.get("userIdentity") or {}
    return (
        record.get("eventName") == "REMOVE"
        and identity.get("type") == "Service"
        and identity.get("principalId") == TTL_PRINCIPAL
    )


def is_ttl_deletion(record: Mapping[str, Any]) -> bool:
    """True when stream ``record`` is a deletion by DynamoDB's TTL of an item that held a run (``status``)."""
    image = (record.get("dynamodb") or {}).get("OldImage") or {}
    return _by_ttl(record) and "status" in image


def is_audit_ttl_deletion(record: Mapping[str, Any]) -> bool:
    """True when stream ``record`` is a deletion by DynamoDB's TTL of an audit event (its key ``pk`` starts
    ``events#``, ``dynamodb.layout.events_pk``)."""
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    pk = (keys.get("pk") or {}).get("S")
    return _by_ttl(record) and isinstance(pk, str) and pk.startswith(EVENTS_PK_PREFIX)


class ExpiredRuns(NamedTuple):
    """What a stream batch holds for the archive: ``rows``, the run rows TTL deleted; ``ignored``, how many records
    were no TTL deletion of a run or an audit event; ``malformed``, the TTL deletions of a run or an audit event
    whose image is neither (missing key, unknown status or kind, unknown attribute type), each record whole as the
    stream gave it; ``events``, the audit events TTL deleted."""

    rows: list[RunRow]
    ignored: int
    malformed: list[Mapping[str, Any]]
    events: list[AuditEvent]


def expired_runs(records: Sequence[Mapping[str, Any]]) -> ExpiredRuns:
    """The run rows and audit events TTL deleted in stream ``records`` (a Lambda event's ``Records``, of the runs or
    the jobs table), how many records were ignored (neither) and the malformed ones. A malformed image fails
    nothing: failing the batch would leave its record in the stream (24 hours) as its only copy, so it is returned,
    to be kept whole (``domain.archive.quarantine_object``)."""
    rows: list[RunRow] = []
    events: list[AuditEvent] = []
    malformed: list[Mapping[str, Any]] = []
    for record in records:
        run = is_ttl_deletion(record)
        if not run and not is_audit_ttl_deletion(record):
            continue
        image = record["dynamodb"].get("OldImage") or {}
        try:
            values = {name: plain_attribute(value) for name, value in image.items()}
            if run:
                rows.append(run_row_of_plain(values))
            else:
                events.append(event_from_item(values))
        except (KeyError, ValueError, TypeError, AttributeError):
            malformed.append(record)
    return ExpiredRuns(rows, len(records) - len(rows) - len(events) - len(malformed), malformed, events)
