"""The one place that creates the Powertools Logger and Metrics (no X-Ray SDK in the asset: no Tracer).

Log with keyword fields (``logger.info("run enqueued", job_id=..., run_id=...)``), not f-strings. The domain
logs through the standard library instead (``logging.getLogger(__name__)``, fields in ``extra={...}``): its
loggers (``jobsched.domain.*``) are children of this Logger's (``jobsched``, the service name), so their records
take its level and go out through its handler as the same JSON lines, with the same appended keys, and local
mode's redirection of that handler covers them too.
Metrics go out as CloudWatch EMF under the namespace ``NAMESPACE`` (the stack name in AWS, ``jobsched`` locally).

Metrics are added from several threads at once: the records of a worker batch run concurrently, and local
mode runs the scheduler, worker pollers and sweeper as threads of one process sharing this ``metrics``
object. Powertools' metric set is a plain dict updated read-modify-write, and a flush serializes it then
clears it, so unguarded, two threads adding the first value of a metric at once keep one, and a value added
during a flush is cleared without being published. Hence one module lock (``METRICS_LOCK``) around every
change and flush of the set: code adds through ``add_metric``/``add_metrics`` and flushes through
``flush_metrics``; the provider behind ``metrics`` takes the same lock, so the ``@metrics.log_metrics``
decorators' end-of-invocation flush is guarded too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from jobsched.ports.lateness import LatenessLabels

SERVICE = "jobsched"
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "jobsched"
"""CloudWatch namespace of the metrics: the deployment's (the CDK stack sets ``POWERTOOLS_METRICS_NAMESPACE``
to the stack name, so two stacks of one account stay apart), ``jobsched`` where it is unset (local mode)."""

METRICS_LOCK = threading.RLock()
"""Guards Powertools' shared metric set (reentrant: a flush may run inside ``add_metric`` at 100 values)."""


class ThreadSafeEMFProvider(AmazonCloudWatchEMFProvider):
    """Powertools' CloudWatch EMF provider with every change, serialization and flush of its metric,
    dimension and metadata sets under ``METRICS_LOCK`` (Powertools itself does not lock them); its flush also
    publishes, and its clear drops, the labelled values (``add_labelled``)."""

    def add_metric(self, *args: Any, **kwargs: Any) -> None:
        with METRICS_LOCK:
            super().add_metric(*args, **kwargs)

    def add_dimension(self, name: str, value: str) -> None:
        with METRICS_LOCK:
            super().add_dimension(name, value)

    def add_metadata(self, key: str, value: Any) -> None:
        with METRICS_LOCK:
            super().add_metadata(key, value)

    def serialize_metric_set(self, *args: Any, **kwargs: Any) -> Any:
        with METRICS_LOCK:
            return super().serialize_metric_set(*args, **kwargs)

    def clear_metrics(self) -> None:
        with METRICS_LOCK:
            super().clear_metrics()
            _LABELLED.clear()

    def flush_metrics(self, raise_on_empty_metrics: bool = False) -> None:
        with METRICS_LOCK:
            _flush_labelled()  # first: the set's flush ends by clearing (``clear_metrics``)
            super().flush_metrics(raise_on_empty_metrics=raise_on_empty_metrics)


def _thread_safe_metrics() -> Metrics:
    """Powertools ``Metrics`` whose provider is a ``ThreadSafeEMFProvider`` over the same shared sets."""
    shared = Metrics(namespace=NAMESPACE, service=SERVICE)
    shared.provider = ThreadSafeEMFProvider(
        metric_set=shared.metric_set,
        dimension_set=shared.dimension_set,
        namespace=NAMESPACE,
        metadata_set=shared.metadata_set,
        service=SERVICE,
        default_dimensions=shared.default_dimensions,
    )
    return shared


logger = Logger(service=SERVICE)
metrics = _thread_safe_metrics()


def add_metric(name: str, unit: MetricUnit | str, value: float) -> None:
    """Add one value of metric ``name`` (a ``MetricName``) in ``unit`` (``MetricUnit``, e.g. Count,
    Milliseconds) to the set the next flush publishes; safe from any thread (under ``METRICS_LOCK``).
    Raises Powertools' ``MetricUnitError``/``MetricValueError`` on a bad unit or a non-numeric value."""
    with METRICS_LOCK:
        metrics.add_metric(name=name, unit=unit, value=value)


