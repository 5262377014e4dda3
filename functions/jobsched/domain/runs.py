"""The rules that make and place run rows: a new run, a re-run request, the claim of a run-queue message, the
round a message belongs to, the sweep-index shard of a job's runs and the page of an owner's failed runs.

Every instant is an int of epoch milliseconds (UTC) unless its name ends in ``_s`` (epoch seconds)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from jobsched.models import RunKind, RunStatus
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.run_stores import RunClaims
from jobsched.ports.runs import (
    FAILURE_STATUSES,
    SWEEP_SHARDS,
    Claim,
    ClaimRequest,
    RerunRequest,
    RunFilter,
    RunKey,
    RunRow,
)

if TYPE_CHECKING:
    from jobsched.ports.limits import RunLimits


def sweep_shard(job_id: str) -> int:
    """The sweep-index shard (0..``SWEEP_SHARDS``-1) of a job's runs: the first 8 bytes of the SHA-256 of the
    job id, big-endian, modulo ``SWEEP_SHARDS`` (stored rows carry it, so it never changes)."""
    return int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") % SWEEP_SHARDS


def retention_end_s(now_ms: int, retention_days: int) -> int:
    """The epoch second a run row saved (or re-run) at ``now_ms`` (epoch ms) expires: ``retention_days`` later
    (the row's ``expires_at_s``, the runs table's TTL)."""
    return now_ms // 1000 + retention_days * 86400


def new_run(
    job_id: str,
    scheduled_for_ms: int,
    *,
    now_ms: int,
    retention_days: int,
    status: RunStatus = RunStatus.QUEUED,
    kind: RunKind = RunKind.SCHEDULED,
    dispatch_at_ms: int | None = None,
    sweep_after_ms: int | None = 120_000,
    term: int | None = None,
    owner: str | None = None,
    skipped_count: int | None = None,
    skipped_through: int | None = None,
    error: str | None = None,
) -> RunRow:
    """A new run row saved at ``now_ms``, attempt 0, kept ``retention_days`` (``expires_at_s``).

    ``dispatch_at`` defaults to ``scheduled_for``. A ``skipped`` run is finished at once; any other enters the
    sweep index at ``now + sweep_after_ms`` (so the sweeper re-enqueues it if its message never comes), unless
    ``sweep_after_ms`` is None: a run whose message is its durable record (design §4.7) stays out of the index.
    """
    skipped = status is RunStatus.SKIPPED
    return RunRow(
        job_id=job_id,
        scheduled_for=scheduled_for_ms,
        status=status,
        kind=kind,
        attempt=0,
        enqueued_at=now_ms,
        dispatch_at=dispatch_at_ms if dispatch_at_ms is not None else scheduled_for_ms,
        finished_at=now_ms if skipped else None,
        error=error,
        owner=owner,
        term=term,
        skipped_count=skipped_count,
        skipped_through=skipped_through,
        sweep_at=None if skipped or sweep_after_ms is None else now_ms + sweep_after_ms,
        expires_at_s=retention_end_s(now_ms, retention_days),
    )


def failed_page(
    rows: Iterable[RunRow], owner: str, limit: int, where: RunFilter, before: tuple[int, str] | None
) -> tuple[list[RunRow], tuple[int, str] | None]:
    """``RunHistory.list_failed`` on ``rows`` (any rows; ``owner``'s in a failure status are kept): the page of
    those kept by ``where`` and older than ``before`` = ``(scheduled_for, job_id)``, newest first (ties by job
    id, descending), at most ``limit``; and the last row's ``(scheduled_for, job_id)`` when more follow, else
    None. For a store that reads the candidates and pages them itself."""
    kept = sorted(
        (
            r
            for r in rows
            if r.owner == owner
            and r.status in FAILURE_STATUSES
            and where.matches(r)
            and (before is None or (r.scheduled_for, r.job_id) < before)
        ),
        key=lambda r: (r.scheduled_for, r.job_id),
        reverse=True,
    )
    page = kept[:limit]
    return page, ((page[-1].scheduled_for, page[-1].job_id) if len(kept) > limit else None)


def rerun_request(
    key: RunKey,
    *,
    now_ms: int,
    sweep_at_ms: int,
    retention_days: int,
    key_digest: str | None = None,
    summary: bool = False,
) -> RerunRequest:
    """The re-run of run ``key`` at ``now_ms`` (epoch ms), kept ``retention_days`` from then (as ``new_run`` keeps a
    new row)."""
    return RerunRequest(
        key,
        now_ms=now_ms,
        sweep_at_ms=sweep_at_ms,
        expires_at_s=retention_end_s(now_ms, retention_days),
        key_digest=key_digest,
        summary=summary,
    )


def message_round_began(message: RunMessage, row: RunRow) -> bool:
    """Whether ``row``'s current round (its ``enqueued_at``, set when the row was made or re-run) had begun when
    ``message`` was sent (its ``enqueued_at``): the message may belong to that round. False only when both are
    known and the row's round began later: the message was sent for an earlier round (a re-run's or a backfill's
    row made after a letter of the same run was dead-lettered), and nothing it asked for is owed any more."""
    return message.enqueued_at is None or row.enqueued_at is None or row.enqueued_at <= message.enqueued_at


def claim_message(
    runs: RunClaims,
    message: RunMessage,
    *,
    worker: str,
    now_ms: int,
    retry_due_by_ms: int,
    settings: RunLimits,
    same_round: bool = False,
) -> Claim:
    """Claim the run of a run-queue ``message`` for ``worker`` at ``now_ms`` (epoch ms), as ``RunRows.claim``
    does: a running run counts as lost when its beat is older than ``settings.heartbeat_stale_s``; a scheduled
    run with no row yet gets one made from the message (its ``enqueued_at``, or ``now_ms``; its
    ``dispatch_at`` and ``term``), kept ``settings.retention_days`` and out of the sweep index. With
    ``same_round``, an existing row is claimed only in the round the message was sent for
    (``ClaimRequest.queued_by_ms`` = the message's ``enqueued_at``: see ``message_round_began``)."""
    create = new_run(
        message.job_id,
        message.scheduled_for,
        now_ms=message.enqueued_at if message.enqueued_at is not None else now_ms,
        retention_days=settings.retention_days,
        dispatch_at_ms=message.dispatch_at,
        sweep_after_ms=None,
        term=message.term,
    )
    stale_before_ms = now_ms - settings.heartbeat_stale_s * 1000
    return runs.claim(
        ClaimRequest(
            message.key,
            worker,
            now_ms,
            stale_before_ms,
            retry_due_by_ms,
            create,
            queued_by_ms=message.enqueued_at if same_round else None,
        )
    )
