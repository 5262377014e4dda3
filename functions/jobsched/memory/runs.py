"""The in-memory run store: the fake of the run port (``jobsched.ports.run_stores``: ``RunRows``, ``SweepRows`` and
the scheduler's and the API's inserts and reads). Its conditional writes are the run state machine's
(``jobsched.domain.run_states``), evaluated on the stored row, as the DynamoDB adapter renders them
(``tests/contract/`` runs the same cases on both).

Every write is atomic under one lock, as DynamoDB applies each conditional write atomically."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from jobsched.domain.run_steps import MappedRunStore
from jobsched.domain.runs import failed_page, sweep_shard
from jobsched.ports.runs import EVERY_RUN, RunFilter, RunKey, RunRow, SweepPage


class MemoryRunStore(MappedRunStore):
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
            rows = list(self._rows.values())
        return failed_page(rows, owner, limit, where, before)

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