def add_metrics(values: Iterable[tuple[str, MetricUnit | str, float]], *, flush: bool = False) -> None:
    """Add several ``(name, unit, value)`` at once and, with ``flush``, publish the set at once (one EMF
    line, and the labelled values' lines: ``add_labelled``): no other thread's values or flush come between them.
    Safe from any thread."""
    with METRICS_LOCK:
        for name, unit, value in values:
            metrics.add_metric(name=name, unit=unit, value=value)
        if flush:
            metrics.flush_metrics()


_LABELLED: dict[LatenessLabels, list[tuple[str, MetricUnit | str, float]]] = {}
"""The values added under labels since the last flush (``add_labelled``), per labels; under ``METRICS_LOCK``."""


def add_labelled(name: str, unit: MetricUnit | str, value: float, labels: LatenessLabels) -> None:
    """Add one value of metric ``name`` under the dimensions ``priority`` and ``owner`` of ``labels`` (bounded:
    ``jobsched.domain.lateness``), published at the next flush (the shared set's) as one EMF line per labels with
    two dimension sets, ``[service, priority, owner]`` and ``[service, priority]`` (the priority's figures over
    every owner). Safe from any thread."""
    with METRICS_LOCK:
        _LABELLED.setdefault(labels, []).append((name, unit, value))


def _flush_labelled() -> None:
    """Publish the labelled values (one EMF line per labels and 100 values) and clear them; under the lock."""
    with METRICS_LOCK:
        groups = list(_LABELLED.items())
        _LABELLED.clear()
        for labels, values in groups:
            line = AmazonCloudWatchEMFProvider(namespace=NAMESPACE, service=SERVICE)
            line.add_dimension("service", SERVICE)
            line.add_dimension("priority", labels.priority)
            line.add_dimension("owner", labels.owner)
            line.add_dimensions(service=SERVICE, priority=labels.priority)
            for name, unit, value in values:
                line.add_metric(name=name, unit=unit, value=value)
            if line.metric_set:
                line.flush_metrics()


def flush_metrics() -> None:
    """Publish the metrics added so far (one EMF line on stdout, and one per labels: ``add_labelled``) and clear
    them; safe from any thread."""
    with METRICS_LOCK:
        metrics.flush_metrics()


COUNT = "Count"
"""The unit of a count metric (Powertools' ``MetricUnit.Count`` as its string), for callers that do not import
Powertools (the domain)."""
MILLISECONDS = "Milliseconds"
"""The unit of a duration metric in ms (``MetricUnit.Milliseconds``)."""


class MetricName:
    """Metric names (EMF, namespace ``NAMESPACE``, dimension ``service=jobsched``); alarms in ``infra/`` use them.
    ``DispatchLatenessMs`` and ``RunLatenessMs`` are also published per ``priority`` and per ``priority`` and
    ``owner`` (the top owners by backlog by name, the rest as ``other``: ``add_labelled``)."""

    RUNS_ENQUEUED = "RunsEnqueued"  # Count, per scheduler tick
    DISPATCH_LATENESS = "DispatchLatenessMs"  # Milliseconds, enqueue time minus dispatch instant
    SCHEDULER_LAG = "SchedulerLagMs"  # Milliseconds, age of the oldest due fire not yet enqueued
    RUNS_SKIPPED = "RunsSkipped"  # Count
    RUNS_SUCCEEDED = "RunsSucceeded"  # Count
    RUNS_RETRIED = "RunsRetried"  # Count
    RUNS_DEAD = "RunsDead"  # Count
    RUN_LATENESS = "RunLatenessMs"  # Milliseconds, started_at minus scheduled_for
    RUNS_SWEPT = "RunsSwept"  # Count, re-enqueued by the sweeper
    # Count, scheduler partitions with no leader, each minute (the sweeper)
    PARTITIONS_WITHOUT_LEADER = "PartitionsWithoutLeader"
    JOBS_REFILED = "JobsRefiled"  # Count, jobs found stuck (their timer item lost) and given a new one
    ARCHIVE_ROWS = "ArchiveRows"  # Count, expired runs a stream batch archived (the archive function)
    ARCHIVE_SPILLED = (
        "ArchiveSpilled"  # Count, archive objects kept in the spill queue (the bucket refused them)
    )
    # Count, TTL-deleted run images that are no run row, kept whole under quarantine/ of the archive bucket
    ARCHIVE_QUARANTINED = "ArchiveQuarantined"
