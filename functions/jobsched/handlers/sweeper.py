"""Sweeper Lambda: started every minute by EventBridge; one bounded pass over the runs table's sweep index
(``jobsched.domain.sweeper``): re-enqueues runs left queued or retrying, takes runs from lost workers (a
failed try), resends owed dead-run alerts, and clears finished runs from the index."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.domain.sweeper import Sweeper
from jobsched.observability import logger, metrics
from jobsched.wiring import Components


@lru_cache(maxsize=1)
def default_sweeper() -> Sweeper:
    """The function's sweeper, from the environment's settings (built once per execution environment)."""
    return Components.from_environment().sweeper()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext, sweeper: Sweeper | None = None) -> dict[str, Any]:
    """One sweep (``sweeper`` default: ``default_sweeper()``); its report as a dict."""
    return (sweeper or default_sweeper()).sweep().as_dict()
