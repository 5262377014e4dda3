"""Worker Lambda: SQS batches from the run queue, one record per run, partial batch failure reporting
(Powertools ``BatchProcessor``; the event source mapping needs ``ReportBatchItemFailures``). The per-record
logic is ``jobsched.worker.Worker.handle_record``; local mode's worker pool calls this same handler with
SQS event dicts (records with ``messageId``, ``receiptHandle``, ``body``, ``attributes``,
``eventSourceARN``) and a context object carrying ``aws_request_id`` and the other Lambda context fields.

AWS requests per run (the target's own call, e.g. the Lambda invoke of a ``lambda`` target, not counted):
- success path: 3 = claim (UpdateItem) + job spec (GetItem) + succeed (UpdateItem); 4 with
  ``overlap: skip`` (+1 Query for a running run). The message is deleted by the event source mapping.
- while a try runs: +2 per ``heartbeat_interval_s`` (30 s): UpdateItem + ChangeMessageVisibility.
- failed try with attempts left: 4 = claim + spec + retrying (UpdateItem) + retry message (SendMessageBatch).
- last failed try: 6 = claim + spec + dead (UpdateItem) + dead-run SendMessage + SNS Publish + UpdateItem.
- duplicate delivery: 1 (the refused claim).
Counted in ``tests/integration/worker/test_request_count.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from jobsched.adapters.alerts import DeadRunNotifier
from jobsched.adapters.queue import RunQueue
from jobsched.aws import Aws, new_session
from jobsched.clock import Clock, system_clock
from jobsched.observability import logger, metrics
from jobsched.settings import Settings, get_settings
from jobsched.store.jobs import JobStore
from jobsched.store.runs import RunStore
from jobsched.targets import Targets
from jobsched.targets.aws import LambdaExecutor, SqsExecutor
from jobsched.targets.commands import CommandExecutor
from jobsched.targets.http import AddressPolicy, HttpExecutor
from jobsched.targets.shell import ShellExecutor
from jobsched.worker import Failures, Waiter, Worker


def build_targets(settings: Settings, aws: Aws) -> Targets:
    """Every target executor, configured from ``settings`` (address guard, shell switch, timeout cap)."""

    def lambda_client() -> Any:
        # Long synchronous invokes: read timeout past the worker's cap; no automatic retry of an invoke
        # (a retry after a read timeout would run the function twice).
        config = Config(
            read_timeout=settings.worker_timeout_cap_s + 30,
            connect_timeout=10,
            retries={"total_max_attempts": 1},
        )
        return new_session().client(
            "lambda", region_name=aws.region, endpoint_url=aws.endpoint_url, config=config
        )

    return Targets(
        http=HttpExecutor(
            AddressPolicy(
                allow_private=settings.allow_private_http_targets,
                allow_loopback=settings.allow_loopback_http_targets,
            )
        ),
        lambda_=LambdaExecutor(lambda_client),
        sqs=SqsExecutor(lambda: aws.sqs),
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


def default_worker() -> Worker:
    """The worker of this thread (boto3 resources are not shared across threads), built on first use from
    the environment's settings."""
    worker: Worker | None = getattr(_local, "worker", None)
    if worker is None:
        worker = _local.worker = build_worker(get_settings(), Aws())
    return worker


worker_factory: Callable[[], Worker] = default_worker
"""Replaced by tests and local mode (a moto-backed worker, a fake clock)."""


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event,
        record_handler=worker_factory().handle_record,
        processor=BatchProcessor(event_type=EventType.SQS),  # one per call: processors keep batch state
        context=context,
    )
