"""The in-memory run store: the fake of the run port (``jobsched.ports.runs``: ``RunRows``, ``SweepRows`` and
the scheduler's and the API's inserts and reads), with the DynamoDB adapter's conditional semantics
(``jobsched.store.runs.RunStore``; ``tests/contract/test_run_store_contract.py`` runs the same cases on both).

Every write is atomic under one lock, as DynamoDB applies each conditional write atomically."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobsched.models import RunStatus
from jobsched.ports.runs import (
    EVERY_RUN,
    FAILURE_STATUSES,
    Claim,
    KeyedInsert,
    Owned,
    RunFilter,
    RunKey,
    RunRow,
    SweepPage,
    sweep_shard,
)
from jobsched.ports.tries import Rerun, TryRecord

if TYPE_CHECKING:
    from jobsched.ports.runs import ClaimRequest, DeadTransition, RerunRequest, RetryTransition, SweepDeferral


def _failing(owned: Owned) -> dict[str, Any]:
    """A failure transition records the run's owner when the claim knows it (the DynamoDB adapter's index key)."""
    return {"owner": owned.owner} if owned.owner is not None else {}


class MemoryRunStore:
    """Run rows in a dict keyed by ``(job_id, scheduled_for)``; manual triggers' idempotency keys beside them.

    ``rows()`` returns every row (for tests). Never raises ``StoreUnavailable`` by itself: tests that need a
    storage failure replace a method."""

    def __init__(self) -> None:
        self._rows: dict[RunKey, RunRow] = {}
        self._keys: dict[tuple[str, str, str], int] = {}
        self._lock = threading.RLock()

    def rows(self) -> list[RunRow]:
        """Every row, by key."""
        with self._lock:
            return [self._rows[k] for k in sorted(self._rows)]

    def force(self, job_id: str, scheduled_for_ms: int, **changes: Any) -> RunRow:
        """Change fields of a row without any condition (for tests: another process's write, a crash's
        leftovers). Raises KeyError when there is no such row."""
        with self._lock:
            key = RunKey(job_id, scheduled_for_ms)
            self._rows[key] = replace(self._rows[key], **changes)
            return self._rows[key]

    # --- inserts and reads ---------------------------------------------------------------------

    def put_new(self, row: RunRow) -> RunRow | None:
        """Insert ``row`` unless its key exists: None when created, else the existing row."""
        with self._lock:
            existing = self._rows.get(row.key)
            if existing is None:
                self._rows[row.key] = row
            return existing

    def put_new_keyed(self, row: RunRow, *, owner: str, idempotency_key: str) -> KeyedInsert:
        """Insert ``row`` and bind ``owner``'s ``idempotency_key`` (for this job) to it, both or neither."""
        with self._lock:
            key = (row.job_id, owner, idempotency_key)
            if key in self._keys:
                return KeyedInsert(created=False, key_used=True, key_run_at=self._keys[key])
            existing = self._rows.get(row.key)
            if existing is not None:
                return KeyedInsert(created=False, existing=existing)
            self._rows[row.key] = row
            self._keys[key] = row.scheduled_for
            return KeyedInsert(created=True)

    def get(self, job_id: str, scheduled_for_ms: int) -> RunRow | None:
        with self._lock:
            return self._rows.get(RunKey(job_id, scheduled_for_ms))

    def list_for_job(
        self, job_id: str, limit: int, where: RunFilter = EVERY_RUN, before_ms: int | None = None
    ) -> tuple[list[RunRow], int | None]:
        """A page of the job's runs kept by ``where``, newest first, older than ``before_ms``."""
        with self._lock:
            rows = [r for r in self._rows.values() if r.job_id == job_id and where.matches(r)]
        rows = sorted(
            (r for r in rows if before_ms is None or r.scheduled_for < before_ms),
            key=lambda r: r.scheduled_for,
            reverse=True,
        )
        page = rows[:limit]
        return page, (page[-1].scheduled_for if len(rows) > limit else None)

    def list_failed(
        self, owner: str, limit: int, where: RunFilter = EVERY_RUN, before: tuple[int, str] | None = None
    ) -> tuple[list[RunRow], tuple[int, str] | None]:
        """The owner's rows in a failure status kept by ``where``, newest ``(scheduled_for, job_id)`` first."""
        with self._lock:
            rows = [r for r in self._rows.values() if r.owner == owner and r.status in FAILURE_STATUSES]
        rows = sorted(
            (
                r
                for r in rows
                if where.matches(r) and (before is None or (r.scheduled_for, r.job_id) < before)
            ),
            key=lambda r: (r.scheduled_for, r.job_id),
            reverse=True,
        )
        page = rows[:limit]
        return page, ((page[-1].scheduled_for, page[-1].job_id) if len(rows) > limit else None)

    def rows_between(self, job_id: str, first_ms: int, last_ms: int, limit: int) -> list[RunRow]:
        """The job's rows with ``first_ms <= scheduled_for <= last_ms``, oldest first, at most ``limit``."""
        with self._lock:
            rows = sorted(
                (
                    r
                    for r in self._rows.values()
                    if r.job_id == job_id and first_ms <= r.scheduled_for <= last_ms
                ),
                key=lambda r: r.scheduled_for,
            )
        return rows[:limit]

    # --- worker side ---------------------------------------------------------------------------

    def claim(self, request: ClaimRequest) -> Claim:
        """``queued``, or ``retrying`` due by ``retry_due_by_ms``, or ``running`` with a heartbeat older than
        ``stale_before_ms``, or (with ``create``) no row at all -> ``running`` under ``(attempt + 1, worker)``;
        a created row is ``create`` out of the sweep index, and the answer's ``before`` is ``create``."""
        create, worker, now_ms = request.create, request.worker, request.now_ms
        with self._lock:
            row = self._rows.get(request.key)
            if row is None and create is not None:
                fresh = replace(
                    create,
                    status=RunStatus.QUEUED,
                    attempt=0,
                    sweep_at=None,
                    worker=None,
                    started_at=None,
                    heartbeat_at=None,
                    lateness_ms=None,
                    retry_at=None,
                )
                self._rows[fresh.key] = self._claimed(fresh, worker, now_ms)
                return Claim(True, create)
            if row is None:
                return Claim(False, None)
            claimable = (
                row.status is RunStatus.QUEUED
                or (
                    row.status is RunStatus.RETRYING
                    and (row.retry_at is None or row.retry_at <= request.retry_due_by_ms)
                )
                or (
                    row.status is RunStatus.RUNNING
                    and row.heartbeat_at is not None
                    and row.heartbeat_at < request.stale_before_ms
                )
            )
            if not claimable:
                return Claim(False, row)
            self._rows[row.key] = self._claimed(row, worker, now_ms)
            return Claim(True, row)

    @staticmethod
    def _claimed(row: RunRow, worker: str, now_ms: int) -> RunRow:
        """``row`` claimed by ``worker`` at ``now_ms`` (see ``claim``)."""
        return replace(
            row,
            status=RunStatus.RUNNING,
            worker=worker,
            attempt=row.attempt + 1,
            started_at=now_ms,
            heartbeat_at=now_ms,
            lateness_ms=row.lateness_ms if row.lateness_ms is not None else now_ms - row.scheduled_for,
            retry_at=None,
        )

    def heartbeat(self, owned: Owned, *, now_ms: int) -> bool:
        return self._as_claim(owned, heartbeat_at=now_ms)

    def succeed(self, owned: Owned, *, now_ms: int, tries: tuple[TryRecord, ...] | None = None) -> bool:
        return self._as_claim(
            owned,
            status=RunStatus.SUCCEEDED,
            finished_at=now_ms,
            sweep_at=None,
            error=None,
            retry_at=None,
            **_tries(tries),
        )

    def retry(self, owned: Owned, change: RetryTransition) -> bool:
        return self._as_claim(
            owned,
            status=RunStatus.RETRYING,
            error=change.error,
            retry_at=change.retry_at_ms,
            sweep_at=change.sweep_at_ms,
            **_failing(owned),
            **_tries(change.tries),
        )

    def dead(self, owned: Owned, change: DeadTransition) -> bool:
        error, now_ms, notify_at_ms = change.error, change.now_ms, change.notify_at_ms
        final_attempt = change.final_attempt
        return self._as_claim(
            owned,
            status=RunStatus.DEAD,
            error=error,
            finished_at=now_ms,
            attempt=final_attempt,
            notify_pending=True,
            sweep_at=notify_at_ms,
            retry_at=None,
            **_failing(owned),
            **_tries(change.tries),
        )

    def notified(self, job_id: str, scheduled_for_ms: int) -> bool:
        return self._transition(
            job_id,
            scheduled_for_ms,
            lambda r: r.status is RunStatus.DEAD,
            notify_pending=False,
            sweep_at=None,
        )

    def give_back(self, owned: Owned, *, before: RunRow) -> bool:
        return self._as_claim(
            owned,
            status=before.status,
            attempt=before.attempt,
            worker=before.worker,
            started_at=before.started_at,
            heartbeat_at=before.heartbeat_at,
            retry_at=before.retry_at,
            lateness_ms=before.lateness_ms,
        )

    def watch(self, owned: Owned, *, sweep_at_ms: int) -> bool:
        ours = _ours(owned)
        return self._transition(
            owned.job_id,
            owned.scheduled_for,
            lambda r: ours(r) and r.sweep_at is None,
            sweep_at=sweep_at_ms,
        )

    def skip(self, owned: Owned, *, now_ms: int, reason: str) -> bool:
        return self._as_claim(
            owned,
            status=RunStatus.SKIPPED,
            error=reason,
            finished_at=now_ms,
            sweep_at=None,
            retry_at=None,
            **_failing(owned),
        )

    # --- sweeper side --------------------------------------------------------------------------

    def sweep_due(self, shard: int, now_ms: int, limit: int, cursor: Any = None) -> SweepPage:
        """Keys of shard ``shard`` with ``sweep_at <= now_ms``, oldest ``sweep_at`` first, ``limit`` a page;
        the cursor is the last ``(sweep_at, key)`` returned."""
        with self._lock:
            due = sorted(
                (r.sweep_at, r.key)
                for r in self._rows.values()
                if r.sweep_at is not None and r.sweep_at <= now_ms and sweep_shard(r.job_id) == shard
            )
        if cursor is not None:
            due = [entry for entry in due if entry > cursor]
        page = due[:limit]
        return SweepPage([key for _, key in page], page[-1] if len(due) > limit else None)

    def get_many(self, keys: Sequence[RunKey]) -> list[RunRow]:
        with self._lock:
            return [self._rows[k] for k in dict.fromkeys(RunKey(*k) for k in keys) if k in self._rows]

    def defer_sweep(self, deferral: SweepDeferral) -> bool:
        changes: dict[str, Any] = {"sweep_at": deferral.sweep_at_ms}
        if deferral.sweeps is not None:
            changes["sweeps"] = deferral.sweeps
        return self._transition(
            *deferral.key,
            lambda r: r.status is RunStatus(deferral.status) and r.sweep_at == deferral.seen_sweep_at,
            **changes,
        )

    def clear_sweep(self, job_id: str, scheduled_for_ms: int) -> bool:
        return self._transition(
            job_id,
            scheduled_for_ms,
            lambda r: (
                r.status in (RunStatus.SUCCEEDED, RunStatus.SKIPPED)
                or (r.status is RunStatus.DEAD and not r.notify_pending)
            ),
            sweep_at=None,
        )

    # --- re-runs (issue [2.6]) -------------------------------------------------------------------

    def rerun(self, request: RerunRequest) -> Rerun:
        """See ``RunHistory.rerun``: ``dead`` (notified) or ``skipped`` (one fire) -> ``queued``, a new round."""
        key_digest, now_ms, sweep_at_ms = request.key_digest, request.now_ms, request.sweep_at_ms
        with self._lock:
            row = self._rows.get(request.key)
            if row is None or not _rerunnable(row, summary=request.summary):
                return Rerun(False, row)
            self._rows[row.key] = replace(
                row,
                status=RunStatus.QUEUED,
                attempt=0,
                reruns=row.reruns + 1,
                rerun_key=key_digest,
                enqueued_at=now_ms,
                sweep_at=sweep_at_ms,
                worker=None,
                started_at=None,
                heartbeat_at=None,
                finished_at=None,
                retry_at=None,
                error=None,
                skipped_count=None,
                skipped_through=None,
            )
            return Rerun(True, self._rows[row.key])

    # --- helpers -------------------------------------------------------------------------------

    def _as_claim(self, owned: Owned, **changes: Any) -> bool:
        """Apply ``changes`` to ``owned``'s run if it is still running under that claim; False otherwise."""
        return self._transition(owned.job_id, owned.scheduled_for, _ours(owned), **changes)

    def _transition(
        self, job_id: str, scheduled_for_ms: int, condition: Callable[[RunRow], bool], **changes: Any
    ) -> bool:
        """Apply ``changes`` to the row if it exists and ``condition`` holds; False otherwise."""
        with self._lock:
            row = self._rows.get(RunKey(job_id, scheduled_for_ms))
            if row is None or not condition(row):
                return False
            self._rows[row.key] = replace(row, **changes)
            return True


def _rerunnable(row: RunRow, *, summary: bool = False) -> bool:
    """``RunHistory.rerun``'s condition: dead with its notifications out, or skipped and not a summary row
    (unless ``summary``)."""
    return (row.status is RunStatus.DEAD and not row.notify_pending) or (
        row.status is RunStatus.SKIPPED and (summary or row.skipped_count is None)
    )


def _tries(tries: tuple[TryRecord, ...] | None) -> dict[str, Any]:
    """The change of a transition's ``tries`` (none when None: left as stored)."""
    return {} if tries is None else {"tries": tries}


def _ours(owned: Owned) -> Callable[[RunRow], bool]:
    """Condition: running under the claim ``(attempt, worker)`` [with the heartbeat ``owned`` saw]."""
    return lambda r: (
        r.status is RunStatus.RUNNING
        and r.attempt == owned.attempt
        and r.worker == owned.worker
        and (owned.heartbeat_at is None or r.heartbeat_at == owned.heartbeat_at)
    )
