"""Archive Lambda: fed by the runs table's stream, filtered to TTL deletions of runs; writes them to the archive
bucket (``jobsched.runtime.archive``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import logger, metrics
from jobsched.runtime.archive import ArchiveRuntime


@lru_cache(maxsize=1)
def default_runtime() -> ArchiveRuntime:
    """The function's archive runtime from the environment (built once per execution environment)."""
    return ArchiveRuntime.from_environment()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(
    event: dict[str, Any], context: LambdaContext, runtime: ArchiveRuntime | None = None
) -> dict[str, Any]:
    """One invocation (``jobsched.runtime.archive.ArchiveRuntime.serve``) of ``runtime`` (default:
    ``default_runtime()``); its report as a dict."""
    return (runtime or default_runtime()).serve(event)
