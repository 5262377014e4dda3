"""Lambda entry point of the HTTP API (API Gateway REST proxy events): one line of wiring."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.api.app import app
from jobsched.observability import logger


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Resolve one API Gateway REST (v1) proxy event into its proxy response."""
    return app.resolve(event, context)
