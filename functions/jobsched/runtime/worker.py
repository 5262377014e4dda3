"""Running the worker Lambda's SQS batches: one record per run, partial batch failure reporting (Powertools
``AsyncBatchProcessor``; the event source mapping needs ``ReportBatchItemFailures``). The per-record logic
is ``jobsched.domain.worker.Worker.handle`` (of ``adapters.queue.delivery_of(record)``); local mode's worker
pool calls the same handler with SQS event dicts (records with ``messageId``, ``receiptHandle``, ``body``, ``attributes``, ``eventSourceARN``)
and a context object carrying ``aws_request_id`` and the other Lambda context fields.

The records of a batch run concurrently, each in its own thread: a run waits for no other run's target
(run k of a batch of 10 starts as early as run 1: "starts within seconds"), and every record is claimed
at the start of the invocation, with the whole invocation's time left for its try. Powertools'
``AsyncBatchProcessor`` gathers the records and builds the ``batchItemFailures`` response; each record's
(blocking) handler runs in a thread pool of the calling thread sized to the batch (``record_pool``),
whose threads are kept across invocations with their per-thread ``Worker`` (boto3 clients built once).
A record whose invocation has too little time left is handed back unclaimed (``jobsched.domain.worker.Deferred``):
a batch item failure, its message visible again at once.

AWS requests per run (the target's own call, e.g. the Lambda invoke of a ``lambda`` target, not counted):
- success path: 2 = claim (UpdateItem) + succeed (UpdateItem); 4 with ``overlap: skip`` (+ the lock's
  PutItem and DeleteItem), 5 for a job changed within the longest a try lasts (+1 Query of its audit events).
  A job whose spec counts downstream jobs (its chain mark, design §2.1), or whose spec was read over
  ``MARK_FRESH_MS`` before the run's end: + 1 Query of the ``by_upstream`` index (and BatchGetItem of their
  scheduling items when there are some), 1 PutItem per downstream run, its SendMessageBatch and the run's
  ``clear_sweep``.
  The message is deleted by the event source mapping.
- per batch: 1 ChangeMessageVisibilityBatch (``Worker.hold``: a lost worker's message comes back once its
  run's heartbeat is stale) and 1 BatchGetItem of the batch's job specs (``Worker.read_specs``; if it fails,
  1 GetItem per run instead), 0.2 per run in batches of 10.
- while a try runs: +2 per ``heartbeat_interval_s`` (30 s): UpdateItem + ChangeMessageVisibility.
- failed try with attempts left: 3 = claim + retrying (UpdateItem) + retry message (SendMessageBatch).
- last failed try: 5 = claim + dead (UpdateItem) + dead-run SendMessage + SNS Publish + UpdateItem (+ the
  downstream jobs' Query as on the success path).
- duplicate delivery: 1 (the refused claim).
- handed back for lack of time (rare: never at the start of an invocation with the deployment's limits):
  1 = ChangeMessageVisibility, then the redelivery's own path.
A delivery handled alone (``Worker.handle`` without the batch's ``specs``) or in a batch whose jobs could not be
read together reads its own job: +1 GetItem. Counted in ``tests/integration/worker/test_request_count.py``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Sequence
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

from jobsched.aws.queue import delivery_of
from jobsched.aws.wire import parse_run_message
from jobsched.domain.worker import BatchSpecs, Worker

_pools = threading.local()


def record_pool(size: int) -> ThreadPoolExecutor:
    """The calling thread's pool for running a batch's records, with at least ``size`` threads.

    One pool per calling thread: in Lambda that is the one invocation thread; in local mode each event
    source poller has its own, so concurrent batches never queue behind each other. Threads are started on
    demand and kept (idle) across invocations; a pool too small for a batch is replaced by a larger one.
    """
    pool: ThreadPoolExecutor | None = getattr(_pools, "pool", None)
    if pool is None or _pools.size < size:
        if pool is not None:
            pool.shutdown(wait=False)
        pool = _pools.pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="record")
        _pools.size = size
    return pool


class Batches:
    """Runs SQS batches of run records, each record on the ``Worker`` of the thread that runs it.

    ``make_worker`` builds a thread's worker on its first record (boto3 resources are not shared across
    threads; e.g. ``lambda: components.with_own_clients().worker()``); the worker is kept for the thread's
    later records. Pass ``lambda: worker`` to run every record on one worker (tests, the bench).
    """

    def __init__(self, make_worker: Callable[[], Worker]) -> None:
        self._make_worker = make_worker
        self._local = threading.local()

    def worker(self) -> Worker:
        """The calling thread's worker (built on first use)."""
        worker: Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = self._make_worker()
        return worker

    def _handle_record(
        self, record: SQSRecord, lambda_context: LambdaContext | None, specs: BatchSpecs | None
    ) -> str:
        """Runs in a pool thread: that thread's worker handles the record, with the batch's ``specs``."""
        return self.worker().handle(delivery_of(record, lambda_context), specs)

    def process(self, event: dict[str, Any], context: LambdaContext | None) -> PartialItemFailureResponse:
        """Run every record of an SQS ``event`` concurrently (one thread each); the partial batch response.

        A record fails (listed in ``batchItemFailures``) when its handler raises; the others are
        acknowledged. An entirely failed batch is reported the same way, not raised, so a batch handed back
        for lack of time is not counted as a function error (the event source mapping treats both alike).
        """
        records = event.get("Records") or []
        pool = record_pool(max(1, len(records)))
        # every record is claimed at once below: hold the batch's messages for the heartbeat's stale time first
        self.worker().hold([str(r["receiptHandle"]) for r in records if r.get("receiptHandle")])
        specs = self.worker().read_specs(_job_ids(records))

        async def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> str:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                pool, functools.partial(self._handle_record, record, lambda_context, specs)
            )

        return async_process_partial_response(
            event=event,
            record_handler=record_handler,
            # one per call: processors keep batch state
            processor=AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
            context=context,
        )


def _job_ids(records: Sequence[dict[str, Any]]) -> list[str]:
    """The job ids of a batch's run messages, in order (a malformed body is left out: its record fails alone)."""
    ids = []
    for record in records:
        try:
            ids.append(parse_run_message(str(record.get("body", ""))).job_id)
        except Exception:  # an optimisation only: the record's own handler raises its error
            continue
    return ids
