"""The one place that creates the Powertools Logger and Metrics (no X-Ray SDK in the asset: no Tracer).

Log with keyword fields (``logger.info("run enqueued", job_id=..., run_id=...)``), not f-strings.
Metrics go out as CloudWatch EMF under the ``jobsched`` namespace.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

SERVICE = "jobsched"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="jobsched", service=SERVICE)


class MetricName:
    """Metric names (EMF, namespace ``jobsched``, dimension ``service=jobsched``); alarms in ``infra/`` use them."""

    RUNS_ENQUEUED = "RunsEnqueued"  # Count, per scheduler tick
    DISPATCH_LATENESS = "DispatchLatenessMs"  # Milliseconds, enqueue time minus dispatch instant
    SCHEDULER_LAG = "SchedulerLagMs"  # Milliseconds, age of the oldest due fire not yet enqueued
    RUNS_SKIPPED = "RunsSkipped"  # Count
    RUNS_SUCCEEDED = "RunsSucceeded"  # Count
    RUNS_RETRIED = "RunsRetried"  # Count
    RUNS_DEAD = "RunsDead"  # Count
    RUN_LATENESS = "RunLatenessMs"  # Milliseconds, started_at minus scheduled_for
    RUNS_SWEPT = "RunsSwept"  # Count, re-enqueued by the sweeper
