"""The Lambda context object of local invocations (local mode and tests call the handlers directly).

One definition for every local caller: the API's WSGI adapter (``jobsched.api.wsgi``), the SQS event source
and the sweeper loop of local mode (``jobsched.local``). Imports nothing of jobsched, so anything may use it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

LOCAL_ACCOUNT_ID = "123456789012"
"""The AWS account of local mode: moto's default account, so ARNs built locally match the resources moto made."""

LOCAL_REGION = "us-east-1"


@dataclass
class LocalLambdaContext:
    """The parts of Lambda's context object that handlers and Powertools read (Logger's function fields,
    idempotency's remaining time, the scheduler's and worker's time budget).

    ``timeout_s``: the function's timeout, in seconds; ``get_remaining_time_in_millis()`` counts down from it
    on the monotonic clock from construction.
    """

    function_name: str
    timeout_s: float = 900
    memory_limit_in_mb: int = 1024
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    region: str = LOCAL_REGION
    started: float = field(default_factory=time.monotonic)
    function_version: ClassVar[str] = "$LATEST"
    log_stream_name: ClassVar[str] = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{LOCAL_ACCOUNT_ID}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before ``timeout_s`` runs out (0 once it has)."""
        return max(0, int((self.timeout_s - (time.monotonic() - self.started)) * 1000))
