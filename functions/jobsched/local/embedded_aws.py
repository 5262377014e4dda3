"""The embedded AWS of local mode: moto in this process, with fake credentials and atomic DynamoDB writes.

- :func:`isolate_from_aws` points the process at fake credentials and a fixed region and removes anything
  that could route a call elsewhere (profiles, custom endpoints), so nothing reaches a real account.
- :func:`serialize_dynamodb` makes moto's DynamoDB handle one request at a time. DynamoDB applies each
  conditional write atomically; moto evaluates the condition and writes in separate steps, so two threads
  (two scheduler loops, a worker and the sweeper) could both pass one condition. Local mode runs many
  threads, and its promises (one leader, one run per ``(job, scheduled_for)``, one claim per try) rest on
  those conditions, so their requests are serialized. SQS requests are left concurrent: a long poll
  waits inside moto and must not hold the lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import urlsplit

from jobsched.observability import logger

REGION = "us-east-1"
_FAKE = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
_REMOVE = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_ENDPOINT_URL_SNS",
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


def isolate_from_aws(environ: MutableMapping[str, str] | None = None) -> None:
    """Fake credentials and region in the process environment; drop profiles and custom endpoints."""
    env = os.environ if environ is None else environ
    for name in _REMOVE:
        env.pop(name, None)
    env.update(_FAKE)
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["AWS_EC2_METADATA_DISABLED"] = "true"


class _SerializedDynamoDB:
    """Wraps moto's botocore ``before-send`` handler: DynamoDB requests run one at a time."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = threading.RLock()

    def __call__(self, event_name: str, request: Any, **kwargs: Any) -> Any:
        if _is_dynamodb(str(getattr(request, "url", ""))):
            with self.lock:
                return self.inner(event_name, request, **kwargs)
        return self.inner(event_name, request, **kwargs)


def _is_dynamodb(url: str) -> bool:
    """DynamoDB and DynamoDB Streams endpoints, regional or account-based."""
    host = urlsplit(url).hostname or ""
    return host.startswith(("dynamodb.", "streams.dynamodb.")) or ".ddb." in host or "streams-ddb" in host


def serialize_dynamodb() -> bool:
    """Install the DynamoDB serialization on moto's handler (idempotent; before boto3 clients are created).

    Returns False (and logs) when moto's handler is not where moto 5 puts it, leaving moto unchanged.
    """
    from botocore.handlers import BUILTIN_HANDLERS

    try:
        from moto.core.models import botocore_stubber
    except ImportError:  # pragma: no cover - moto layout changed
        logger.warning("moto internals changed: DynamoDB requests are not serialized")
        return False
    for index, entry in enumerate(BUILTIN_HANDLERS):
        if entry[0] != "before-send":
            continue
        if isinstance(entry[1], _SerializedDynamoDB):
            return True
        if entry[1] is botocore_stubber:
            BUILTIN_HANDLERS[index] = (entry[0], _SerializedDynamoDB(botocore_stubber), *entry[2:])
            return True
    logger.warning("moto's botocore handler not found: DynamoDB requests are not serialized")
    return False
