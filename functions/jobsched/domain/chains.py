"""Chains (design §2.1): the runs a run's end makes for the jobs that run after its job. Pure rules on ports.

A job with ``after: {"job": <upstream id>, "on": [...]}`` has no schedule of its own: each run of the upstream
that ends as ``on`` says (``After.fires_on``) makes one run of it, kind ``chained``, keyed ``(downstream job,
the upstream run's scheduled_for)`` and carrying ``upstream_run_id``. The key is the promise: the run is made by
the run store's conditional ``put_new``, so a redelivered outcome, the sweeper's repair, or an upstream run
re-run and ending again finds the row and makes nothing. A paused downstream job gets no run (paused means not
run); a skipped fire never ran and makes none.

Who makes them: the worker, right after it records the upstream run's end; the sweeper, from the run's row in
the sweep index, when the worker stopped in between. A run of a job with downstream jobs stays in the sweep
index through its end (``succeed`` with ``chain_sweep_at``; a ``dead`` run is there until notified) and leaves
it only after its downstream runs exist (``clear_sweep``, ``notified``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from jobsched.clock import Clock
from jobsched.domain.runs import new_run
from jobsched.models import Job, RunKind, RunStatus
from jobsched.ports.jobs import StoredJob
from jobsched.ports.limits import RunLimits
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.run_stores import RunSender
from jobsched.ports.runs import RunRow, run_id

logger = logging.getLogger(__name__)

MARK_FRESH_MS = 1_000
"""How long (ms) a job's chain mark read 0 is trusted at its run's end (``Chains.dependents_of``): about the
lag of DynamoDB's ``by_upstream`` index, which the read it saves would have gone through."""


class Dependents(Protocol):
    """A job's downstream jobs (``JobRepository.dependents``; raises ``StoreUnavailable``)."""

    def dependents(self, job_id: str) -> list[StoredJob]: ...


class ChainInserts(Protocol):
    """The run store's conditional insert (``RunWriter.put_new``: None when written, else the existing row) and
    ``clear_sweep`` (a finished run leaves the sweep index)."""

    def put_new(self, row: RunRow) -> RunRow | None: ...

    def clear_sweep(self, job_id: str, scheduled_for_ms: int) -> bool: ...


def chained_run(
    downstream: Job, upstream_job_id: str, upstream_scheduled_for: int, *, now_ms: int, settings: RunLimits
) -> RunRow:
    """The run of ``downstream`` that the end of run ``(upstream_job_id, upstream_scheduled_for)`` makes, saved
    at ``now_ms`` (epoch ms): keyed at the upstream run's ``scheduled_for``, dispatched at ``now_ms`` (so its
    lateness counts from its making), kind ``chained``, ``upstream_run_id`` set, in the sweep index until its
    message is claimed (the message goes after the row, as a manual run's), kept ``settings.retention_days``."""
    row = new_run(
        downstream.id,
        upstream_scheduled_for,
        now_ms=now_ms,
        retention_days=settings.retention_days,
        kind=RunKind.CHAINED,
        dispatch_at_ms=now_ms,
        sweep_after_ms=settings.sweep_queued_after_s * 1000,
        owner=downstream.owner,
    )
    return replace(row, upstream_run_id=run_id(upstream_job_id, upstream_scheduled_for))


