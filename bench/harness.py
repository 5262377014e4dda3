"""Shared set-up of the benchmarks: a quiet in-process moto with every resource, and jobs written fast.

Jobs are written as their items (``jobsched.dynamodb.layout.spec_item``/``sched_item``) with the table's
``batch_writer``, not through the API: the benchmarks measure the scheduler and the workers, and 20,000
registrations through the API would take longer than everything else together.
"""

from __future__ import annotations

import inspect
import math
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobsched.clock import from_ms, to_ms
from jobsched.models import CommandTarget, Job

T0 = to_ms(datetime(2026, 3, 2, 0, 0, tzinfo=UTC))
"""A midnight (UTC, a Monday): the simulated "now" the benchmarks start from (epoch ms)."""

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
QUIET_ENV = {
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
    "POWERTOOLS_SERVICE_NAME": "jobsched",
}


def quiet_environment() -> None:
    """Fake AWS credentials (nothing can reach a real account) and quiet Powertools (no EMF lines, errors
    only). Call before importing the handlers."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ.update(FAKE_AWS_ENV)
    os.environ.update(QUIET_ENV)
    from jobsched.observability import logger

    logger.setLevel("ERROR")


@dataclass
class Backend:
    """An in-process moto with every table, queue and topic of ``jobsched.resources``."""

    settings: Any  # jobsched.settings.Settings
    env: dict[str, str]

    @property
    def tables(self) -> dict[str, Any]:
        """Table name -> its ``jobsched.resources.TableDef``."""
        from jobsched.resources import TABLES

        return {self.env[t.env_var]: t for t in TABLES}


@contextmanager
def partition_scoped_queries() -> Iterator[None]:
    """While open, moto answers a Query on a table's own key (not an index) from that partition key's items
    only, as DynamoDB does, instead of sorting and filtering every item of the table (moto 5.2's
    ``Table.query`` iterates ``Table.all_items()``): the results, their order and paging are the same, only
    the cost per call stops growing with the table (a rush's Query took 9.8 s on a 30,000-item jobs table).
    Index queries are left as they are. Thread-safe: the scope is per calling thread."""
    from moto.dynamodb.models.table import Table

    original_query, original_all_items = Table.query, Table.all_items
    signature = inspect.signature(original_query)
    scope = threading.local()

    def all_items(self: Any) -> list[Any]:
        hash_key = getattr(scope, "hash_key", None)
        if hash_key is None:
            return original_all_items(self)
        found = self.items.get(hash_key)  # .get: the table's defaultdict must not grow an empty partition
        if not found:
            return []
        return sorted(found.values(), key=lambda item: item.range_key) if self.range_key_attr else [found]

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        if arguments.get("index_name"):
            return original_query(self, *args, **kwargs)
        scope.hash_key = arguments["hash_key"]
        try:
            return original_query(self, *args, **kwargs)
        finally:
            scope.hash_key = None

    Table.query, Table.all_items = query, all_items  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query, Table.all_items = original_query, original_all_items  # type: ignore[method-assign]


@contextmanager
def moto_backend(**settings: Any) -> Iterator[Backend]:
    """Start ``moto.mock_aws`` with :func:`partition_scoped_queries`, provision every resource, mark the jobs
    table's due index as timer items only (``JobStore.due_lanes``), and yield a ``Backend`` whose ``settings``
    carry the resource names plus ``settings`` overrides."""
    from moto import mock_aws

    from jobsched.aws.clients import Aws, provision
    from jobsched.dynamodb.due_index import LAYOUT_KEY
    from jobsched.settings import Settings

    quiet_environment()
    with mock_aws(), partition_scoped_queries():
        aws = Aws()
        env = provision(aws, prefix="bench")
        backend = Backend(
            Settings.model_validate({**{k.lower(): v for k, v in env.items()}, **settings}), env
        )
        # a deployment past the move to timer items (a new one is, once its sweeper found the old index empty for
        # five minutes): the ticks read the timer lanes only
        aws.table(backend.settings.jobs_table).put_item(Item={**LAYOUT_KEY, "timers_only": True})
        yield backend


def make_job(
    index: int,
    schedule: str,
    *,
    created_at_ms: int,
    input_bytes: int = 0,
    jitter_s: int = 0,
    prefix: str = "j_bench",
) -> Job:
    """A job with a no-op command target (``echo``) and, if ``input_bytes`` > 0, an ``input`` whose JSON is
    exactly that many bytes."""
    return Job(
        id=f"{prefix}{index:08d}",
        name=f"bench-{index}",
        owner="bench",
        schedule=schedule,
        target=CommandTarget(name="echo"),
        input=padded_input(input_bytes) if input_bytes else None,
        jitter_s=jitter_s,
        created_at=from_ms(created_at_ms),
        updated_at=from_ms(created_at_ms),
    )


def padded_input(size: int) -> dict[str, str]:
    """``{"pad": "xxx..."}`` whose compact JSON is ``size`` bytes (at least 12)."""
    return {"pad": "x" * max(0, size - len('{"pad":""}'))}


def sched_of(
    job: Job, settings: Any, *, now_ms: int, next_run_at_ms: int | None = None
) -> list[dict[str, Any]]:
    """The scheduling item the API would write for ``job`` at ``now_ms`` and the timer item of its due entry:
    first fire from the schedule (rates anchored at ``created_at``) unless ``next_run_at_ms`` is given."""
    from jobsched.dynamodb import layout

    return layout.state_items(state_of(job, settings, now_ms=now_ms, next_run_at_ms=next_run_at_ms))


def state_of(job: Job, settings: Any, *, now_ms: int, next_run_at_ms: int | None = None) -> Any:
    """The ``SchedulingState`` of :func:`sched_of` (for the stores that take states, not items)."""
    from jobsched.domain import registration

    if next_run_at_ms is None:
        return registration.register(job, settings=settings, now_ms=now_ms)
    return registration.scheduling_state(
        job,
        anchor_at_ms=registration.anchor_ms(job),
        next_run_at_ms=next_run_at_ms,
        partition=registration.partition_of(job.id, settings.scheduler_partitions),
        settings=settings,
        now_ms=now_ms,
    )


class NoTickMetrics:
    """A scheduler loop's tick-metrics sink that publishes nothing (the benchmarks read tick results)."""

    def record(self, result: Any) -> None:
        return None


def write_items(table: Any, items: Sequence[dict[str, Any]]) -> None:
    """Write ``items`` with the table's batch writer (25 per request)."""
    with table.batch_writer() as batch:
        for item in items:
            batch.put_item(Item=item)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return float(ordered[rank - 1])


def quantiles(values: Sequence[float]) -> dict[str, float | None]:
    """``{"p50", "p99", "max"}`` of ``values`` (None each when empty)."""
    return {
        "p50": percentile(values, 0.50),
        "p99": percentile(values, 0.99),
        "max": float(max(values)) if values else None,
    }
