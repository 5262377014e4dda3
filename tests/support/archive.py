"""Stream records as DynamoDB sends them to the archive function, and runs to fill them with."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeSerializer

from jobsched.dynamodb.layout import event_item, run_item, trigger_key_item
from jobsched.models import JobEventKind, RunKind, RunStatus
from jobsched.ports.jobs import AuditEvent
from jobsched.ports.runs import RunRow
from jobsched.ports.tries import TryRecord

DAY_MS = 86_400_000
T0 = 1_767_225_600_000
"""2026-01-01T00:00:00Z, epoch ms."""
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

_SERIALIZE = TypeSerializer()


def image(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` (plain values) in DynamoDB's typed JSON, as a stream record's ``OldImage`` holds it."""
    return {name: _SERIALIZE.serialize(value) for name, value in item.items()}


def stream_record(
    item: dict[str, Any],
    sequence: int,
    *,
    identity: dict[str, str] | None = TTL_IDENTITY,
    event: str = "REMOVE",
) -> dict[str, Any]:
    """A stream record of ``item`` (OLD_IMAGE view): a TTL deletion by default; ``identity`` None is a deletion
    by a caller, ``event`` another event name. Its ``Keys`` are the jobs table's (``pk``, ``sk``) when ``item``
    has them, else the runs table's."""
    key_names = ("pk", "sk") if "pk" in item else ("job_id", "scheduled_for")
    record: dict[str, Any] = {
        "eventID": f"e{sequence}",
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": image({name: item[name] for name in key_names}),
            "OldImage": image(item),
            "SequenceNumber": f"{sequence:021d}",
            "SizeBytes": 500,
            "StreamViewType": "OLD_IMAGE",
        },
    }
    if identity is not None:
        record["userIdentity"] = identity
    return record


def ttl_records(rows: list[RunRow], first_sequence: int = 1) -> list[dict[str, Any]]:
    """TTL deletion records of ``rows``, sequence numbers from ``first_sequence``."""
    return [stream_record(run_item(row), first_sequence + i) for i, row in enumerate(rows)]


def trigger_key_record(sequence: int) -> dict[str, Any]:
    """The TTL deletion of a manual trigger's key item (no run)."""
    return stream_record(
        trigger_key_item("j-1", "team-a", "key-1", scheduled_for_ms=T0, expires_at_s=T0 // 1000), sequence
    )


def finished_runs(
    count: int, *, owners: tuple[str, ...] = ("team-a", "team-b", "arn:aws:iam::1:role/c")
) -> list[RunRow]:
    """``count`` finished runs of three jobs per owner, one every six hours from ``T0`` (so they span months), every tenth
    dead after two tries, the others succeeded with one."""
    rows = []
    for i in range(count):
        owner = owners[i % len(owners)]
        at = T0 + i * 6 * 3_600_000
        dead = i % 10 == 0
        tries = (TryRecord(1, at + 5, at + 50, "w-1", "boom" if dead else None, "out"),) + (
            (TryRecord(2, at + 60_000, at + 60_100, "w-2", "boom"),) if dead else ()
        )
        rows.append(
            RunRow(
                job_id=f"{owner}-job-{i % 3}",
                scheduled_for=at,
                status=RunStatus.DEAD if dead else RunStatus.SUCCEEDED,
                kind=RunKind.SCHEDULED,
                attempt=len(tries),
                enqueued_at=at - 10,
                dispatch_at=at,
                started_at=tries[-1].started_at,
                finished_at=tries[-1].finished_at,
                lateness_ms=5,
                worker=tries[-1].worker,
                error="boom" if dead else None,
                owner=owner,
                term=3,
                expires_at_s=at // 1000 + 90 * 86_400,
                tries=tries,
            )
        )
    return rows


def audit_events(count: int) -> list[AuditEvent]:
    """``count`` audit events of three jobs, one every five days from ``T0`` (so they span months), pauses and
    resumes in turn, each kept 90 days."""
    return [
        AuditEvent(
            job_id=f"team-a-job-{i % 3}",
            at=T0 + i * 5 * DAY_MS,
            key=f"k{i}",
            kind=JobEventKind.PAUSED if i % 2 == 0 else JobEventKind.RESUMED,
            actor=f"arn:aws:iam::1:user/op{i % 2}",
            detail={"reason": f"maintenance {i}"} if i % 2 == 0 else {},
            expires_at=(T0 + i * 5 * DAY_MS) // 1000 + 90 * 86_400,
        )
        for i in range(count)
    ]


def audit_records(events: list[AuditEvent], first_sequence: int = 1) -> list[dict[str, Any]]:
    """TTL deletion records of ``events`` from the jobs table's stream, sequence numbers from ``first_sequence``."""
    return [stream_record(event_item(event), first_sequence + i) for i, event in enumerate(events)]