@dataclass(kw_only=True, eq=False)
class Chains:
    """Makes chained runs (see the module docstring) on the job store ``jobs``, the run store ``runs`` and the
    run queue ``queue``; ``clock`` gives epoch ms; ``settings`` the retention and the sweeper's delay."""

    jobs: Dependents
    runs: ChainInserts
    queue: RunSender
    settings: RunLimits
    clock: Clock

    def dependents(self, job_id: str) -> list[StoredJob] | None:
        """The downstream jobs of ``job_id``, read before its run's outcome is written; None when the read
        failed (the outcome then keeps the run in the sweep index, as if it had some)."""
        try:
            return self.jobs.dependents(job_id)
        except Exception:
            logger.exception(
                "downstream jobs not read; the sweeper makes their runs", extra={"job_id": job_id}
            )
            return None

    def dependents_of(self, job: Job, read_at_ms: int | None) -> list[StoredJob] | None:
        """``dependents`` of ``job`` (as read at ``read_at_ms``, epoch ms; None: unknown) when they may exist: none
        (``[]``, no read) when its chain mark (``Job.downstream_count``) was 0 no longer than ``MARK_FRESH_MS``
        ago; otherwise read. So a job no other job runs after costs no read at its run's end, and a downstream
        job made while a run lasts longer than that is found by the read, as the index would find it."""
        if (
            job.downstream_count == 0
            and read_at_ms is not None
            and self.clock() - read_at_ms <= MARK_FRESH_MS
        ):
            return []
        return self.dependents(job.id)

    def sweep_at(self, dependents: Sequence[StoredJob] | None) -> int | None:
        """The ``chain_sweep_at`` of a succeeding run whose job has ``dependents`` (None: unknown): now plus the
        sweeper's delay; None when it has none (the run leaves the sweep index: no extra write)."""
        if dependents == []:
            return None
        return self.clock() + self.settings.sweep_queued_after_s * 1000

    def settle(
        self,
        job_id: str,
        scheduled_for: int,
        status: RunStatus,
        dependents: Sequence[StoredJob] | None = None,
        *,
        clear: bool = False,
    ) -> bool:
        """``follow`` the ended run ``(job_id, scheduled_for)``, then with ``clear`` take it out of the sweep index
        (a succeeded run kept there by ``chain_sweep_at``). True when its downstream runs are made; False when that
        failed (logged): the run stays in the sweep index and the sweeper makes them (a ``dead`` run's
        notifications then wait for the sweeper too)."""
        try:
            self.follow(job_id, scheduled_for, status, dependents)
        except Exception:
            logger.exception("downstream runs not made; the sweeper makes them", extra={"job_id": job_id})
            return False
        if clear:
            try:
                self.runs.clear_sweep(job_id, scheduled_for)
            except Exception:  # the sweeper finds the runs made and clears it
                logger.exception("ended run left in the sweep index", extra={"job_id": job_id})
        return True

    def follow(
        self,
        job_id: str,
        scheduled_for: int,
        status: RunStatus,
        dependents: Sequence[StoredJob] | None = None,
    ) -> int:
        """Make the downstream runs the end ``status`` of run ``(job_id, scheduled_for)`` asks for, and send
        their messages; ``dependents`` as read before (None: read them now). Returns how many were made (0 when
        each exists already). Idempotent. Raises the store's errors (``StoreUnavailable``): the caller leaves
        the upstream run in the sweep index, and the sweeper calls again. A refused send is logged: the row is
        ``queued`` in the sweep index, and the sweeper sends it."""
        if dependents is None:
            dependents = self.jobs.dependents(job_id)
        now = self.clock()
        made: list[RunRow] = []
        for stored in dependents:
            job = stored.job
            if job.after is None or job.after.job != job_id or job.paused or not job.after.fires_on(status):
                continue
            row = chained_run(job, job_id, scheduled_for, now_ms=now, settings=self.settings)
            if self.runs.put_new(row) is None:
                made.append(row)
        if made:
            try:
                self.queue.send(
                    [RunMessage(row.job_id, row.scheduled_for, enqueued_at=row.enqueued_at) for row in made]
                )
            except Exception:
                logger.exception(
                    "chained runs saved but not enqueued; the sweeper enqueues them",
                    extra={"runs": [row.run_id for row in made]},
                )
            logger.info(
                "chained runs made",
                extra={"upstream_run_id": run_id(job_id, scheduled_for), "runs": [r.run_id for r in made]},
            )
        return len(made)
