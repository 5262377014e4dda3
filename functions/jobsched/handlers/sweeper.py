"""Sweeper Lambda: started every minute by EventBridge; one bounded pass over the runs table's sweep index
(``jobsched.sweeper``): re-enqueues runs left queued or retrying, takes runs from lost workers (a failed
try), resends owed dead-run alerts, and clears finished runs from the index."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.adapters.queue import RunQueue
from jobsched.aws import Aws
from jobsched.clock import Clock, system_clock
from jobsched.domain.sweeper import Sweeper
from jobsched.handlers.worker import build_failures
from jobsched.observability import logger, metrics
from jobsched.settings import Settings, get_settings
from jobsched.store.jobs import JobStore
from jobsched.store.runs import RunStore


def build_sweeper(settings: Settings, aws: Aws, *, clock: Clock = system_clock) -> Sweeper:
    """A ``Sweeper`` wired to AWS (or moto) through ``aws``."""
    return Sweeper(
        settings=settings,
        runs=RunStore(aws.table(settings.runs_table)),
        jobs=JobStore(aws.table(settings.jobs_table)),
        queue=RunQueue(aws.sqs, settings.run_queue_url),
        failures=build_failures(settings, aws, clock),
        clock=clock,
    )


@lru_cache(maxsize=1)
def default_sweeper() -> Sweeper:
    """Settings from the environment, lazily created boto3 clients, the system clock."""
    return build_sweeper(get_settings(), Aws())


sweeper_factory: Callable[[], Sweeper] = default_sweeper
"""Replaced by tests and local mode."""


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return sweeper_factory().sweep().as_dict()
