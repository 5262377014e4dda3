"""The due index's anti-entropy (pure): which due entries count as lost, so a store's repair pass files them
again, and where the new entry goes. One rule for every store: the DynamoDB adapter's ``refile_stuck`` (a
resumable Scan, ``jobsched.dynamodb.due_repair``), the SQLite one and the in-memory fake, held to agree by
``tests/contract/test_due_repair_contract.py``.

Instants are epoch ms (UTC); buckets and watermarks are due-index buckets (``position // bucket width``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeGuard

from jobsched.domain.registration import due_entry
from jobsched.ports.jobs import TIMER_LANES, DueEntry

STUCK_AFTER_MS = 30 * 60_000
"""How long (ms) past its due instant a job in a drained bucket waits before its entry is taken for lost: well
past the 10 minutes a new leader may re-read behind the watermark after an upgrade."""


def stuck_due_before(now_ms: int) -> int:
    """The due instant (epoch ms) an entry must be before, at ``now_ms``, to be taken for lost:
    ``now_ms - STUCK_AFTER_MS``. A store may pre-select its candidates by it (the DynamoDB Scan's filter); each
    candidate is then judged by :func:`is_stuck`."""
    return now_ms - STUCK_AFTER_MS


def is_stuck(due: DueEntry | None, *, now_ms: int, watermarks: Mapping[int, int]) -> TypeGuard[DueEntry]:
    """Whether the job whose current due entry is ``due`` (its scheduling state's, None: not in the due index)
    has a fire no tick will read, at ``now_ms``.

    True exactly when the entry is on a timer lane (:data:`~jobsched.ports.jobs.EARLY` or
    :data:`~jobsched.ports.jobs.LATE`; an :data:`~jobsched.ports.jobs.INDEX` entry is the layout migration's),
    is due before :func:`stuck_due_before` ``(now_ms)``, and sits in a bucket its partition has drained: below
    the partition's watermark in ``watermarks`` (partition -> watermark bucket, as stored; a partition missing
    from it is left alone). A job waiting in a backlog (a rush, an outage) is in an undrained bucket: not stuck.
    """
    return (
        due is not None
        and due.lane in TIMER_LANES
        and due.due_at < stuck_due_before(now_ms)
        and due.bucket < watermarks.get(due.partition, -1)
    )


def refiled_entry(due: DueEntry, *, now_ms: int, shards: int, bucket_ms: int) -> DueEntry:
    """The new entry of the stuck entry ``due``: same job, partition, due instant and version, filed as any
    writer files one at ``now_ms`` (``registration.due_entry``: the :data:`~jobsched.ports.jobs.LATE` lane at
    ``now_ms``, as it is past due) in one of the partition's current ``shards``, buckets ``bucket_ms`` wide. The
    tick reads it and judges it as any entry (the job's current fire, or stale if the job moved meanwhile)."""
    return due_entry(
        due.job_id,
        due.due_at,
        partition=due.partition,
        shards=shards,
        bucket_ms=bucket_ms,
        now_ms=now_ms,
        version=due.version,
        owner=due.owner,
        priority=due.priority,
    )


@dataclass(frozen=True)
class RefilePass:
    """What one pass of a store's ``refile_stuck`` did: items or states ``scanned``, the ids of the jobs
    ``refiled``, whether the pass reached the store's end (``wrapped``: the next pass starts over), and how many
    scheduling states among its candidates it could not read (``unreadable``, skipped)."""

    scanned: int
    refiled: list[str]
    wrapped: bool
    unreadable: int = 0
