"""The deployment's limits as the domain reads them: each a read-only view of the values one part needs.

``jobsched.settings.Settings`` (read from the environment at cold start) has every one of these values, so the
runtimes pass it as is; the domain names only what it reads, and a test may pass any object that has them.
"""

from __future__ import annotations

from typing import Protocol


class RunLimits(Protocol):
    """The timings runs are claimed, beaten, swept and kept under (the worker, the sweeper, the run claim)."""

    @property
    def heartbeat_interval_s(self) -> int:
        """Seconds between a running try's heartbeats."""
        ...

    @property
    def heartbeat_stale_s(self) -> int:
        """Seconds without a heartbeat after which a running run's worker counts as lost."""
        ...

    @property
    def sweep_queued_after_s(self) -> int:
        """Seconds a ``queued`` or due ``retrying`` run waits for its message before the sweeper re-enqueues it."""
        ...

    @property
    def worker_timeout_cap_s(self) -> int:
        """The largest ``timeout_s`` a try runs for (seconds)."""
        ...

    @property
    def retention_days(self) -> int:
        """Days a run row (and the job's overlap lock) is kept before the store may drop it."""
        ...


class DueLayout(Protocol):
    """How jobs are spread over scheduler partitions and the due index (job registration)."""

    @property
    def scheduler_partitions(self) -> int:
        """Scheduler partitions jobs hash into."""
        ...

    @property
    def due_shards(self) -> int:
        """Write shards per due-index bucket."""
        ...

    @property
    def due_bucket_s(self) -> int:
        """Width of a due-index time bucket (seconds)."""
        ...
