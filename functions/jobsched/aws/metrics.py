"""Powertools Metrics (EMF) adapters of the domain's metric ports."""

from __future__ import annotations

from jobsched.domain.tick_records import TickResult
from jobsched.observability import COUNT, MILLISECONDS, MetricName, add_labelled, add_metric, add_metrics
from jobsched.ports.lateness import LatenessLabels


class PowertoolsTickMetrics:
    """Publishes each tick through Powertools Metrics (EMF) and flushes, one EMF line per tick:
    ``RunsEnqueued`` (count), ``DispatchLatenessMs`` (one value per new run), ``SchedulerLagMs``, ``RunsSkipped``;
    and ``DispatchLatenessMs`` per run's labels (priority, owner or ``other``: ``add_labelled``), a line per labels.
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
        for labels, ms in result.labelled_lateness:
            add_labelled(MetricName.DISPATCH_LATENESS, MILLISECONDS, ms, labels)
        add_metrics(values, flush=True)  # thread-safe: local mode's worker and sweeper threads add meanwhile


class PowertoolsRunMetrics:
    """The ``RunMetrics`` port on Powertools Metrics (EMF): each event adds one value to the shared metric set
    (thread-safe, ``add_metric``), published at the invocation's flush (``@metrics.log_metrics``) or local mode's.
    """

    def run_late(self, lateness_ms: int, labels: LatenessLabels | None = None) -> None:
        add_metric(MetricName.RUN_LATENESS, MILLISECONDS, lateness_ms)
        if labels is not None:
            add_labelled(MetricName.RUN_LATENESS, MILLISECONDS, lateness_ms, labels)

    def run_succeeded(self) -> None:
        add_metric(MetricName.RUNS_SUCCEEDED, COUNT, 1)

    def run_skipped(self) -> None:
        add_metric(MetricName.RUNS_SKIPPED, COUNT, 1)

    def run_retried(self) -> None:
        add_metric(MetricName.RUNS_RETRIED, COUNT, 1)

    def run_dead(self) -> None:
        add_metric(MetricName.RUNS_DEAD, COUNT, 1)

    def runs_swept(self, count: int) -> None:
        add_metric(MetricName.RUNS_SWEPT, COUNT, count)
