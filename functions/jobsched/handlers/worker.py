"""Worker Lambda: SQS batches from the run queue, one record per run, partial batch failure reporting
(Powertools ``AsyncBatchProcessor``; the event source mapping needs ``ReportBatchItemFailures``). The
per-record logic is ``jobsched.domain.worker.Worker.handle`` (of ``adapters.queue.delivery_of(record)``);
local mode's worker pool calls this same handler with SQS event dicts (records with ``messageId``,
``receiptHandle``, ``body``, ``attributes``, ``eventSourceARN``) and a context object carrying
``aws_request_id`` and the other Lambda context fields.

The records of a batch run concurrently, each in its own thread: a run waits for no other run's target
(run k of a batch of 10 starts as early as run 1: "starts within seconds"), and every record is claimed
at the start of the invocation, with the whole invocation's time left for its try. Powertools'
``AsyncBatchProcessor`` gathers the records and builds the ``batchItemFailures`` response; each record's
(blocking) handler runs in a thread pool of the calling thread sized to the batch (``record_pool``),
whose threads are kept across invocations with their per-thread ``Worker`` (boto3 clients built once).
A record whose invocation has too little time left is handed back unclaimed (``jobsched.worker.Deferred``):
a batch item failure, its message visible again at once.

AWS requests per run (the target's own call, e.g. the Lambda invoke of a ``lambda`` target, not counted):
- success path: 3 = claim (UpdateItem) + job spec (GetItem) + succeed (UpdateItem); 4 with
  ``overlap: skip`` (+1 Query for a running run). The message is deleted by the event source mapping.
- while a try runs: +2 per ``heartbeat_interval_s`` (30 s): UpdateItem + ChangeMessageVisibility.
- failed try with attempts left: 4 = claim + spec + retrying (UpdateItem) + retry message (SendMessageBatch).
- last failed try: 6 = claim + spec + dead (UpdateItem) + dead-run SendMessage + SNS Publish + UpdateItem.
- duplicate delivery: 1 (the refused claim).
- handed back for lack of time (rare: never at the start of an invocation with the deployment's limits):
  2 = job spec (GetItem) + ChangeMessageVisibility, then the redelivery's own path.
Counted in ``tests/integration/worker/test_request_count.py``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from jobsched.adapters.alerts import DeadRunNotifier
from jobsched.adapters.queue import RunQueue, delivery_of
from jobsched.aws import Aws, new_session
from jobsched.clock import Clock, system_clock
from jobsched.domain.retries import Failures
from jobsched.domain.supervision import Waiter
from jobsched.domain.worker import Worker
from jobsched.observability import logger, metrics
from jobsched.settings import Settings, get_settings
from jobsched.store.jobs import JobStore
from jobsched.store.runs import RunStore
from jobsched.targets import Targets
from jobsched.targets.aws import LambdaExecutor, SqsExecutor
from jobsched.targets.commands import CommandExecutor
from jobsched.targets.http import AddressPolicy, HttpExecutor
from jobsched.targets.ownership import ActingForOwner, OwnerClients, TargetTags
from jobsched.targets.shell import ShellExecutor


def build_targets(settings: Settings, aws: Aws) -> Targets:
    """Every target executor, configured from ``settings`` (address guard, shell switch, timeout cap).

    ``lambda`` and ``sqs`` targets act for the job's owner (``jobsched.targets.ownership``): through the
    target role ``settings.target_role_arn`` tagged with the owner when the deployment has one (AWS), else
    with the worker's own clients after an owner-tag check (local mode).
    """
    # Long synchronous invokes: read timeout past the worker's cap; no automatic retry of an invoke
    # (a retry after a read timeout would run the function twice).
    lambda_config = Config(
        read_timeout=settings.worker_timeout_cap_s + 30,
        connect_timeout=10,
        retries={"total_max_attempts": 1},
    )

    def client(service: str, credentials: dict[str, str] | None = None) -> Any:
        config = lambda_config if service == "lambda" else aws.calls.config()
        return new_session().client(
            service,
            region_name=aws.region,
            endpoint_url=aws.endpoint_url,
            config=config,
            **(credentials or {}),
        )

    tags = TargetTags(
        settings.target_owner_tag_key,
        lambda_client=lambda: aws.lambda_,
        sqs_client=lambda: aws.sqs,
        sts_client=lambda: aws.sts,
    )
    owner_clients = (
        OwnerClients(
            settings.target_role_arn, sts_client=lambda: aws.sts, make_client=client, now_s=time.time
        )
        if settings.target_role_arn
        else None
    )

    return Targets(
        http=HttpExecutor(
            AddressPolicy(
                allow_private=settings.allow_private_http_targets,
                allow_loopback=settings.allow_loopback_http_targets,
            )
        ),
        lambda_=ActingForOwner(
            "lambda",
            per_client=LambdaExecutor,
            clients=owner_clients,
            local=LambdaExecutor(lambda: client("lambda")),
            tags=tags,
        ),
        sqs=ActingForOwner(
            "sqs",
            per_client=SqsExecutor,
            clients=owner_clients,
            local=SqsExecutor(lambda: aws.sqs),
            tags=tags,
        ),
        command=CommandExecutor(),
        shell=ShellExecutor(enabled=settings.allow_shell_targets),
    )


def build_notifier(settings: Settings, aws: Aws) -> DeadRunNotifier:
    """The dead-run queue + alerts topic adapter."""
    return DeadRunNotifier(
        aws.sqs, aws.sns, dead_run_queue_url=settings.dead_run_queue_url, topic_arn=settings.alerts_topic_arn
    )


def build_failures(settings: Settings, aws: Aws, clock: Clock) -> Failures:
    """Retry/dead handling over the runs table, the run queue and the dead-run notifier."""
    return Failures(
        runs=RunStore(aws.table(settings.runs_table)),
        queue=RunQueue(aws.sqs, settings.run_queue_url),
        dead_runs=build_notifier(settings, aws),
        settings=settings,
        clock=clock,
    )


def build_worker(
    settings: Settings,
    aws: Aws,
    *,
    clock: Clock = system_clock,
    targets: Targets | None = None,
    waiter: Waiter | None = None,
) -> Worker:
    """A ``Worker`` wired to AWS (or moto) through ``aws``."""
    queue = RunQueue(aws.sqs, settings.run_queue_url)
    return Worker(
        settings=settings,
        runs=RunStore(aws.table(settings.runs_table)),
        jobs=JobStore(aws.table(settings.jobs_table)),
        queue=queue,
        dead_runs=build_notifier(settings, aws),
        targets=targets or build_targets(settings, aws),
        clock=clock,
        visibility=queue,
        waiter=waiter,
    )


_local = threading.local()
_generation = 0
"""Bumped by ``clear_default_workers``: a thread's cached worker of an older generation is rebuilt."""


