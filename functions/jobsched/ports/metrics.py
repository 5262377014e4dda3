"""The metrics port: what the worker and the sweeper count of runs (design §8), and where it goes."""

from __future__ import annotations

from typing import Protocol

from jobsched.ports.lateness import LatenessLabels


class RunMetrics(Protocol):
    """Where the worker and the sweeper report what happened to runs: one call per event, from any thread
    (``jobsched.aws.metrics.PowertoolsRunMetrics`` publishes them as CloudWatch EMF metrics, named in
    ``jobsched.observability.MetricName``). Raises nothing the caller must handle."""

    def run_late(self, lateness_ms: int, labels: LatenessLabels | None = None) -> None:
        """A run's first try started ``lateness_ms`` (ms, >= 0) after its ``scheduled_for`` (``RunLatenessMs``;
        also under ``labels``' priority and owner when its message carried them)."""
        ...

    def run_succeeded(self) -> None:
        """A run succeeded (``RunsSucceeded``, count 1)."""
        ...

    def run_skipped(self) -> None:
        """A run was recorded ``skipped`` by the worker (``RunsSkipped``, count 1)."""
        ...

    def run_retried(self) -> None:
        """A failed try left its run ``retrying`` (``RunsRetried``, count 1)."""
        ...

    def run_dead(self) -> None:
        """A run ended ``dead`` (``RunsDead``, count 1)."""
        ...

    def runs_swept(self, count: int) -> None:
        """One sweeper pass re-enqueued or took over ``count`` (> 0) runs (``RunsSwept``)."""
        ...
