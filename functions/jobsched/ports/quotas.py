"""Per-owner quota counters (design §4.11): the records the API's quota checks exchange with the job store.

An owner's *usage* is an aggregate the job store keeps in the same transaction as the job write that changes it
(create, an edit of the schedule or zone, delete): the owner's live jobs and the sum of their long-run fire
rates, in micro-fires per minute (``jobsched.domain.quotas.fire_rate``). Manual requests (triggers and backfills)
are counted per owner in fixed one-minute windows, each window's counter expiring after it. None of these is
written on the run path: the scheduler, the workers and the sweeper's run handling never read or write them.

Each job records the fire rate it is counted with (``Job.quota_rate``, written with the usage change): a job
written without usage (by a version without quotas) is uncounted until the recount (``QuotaRecount``, run by the
sweeper: ``jobsched.domain.quota_recount``) counts it, once; a delete takes away only what the job was counted
with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from jobsched.models import Job


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


@dataclass(frozen=True)
class RecountProgress:
    """Where the recount of uncounted jobs stands: ``cursor`` (the store's, opaque; None: the start) where the
    next page of the current round of reading the jobs starts; ``clean``: the round so far left no job it found
    uncounted; ``done``: a whole round was clean and settled (no pass is needed again); ``began_ms``: when the
    recount's first pass ran, ``round_ms``: when the current round began (epoch ms; None: not yet, or saved by a
    version that did not keep it)."""

    cursor: str | None = None
    clean: bool = True
    done: bool = False
    began_ms: int | None = None
    round_ms: int | None = None


class QuotaRecount(Protocol):
    """The recount of jobs written without quota usage (design §4.11; each job store implements it)."""

    def recount_progress(self) -> RecountProgress:
        """The stored progress (the start when none is stored)."""
        ...

    def save_recount_progress(self, progress: RecountProgress) -> None:
        """Store ``progress``."""
        ...

    def uncounted_jobs(self, cursor: str | None, limit: int) -> tuple[list[Job], str | None]:
        """The live jobs without ``Job.quota_rate`` among the next ``limit`` jobs read from ``cursor`` (None:
        the start; the page may be short, even empty, while more follow), and the cursor after them (None: the
        end of the jobs)."""
        ...

    def count_job(self, job: Job, rate: int) -> bool:
        """Count ``job`` in its owner's usage (+1 job, + ``rate`` micro-fires per minute) and set its
        ``quota_rate`` to ``rate``, in one write, only while it is live, uncounted and its ``updated_at`` is still
        ``job``'s (``rate`` is the rate of its schedule as read). True when it landed, False when the job changed
        (an edit counts it; a delete needs no count)."""
        ...
