"""An archived run row in the API's run shape, for the clients that read the archive (``jobsched.client``, the
CLI): standard library only, so the client carries no domain module (the CDK provider's asset is the client)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["ARCHIVED_INSTANTS", "TRY_FIELDS", "archived_run", "epoch_ms_of", "iso_ms"]

TRY_FIELDS = ("attempt", "started_at", "finished_at", "worker", "error", "output", "round")
"""The fields of an archived try (``jobsched.ports.tries.TryRecord``'s), in their archived order."""

ARCHIVED_INSTANTS = (
    "scheduled_for",
    "enqueued_at",
    "dispatch_at",
    "started_at",
    "finished_at",
    "skipped_through",
)
"""The instants of an archived row (epoch ms) that the API's run shape writes as ISO 8601."""


def archived_run(row: dict[str, Any]) -> dict[str, Any]:
    """An archived row (``domain.archive.archive_row``'s shape, epoch ms) in the API's run shape: ``id``
    (``<job_id>@<scheduled_for ms>``), its instants as ISO 8601 UTC with milliseconds (``...Z``), the tries as
    archived, and ``archived`` as the row says (a row of the runs table in an archive answer: false), else true.
    Raises ``KeyError`` without ``job_id`` or ``scheduled_for``."""
    run = {name: value for name, value in row.items() if value is not None}
    run.update({name: iso_ms(run[name]) for name in ARCHIVED_INSTANTS if name in run})
    return {"id": f"{row['job_id']}@{row['scheduled_for']}", **run, "archived": run.get("archived", True)}


def iso_ms(epoch_ms: int) -> str:
    """``epoch_ms`` as ISO 8601 UTC with milliseconds (``2026-01-01T00:00:00.000Z``)."""
    return (
        datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def epoch_ms_of(text: str) -> int:
    """The epoch ms of an ISO 8601 instant with its offset (``Z`` included). Raises ``ValueError`` otherwise."""
    instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if instant.tzinfo is None:
        raise ValueError(f"{text!r} has no offset")
    return round(instant.timestamp() * 1000)
