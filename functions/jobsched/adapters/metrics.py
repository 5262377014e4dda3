"""Powertools Metrics (EMF) adapters of the domain's metric ports."""

from __future__ import annotations

from jobsched.domain.tick_records import TickResult
from jobsched.observability import MetricName, add_metrics


class PowertoolsTickMetrics:
    """Publishes each tick through Powertools Metrics (EMF) and flushes, one EMF line per tick:
    ``RunsEnqueued`` (count), ``DispatchLatenessMs`` (one value per new run), ``SchedulerLagMs``, ``RunsSkipped``.
    """

    def record(self, result: TickResult) -> None:
        values: list[tuple[str, str, float]] = [
            (MetricName.RUNS_ENQUEUED, "Count", result.enqueued),
            (MetricName.SCHEDULER_LAG, "Milliseconds", result.lag_ms),
        ]
        if result.skipped:
            values.append((MetricName.RUNS_SKIPPED, "Count", result.skipped))
        values.extend(
            (MetricName.DISPATCH_LATENESS, "Milliseconds", ms) for ms in result.dispatch_lateness_ms
        )
        add_metrics(values, flush=True)  # thread-safe: local mode's worker and sweeper threads add meanwhile
