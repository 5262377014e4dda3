"""Sweeper Lambda: started every minute by EventBridge; one sweep of the runs table's sweep index and the
upkeep passes (``jobsched.runtime.sweeper``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import logger, metrics
from jobsched.runtime.sweeper import SweeperRuntime
from jobsched.runtime.wiring import Components


@lru_cache(maxsize=1)
def default_runtime() -> SweeperRuntime:
    """The function's sweeper runtime on components from the environment's settings (built once per execution
    environment)."""
    return SweeperRuntime(Components.from_environment())


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(
    event: dict[str, Any], context: LambdaContext, runtime: SweeperRuntime | None = None
) -> dict[str, Any]:
    """One invocation (``jobsched.runtime.sweeper.SweeperRuntime.serve``) of ``runtime`` (default:
    ``default_runtime()``); its report as a dict."""
    return (runtime or default_runtime()).serve(context)
