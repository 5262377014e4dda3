"""Per-owner quota counters (design §4.11): the records the API's quota checks exchange with the job store.

An owner's *usage* is an aggregate the job store keeps in the same transaction as the job write that changes it
(create, an edit of the schedule or zone, delete): the owner's live jobs and the sum of their long-run fire
rates, in micro-fires per minute (``jobsched.domain.quotas.fire_rate``). Manual requests (triggers and backfills)
are counted per owner in fixed one-minute windows, each window's counter expiring after it. None of these is
written on the run path: the scheduler, the workers and the sweeper never read or write them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class UsageChange:
    """What a job write adds to its owner's usage: ``jobs`` (+1 create, -1 delete, 0 edit) and ``fire_rate``
    (micro-fires per minute, signed). ``limit_jobs`` and ``limit_fires_per_minute`` (fires per minute; None: not
    checked): the owner's limits the store checks in the write itself, against the usage it adds to, so that two
    concurrent writes cannot both take the last place (the store raises
    ``jobsched.domain.quotas.QuotaExceeded`` and writes nothing; ``domain.quotas.check_usage``)."""

    owner: str
    jobs: int
    fire_rate: int
    limit_jobs: int | None = None
    limit_fires_per_minute: float | None = None

    @property
    def empty(self) -> bool:
        """Whether the change adds nothing (an edit that keeps the fire rate)."""
        return self.jobs == 0 and self.fire_rate == 0


@dataclass(frozen=True)
class OwnerUsage:
    """An owner's stored usage: live ``jobs`` and the sum of their ``fire_rate`` (micro-fires per minute)."""

    jobs: int = 0
    fire_rate: int = 0


class QuotaCounters(Protocol):
    """The counters behind the API's quotas (each job store implements it on its own storage)."""

    def usage(self, owner: str) -> OwnerUsage:
        """The owner's stored usage (zeros when it has none). Strongly consistent."""
        ...

    def count_request(self, owner: str, window_ms: int, limit: int, expires_at_s: int) -> int | None:
        """Count one manual request (a trigger or a backfill) in the owner's window starting at ``window_ms``
        (epoch ms), unless the window already holds ``limit``: the window's count after it, or None when
        refused (nothing counted). ``expires_at_s`` (epoch s): when the store may drop the window's counter."""
        ...

    def requests_in(self, owner: str, window_ms: int) -> int:
        """How many manual requests the owner's window starting at ``window_ms`` holds (0 when none)."""
        ...
