"""Wiring of the scheduler loop to AWS (or moto): the one place that builds its adapters.

Shared by the scheduler Lambda handler (``jobsched.handlers.scheduler``) and local mode, which runs N
competing loops in threads, each built here with its own holder id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobsched.adapters.metrics import PowertoolsTickMetrics
from jobsched.adapters.queue import RunQueue
from jobsched.aws import Aws, CallBounds
from jobsched.clock import Clock
from jobsched.domain.lease import LeaderLease, new_holder_id
from jobsched.domain.loop import SchedulerGroup, SchedulerLoop, TickMetrics, adopted_partitions
from jobsched.domain.planning import TickLimits
from jobsched.domain.tick import Scheduler
from jobsched.settings import Settings
from jobsched.store.control import ControlStore
from jobsched.store.jobs import JobStore
from jobsched.store.runs import RunStore

SCHEDULER_CALLS = CallBounds(connect_timeout_s=1, read_timeout_s=2, max_attempts=2)
"""Bounds on each AWS call of the scheduler Lambda (DynamoDB and SQS answer in milliseconds): at most
2 x (1 s + 2 s) + 1 s of backoff = 7 s, instead of botocore's default (60 s connect and read timeouts,
several attempts). A slow call then fails the tick, which the next tick retries."""

STOP_BEFORE_MS = int(2 * SCHEDULER_CALLS.worst_case_s * 1000) + 1_000
"""The Lambda loop stops ticking (and releases its lease) once less than this remains before its timeout
(15 s): room for a call in flight and the lease release to take their longest (``SCHEDULER_CALLS``), plus
a second; the function's timeout (``infra.functions.SCHEDULER_TIMEOUT_S``) adds this to its minute of ticking."""


def build_scheduler_loop(
    settings: Settings,
    aws: Aws,
    partition: int,
    *,
    clock: Clock,
    sleep: Callable[[float], None] = time.sleep,
    holder: str | None = None,
    limits: TickLimits | None = None,
    tick_metrics: TickMetrics | None = None,
    adopted: bool = False,
) -> SchedulerLoop:
    """A scheduler loop for ``partition`` (0 <= partition < ``settings.scheduler_partitions``, or above when
    ``adopted``) on the tables and queue named by ``settings``. ``holder`` is the lease contender id (default:
    host, pid and a random suffix); ``tick_metrics`` defaults to Powertools EMF. Raises ValueError for a
    partition out of range."""
    scheduler = Scheduler(
        adopted=adopted,
        partition=partition,
        jobs=JobStore(aws.table(settings.jobs_table)),
        runs=RunStore(aws.table(settings.runs_table)),
        queue=RunQueue(aws.sqs, settings.run_queue_url),
        control=ControlStore(aws.dynamodb, settings.control_table),
        settings=settings,
        clock=clock,
        limits=limits,
    )
    lease = LeaderLease(
        ControlStore(aws.dynamodb, settings.control_table),
        partition,
        holder or new_holder_id(),
        clock=clock,
        ttl_ms=int(settings.lease_ttl_s * 1000),
    )
    return SchedulerLoop(
        scheduler,
        lease,
        clock=clock,
        sleep=sleep,
        tick_metrics=tick_metrics if tick_metrics is not None else PowertoolsTickMetrics(),
    )


def build_scheduler_group(
    settings: Settings,
    aws: Aws,
    partition: int,
    *,
    clock: Clock,
    sleep: Callable[[float], None] = time.sleep,
    holder: str | None = None,
    limits: TickLimits | None = None,
    tick_metrics: TickMetrics | None = None,
) -> SchedulerGroup:
    """The loops the process serving ``partition`` runs: that partition's, and one for each partition it adopts
    because a deployment with more partitions ran before, or an API already created jobs for more
    (``adopted_partitions``; the high-water mark is kept in the CONTROL table: 1 request, plus a one-off scan of
    the due index when a deployment from before the mark first runs this code). Raises ValueError for a
    partition out of range."""
    control = ControlStore(aws.dynamodb, settings.control_table)
    high_water, missing = control.raise_partition_high_water(settings.scheduler_partitions)
    if missing:  # a deployment from before the mark: its jobs tell how many partitions it ran
        highest = JobStore(aws.table(settings.jobs_table)).highest_due_partition()
        if highest is not None and highest + 1 > high_water:
            high_water, _ = control.raise_partition_high_water(highest + 1)
    partitions = [partition, *adopted_partitions(partition, settings.scheduler_partitions, high_water)]
    return SchedulerGroup(
        [
            build_scheduler_loop(
                settings,
                aws,
                p,
                clock=clock,
                sleep=sleep,
                holder=holder,
                limits=limits,
                tick_metrics=tick_metrics,
                adopted=p != partition,
            )
            for p in partitions
        ]
    )


class SchedulerEvent(BaseModel):
    """The scheduler function's event: ``{"partition": n}`` (the EventBridge rule's constant input). Other
    fields (a raw scheduled event) are ignored; a missing partition means 0."""

    model_config = ConfigDict(extra="ignore")

    partition: int = Field(0, ge=0, le=255)


@dataclass(frozen=True)
class Runtime:
    """What an invocation runs on: settings, AWS clients, the clock (epoch ms) and sleep (seconds)."""

    settings: Settings
    aws: Aws
    clock: Clock
    sleep: Callable[[float], None]


def serve_invocation(event: dict[str, Any], context: Any, runtime: Runtime) -> dict[str, int]:
    """Run the scheduler loop of the event's partition until ``STOP_BEFORE_MS`` before the invocation's
    timeout (``context.get_remaining_time_in_millis()``), then release the lease so the next invocation
    (EventBridge starts one each minute) takes over. Partitions it adopts are served in the same loop.
    Returns ``{"partition", "iterations", "ticks",
    "enqueued", "skipped", "aborted_ticks"}``. Raises pydantic ValidationError for a malformed event."""
    partition = SchedulerEvent.model_validate(event or {}).partition
    loop = build_scheduler_group(
        runtime.settings,
        runtime.aws,
        partition,
        clock=runtime.clock,
        sleep=runtime.sleep,
        holder=new_holder_id(getattr(context, "aws_request_id", None)),
    )
    report = loop.run(lambda: context.get_remaining_time_in_millis() > STOP_BEFORE_MS)
    return {"partition": partition, **report.as_dict()}
