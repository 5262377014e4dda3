"""Scheduler Lambda: started each minute per partition by EventBridge (``{"partition": n}``); ticks once a
second until shortly before its timeout, then hands over through the lease (``jobsched.scheduler``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.aws import Aws
from jobsched.clock import system_clock
from jobsched.observability import logger
from jobsched.scheduler_runtime import SCHEDULER_CALLS, Runtime, serve_invocation
from jobsched.settings import get_settings


@lru_cache(maxsize=1)
def default_runtime() -> Runtime:
    """Settings from the environment, lazily created boto3 clients bounded by ``SCHEDULER_CALLS`` (a slow
    call cannot outlast the invocation), the system clock and ``time.sleep``."""
    return Runtime(
        settings=get_settings(), aws=Aws(calls=SCHEDULER_CALLS), clock=system_clock, sleep=time.sleep
    )


runtime_factory: Callable[[], Runtime] = default_runtime
"""Replaced by tests (fake clock and sleep, moto-backed settings)."""


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    return serve_invocation(event, context, runtime_factory())
