"""Worker Lambda: SQS batches from the run queue, one record per run, partial batch failure reporting
(``jobsched.runtime.worker``). Cold start builds the components once (``default_batches``); each record
thread keeps its worker and boto3 clients across invocations."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import logger, metrics
from jobsched.runtime.wiring import Components
from jobsched.runtime.worker import Batches


@lru_cache(maxsize=1)
def default_batches() -> Batches:
    """The function's batch runner, from the environment's settings (built once per execution environment)."""
    return Components.from_environment().worker_batches()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(
    event: dict[str, Any], context: LambdaContext, batches: Batches | None = None
) -> PartialItemFailureResponse:
    """Run an SQS batch of run records (``batches`` default: ``default_batches()``); the partial batch
    response ``{"batchItemFailures": [{"itemIdentifier": message id}, ...]}``."""
    return (batches or default_batches()).process(event, context)