def default_worker() -> Worker:
    """The worker of this thread (boto3 resources are not shared across threads), built on first use from
    the environment's settings."""
    worker: Worker | None = getattr(_local, "worker", None)
    if worker is None or getattr(_local, "generation", None) != _generation:
        worker = _local.worker = build_worker(get_settings(), Aws())
        _local.generation = _generation
    return worker


def clear_default_workers() -> None:
    """Forget every thread's cached default worker (tests: a new environment); each is rebuilt on next use."""
    global _generation
    _generation += 1


worker_factory: Callable[[], Worker] = default_worker
"""Replaced by tests and local mode (a moto-backed worker, a fake clock). Called in the thread that runs a
record."""


def record_pool(size: int) -> ThreadPoolExecutor:
    """The calling thread's pool for running a batch's records, with at least ``size`` threads.

    One pool per calling thread: in Lambda that is the one invocation thread; in local mode each event
    source poller has its own, so concurrent batches never queue behind each other. Threads are started on
    demand and kept (idle) across invocations; a pool too small for a batch is replaced by a larger one.
    """
    pool: ThreadPoolExecutor | None = getattr(_local, "pool", None)
    if pool is None or _local.pool_size < size:
        if pool is not None:
            pool.shutdown(wait=False)
        pool = _local.pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="record")
        _local.pool_size = size
    return pool


def _handle_record(record: SQSRecord, lambda_context: LambdaContext | None) -> str:
    """Runs in a pool thread: that thread's worker handles the record."""
    return worker_factory().handle(delivery_of(record, lambda_context))


def process_batch(event: dict[str, Any], context: LambdaContext | None) -> PartialItemFailureResponse:
    """Run every record of an SQS ``event`` concurrently (one thread each); the partial batch response.

    A record fails (listed in ``batchItemFailures``) when its handler raises; the others are acknowledged.
    An entirely failed batch is reported the same way, not raised, so a batch handed back for lack of time
    is not counted as a function error (the event source mapping treats both alike).
    """
    pool = record_pool(max(1, len(event.get("Records") or [])))

    async def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, functools.partial(_handle_record, record, lambda_context))

    return async_process_partial_response(
        event=event,
        record_handler=record_handler,
        # one per call: processors keep batch state
        processor=AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
        context=context,
    )


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_batch(event, context)
