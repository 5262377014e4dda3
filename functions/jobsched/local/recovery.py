"""What local mode recovers at start: the run-queue messages of the runs left unfinished by the last stop,
the move of a ``moto`` data dir's tables into a new SQLite database, and the refusal of a start that would
lose jobs created on ``moto`` after the data dir moved to SQLite."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer

from jobsched.dynamodb.layout import SPEC_SK
from jobsched.local.config import LocalConfig
from jobsched.local.state import STATE_FILE, Item
from jobsched.ports.run_messages import MAX_DELAY_S, RunMessage
from jobsched.ports.runs import RunRow

if TYPE_CHECKING:
    from jobsched.sqlite.database import Synchronous

_deserializer = TypeDeserializer()


def unfinished_messages(runs: list[Item], *, now_ms: int, heartbeat_stale_s: int) -> list[RunMessage]:
    """Run-queue messages for the unfinished runs of a restored runs table (low-level items).

    ``queued`` runs are sent for their dispatch instant, ``retrying`` ones for their ``retry_at``, and
    ``running`` ones (their worker died with the process) for when their heartbeat turns stale, the moment
    a worker may take them over; each delay is capped at SQS's 900 s (the sweeper covers the rest).
    """
    return _requeue(
        [{k: _deserializer.deserialize(v) for k, v in raw.items()} for raw in runs],
        now_ms=now_ms,
        heartbeat_stale_s=heartbeat_stale_s,
    )


def unfinished_row_messages(rows: list[RunRow], *, now_ms: int, heartbeat_stale_s: int) -> list[RunMessage]:
    """:func:`unfinished_messages` for run rows (the SQLite run store's ``unfinished()``)."""
    return _requeue(
        [{**dataclasses.asdict(r), "status": r.status.value} for r in rows],
        now_ms=now_ms,
        heartbeat_stale_s=heartbeat_stale_s,
    )


def _requeue(items: list[dict[str, Any]], *, now_ms: int, heartbeat_stale_s: int) -> list[RunMessage]:
    messages: list[RunMessage] = []
    for item in items:
        status = item.get("status")
        if status == "queued":
            at = item.get("dispatch_at") or item["scheduled_for"]
        elif status == "retrying":
            at = item.get("retry_at") or item.get("dispatch_at") or item["scheduled_for"]
        elif status == "running":
            beat = item.get("heartbeat_at") or item.get("started_at") or now_ms
            at = int(beat) + heartbeat_stale_s * 1000 + 1000
        else:
            continue
        delay = min(MAX_DELAY_S, max(0, math.ceil((int(at) - now_ms) / 1000)))
        messages.append(
            RunMessage(str(item["job_id"]), int(item["scheduled_for"]), delay, enqueued_at=now_ms)
        )
    return messages


def move_moto_state(
    sqlite_path: Path, saved: dict[str, list[Item]], *, synchronous: Synchronous, now_ms: int
) -> None:
    """Move the moto backend's saved tables into a new SQLite database at ``sqlite_path`` (``import_moto_state``),
    built in a file of its own and renamed into place once whole: a start killed midway leaves no database, so
    the next start moves the data dir again instead of serving what was moved before the kill."""
    from jobsched.sqlite.database import SqliteDatabase
    from jobsched.sqlite.migration import import_moto_state

    moving = sqlite_path.with_name(f".{sqlite_path.name}.moving")
    for leftover in (moving, moving.with_name(moving.name + "-wal"), moving.with_name(moving.name + "-shm")):
        leftover.unlink(missing_ok=True)  # a killed move's: started over
    staging = SqliteDatabase(moving, synchronous=synchronous)
    try:
        import_moto_state(staging, saved, now_ms=now_ms)
    finally:
        staging.close()  # the WAL folded into the file: the rename moves everything
    os.replace(moving, sqlite_path)


def refuse_jobs_only_on_moto(sqlite_path: Path, saved: dict[str, list[Item]], config: LocalConfig) -> None:
    """Refuse a SQLite start whose data dir's ``state.json`` (``saved``) holds live jobs the database at
    ``sqlite_path`` has never known: jobs created with ``--backend moto`` after the data dir moved to SQLite.
    Starting would rewrite the state file without them (only the moto-only tables stay in it), losing them from
    both files. Raises ``OSError`` naming the state file, how many jobs, and the two ways on (the CLI prints it
    as one line and exits 1)."""
    from jobsched.sqlite.database import SqliteDatabase

    specs = [i for i in saved.get("Jobs", []) if i.get("sk", {}).get("S") == SPEC_SK and "doc" in i]
    if not specs:
        return
    database = SqliteDatabase(sqlite_path, synchronous=config.sqlite_synchronous)
    try:
        only_on_moto = {str(i["pk"]["S"]).removeprefix("job#") for i in specs} - database.known_job_ids()
    finally:
        database.close()
    if only_on_moto:
        raise OSError(
            f"{config.data_dir / STATE_FILE} holds {len(only_on_moto)} job(s) created with --backend moto after this data"
            f" dir moved to SQLite (e.g. {min(only_on_moto)}); start with --backend moto to keep using them, or"
            " move state.json aside to start on SQLite without them"
        )
