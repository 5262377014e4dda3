"""Lambda entry point of the HTTP API (API Gateway REST proxy events): the resolver on the function's
wiring, built once per execution environment."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.api.app import Api, resolve_with
from jobsched.observability import logger
from jobsched.runtime.wiring import Components


@lru_cache(maxsize=1)
def default_api() -> Api:
    """The function's API wiring, from the environment's settings."""
    return Components.from_environment().api()


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext, api: Api | None = None) -> dict[str, Any]:
    """Resolve one API Gateway REST (v1) proxy event into its proxy response, on ``api`` (default:
    ``default_api()``)."""
    return resolve_with(api or default_api(), event, context)
