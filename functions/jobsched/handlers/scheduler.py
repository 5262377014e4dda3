"""Scheduler Lambda: started each minute per partition by EventBridge (``{"partition": n}``); ticks once a
second until shortly before its timeout, then hands over through the lease (``jobsched.runtime.scheduler``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import logger
from jobsched.runtime.scheduler import SCHEDULER_CALLS, serve_invocation
from jobsched.runtime.wiring import Components


@lru_cache(maxsize=1)
def default_components() -> Components:
    """Settings from the environment, lazily created boto3 clients bounded by ``SCHEDULER_CALLS`` (a slow
    call cannot outlast the invocation), the system clock and ``time.sleep``."""
    return Components.from_environment(calls=SCHEDULER_CALLS)


@logger.inject_lambda_context(clear_state=True)
def handler(
    event: dict[str, Any], context: LambdaContext, components: Components | None = None
) -> dict[str, int]:
    """One invocation of the loop (``jobsched.runtime.scheduler.serve_invocation``) on ``components``
    (default: ``default_components()``)."""
    return serve_invocation(event, context, components or default_components())
