"""Quotas per owner at the API (design §4.11): what a create, an edit, a delete adds to the owner's usage, the
refusals over a limit, the manual-request windows, and ``GET /limits``.

``Quotas`` reads the deployment's ``quotas`` setting (``jobsched.domain.quotas.QuotaTable``) and the owner's
stored usage (``jobsched.ports.quotas.QuotaCounters``, kept by the job store in the job write's own transaction),
and applies the rules of ``jobsched.domain.quotas``. A check reads the usage, and the write that adds to it
carries the limits (``UsageChange.limit_jobs``, ``limit_fires_per_minute``), which the store checks again in
the same transaction: of two concurrent creates of one owner at its last free place, one is refused. Nothing
here runs for a scheduled fire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from pydantic import BaseModel, Field

from jobsched.clock import Clock
from jobsched.domain.quotas import (
    OwnerQuota,
    QuotaTable,
    check_fire_rate,
    check_jobs,
    count_change,
    job_fire_rate,
    per_minute,
    request_refused,
    window_of,
)
from jobsched.models import Job, JobSettings
from jobsched.ports.quotas import OwnerUsage, QuotaCounters, UsageChange

T = TypeVar("T")

WINDOW_KEPT_S = 120
"""Seconds a request window's counter is kept after its window starts (its TTL): the window and one more."""


class QuotaUse(BaseModel):
    """One quota: its ``limit`` (null: none) and the owner's ``use`` now."""

    limit: float | None = Field(description="the owner's limit; null: no limit")
    use: float = Field(description="the owner's use now")


class Limits(BaseModel):
    """``GET /limits``: the caller's quotas and use (design §4.11)."""

    owner: str = Field(description="the caller's owner")
    jobs: QuotaUse = Field(description="live jobs")
    fires_per_minute: QuotaUse = Field(
        description="fires per minute summed over the owner's schedules (each its long-run average; paused jobs "
        "included, one-offs 0)"
    )
    triggers_per_minute: QuotaUse = Field(description="manual triggers and backfills in the current minute")
    runs_in_flight: None = Field(
        None, description="not limited: a limit would cost a write per run (design §4.11)"
    )


def _rate_of(job: JobSettings) -> int:
    """The job's fire rate (micro-fires per minute, ``job_fire_rate``)."""
    return job_fire_rate(job.schedule, job.timezone)


@dataclass(frozen=True)
class Quotas:
    """The API's quota checks on ``counters`` under ``table`` (``Settings.quotas``); ``clock`` in epoch ms.
    Without ``counters`` (a service on stores that keep no usage) nothing is checked or counted."""

    table: QuotaTable
    counters: QuotaCounters | None
    clock: Clock

    def quota(self, owner: str) -> OwnerQuota:
        """The owner's limits (``QuotaTable.for_owner``)."""
        return self.table.for_owner(owner)

    def for_create(self, owner: str, job: Job) -> tuple[Job, UsageChange | None]:
        """The new job counted (``Job.quota_rate``: its fire rate) and what it adds to the owner's usage (one
        job, its fire rate: ``count_change``), checked against the owner's ``jobs`` and ``fires_per_minute``.
        Raises ``QuotaExceeded``."""
        if self.counters is None:
            return job, None
        quota, use, rate = self.quota(owner), self.counters.usage(owner), _rate_of(job)
        check_jobs(owner, quota, use.jobs, 1)
        check_fire_rate(owner, quota, use.fire_rate, rate)
        change = count_change(owner, None, rate)
        limited = replace(change, limit_jobs=quota.jobs, limit_fires_per_minute=quota.fires_per_minute)
        return job.model_copy(update={"quota_rate": rate}), limited

    def for_change(self, owner: str, current: Job, changed: Job) -> tuple[Job, UsageChange | None]:
        """The edited job counted and what the edit adds to the owner's usage (``count_change``): None when a
        counted job keeps its schedule and zone; the move from the rate it was counted with to its new one; an
        uncounted job (``current.quota_rate`` None) counted whole. Checked against ``fires_per_minute`` when the
        edit raises the job's rate (over what it is, or would be, counted with). Raises ``QuotaExceeded``."""
        kept = (current.schedule, current.timezone) == (changed.schedule, changed.timezone)
        if self.counters is None or (kept and current.quota_rate is not None):
            return changed.model_copy(update={"quota_rate": current.quota_rate}), None
        rate = _rate_of(changed)
        counted = changed.model_copy(update={"quota_rate": rate})
        change = count_change(owner, current.quota_rate, rate)
        held = current.quota_rate if current.quota_rate is not None else _rate_of(current)
        if rate <= held:
            return counted, change
        limit = self.quota(owner).fires_per_minute
        check_fire_rate(owner, self.quota(owner), self.counters.usage(owner).fire_rate, change.fire_rate)
        return counted, replace(change, limit_fires_per_minute=limit)

    def for_delete(self, owner: str, job: Job) -> UsageChange | None:
        """What a delete takes away: what the job was counted with (``count_change``; None for a job never
        counted, or without counters). Never refused."""
        if self.counters is None or job.quota_rate is None:
            return None
        return count_change(owner, job.quota_rate, None)

    def counted(self, owner: str, request: Callable[[], T]) -> T:
        """Count one manual request (a trigger or a backfill) in the owner's current minute, then make it.
        Raises ``QuotaExceeded`` (``triggers_per_minute``, with the seconds to the next window) when the window
        holds the owner's limit: nothing is made then."""
        limit = self.quota(owner).triggers_per_minute
        if limit is not None and self.counters is not None:
            now_ms = self.clock()
            window = window_of(now_ms)
            if self.counters.count_request(owner, window, limit, window // 1000 + WINDOW_KEPT_S) is None:
                raise request_refused(owner, limit, now_ms)
        return request()

    def limits(self, owner: str) -> Limits:
        """The owner's quotas and use now (zeros without counters). A minute's manual requests are counted only
        while the owner has a ``triggers_per_minute`` limit."""
        quota = self.quota(owner)
        use = self.counters.usage(owner) if self.counters else OwnerUsage()
        requests = self.counters.requests_in(owner, window_of(self.clock())) if self.counters else 0
        return Limits(
            owner=owner,
            jobs=QuotaUse(limit=quota.jobs, use=use.jobs),
            fires_per_minute=QuotaUse(limit=quota.fires_per_minute, use=per_minute(use.fire_rate)),
            triggers_per_minute=QuotaUse(limit=quota.triggers_per_minute, use=requests),
        )


__all__ = ["Limits", "QuotaUse", "Quotas"]
