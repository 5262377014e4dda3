"""The embedded AWS of local mode: moto in this process, with fake credentials and atomic DynamoDB writes.

- :func:`isolate_from_aws` points the process at fake credentials and a fixed region and removes anything
  that could route a call elsewhere (profiles, custom endpoints), so nothing reaches a real account.
- :func:`serialize_dynamodb` makes moto's DynamoDB handle one request at a time. DynamoDB applies each
  conditional write atomically; moto evaluates the condition and writes in separate steps, so two threads
  (two scheduler loops, a worker and the sweeper) could both pass one condition. Local mode runs many
  threads, and its promises (one leader, one run per ``(job, scheduled_for)``, one claim per try) rest on
  those conditions, so their requests are serialized. SQS requests are left concurrent: a long poll
  waits inside moto and must not hold the lock. The same wrapper lets local mode journal every successful
  write (``local.state.WriteJournal``): moto's DynamoDB streams keep every record and every shard iterator
  in memory for ever, which a long-running ``jobsched local`` cannot afford.
- :func:`release_moto_bookkeeping` drops moto's record of every object it created, for the same reason.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, MutableMapping
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


WriteObserver = Callable[[str, bytes], None]
"""Called after each successful DynamoDB request, inside the lock: ``(operation, JSON request body)``."""


class SerializedDynamoDB:
    """Wraps moto's botocore ``before-send`` handler: DynamoDB requests run one at a time, and ``observer``
    (when set) sees each successful one before the next starts (local mode's write journal)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = threading.RLock()
        self.observer: WriteObserver | None = None

    def __call__(self, event_name: str, request: Any, **kwargs: Any) -> Any:
        if not _is_dynamodb(str(getattr(request, "url", ""))):
            return self.inner(event_name, request, **kwargs)
        with self.lock:
            response = self.inner(event_name, request, **kwargs)
            observer = self.observer
            if observer is not None and response is not None and getattr(response, "status_code", 0) == 200:
                observer(_operation(request), _body(request))
            return response


def _operation(request: Any) -> str:
    target = request.headers.get("X-Amz-Target") or b""
    text = target.decode() if isinstance(target, bytes) else str(target)
    return text.rpartition(".")[2]


def _body(request: Any) -> bytes:
    body = request.body or b""
    if hasattr(body, "read"):  # pragma: no cover - botocore sends DynamoDB bodies as bytes
        body = body.read()
    return body.encode() if isinstance(body, str) else bytes(body)


def _is_dynamodb(url: str) -> bool:
    """DynamoDB and DynamoDB Streams endpoints, regional or account-based."""
    host = urlsplit(url).hostname or ""
    return host.startswith(("dynamodb.", "streams.dynamodb.")) or ".ddb." in host or "streams-ddb" in host


def release_moto_bookkeeping() -> None:
    """Drop moto's list of every model object it ever created (kept for its server dashboard only).

    moto's ``BaseModel`` records each instance, so every DynamoDB item version, query result and
    transaction copy stays in memory until the mock is reset: tens of KB per run. A long-running
    ``jobsched local`` calls this every few seconds; the stored data is untouched.
    """
    from moto.core.model_instances import reset_model_data

    reset_model_data()


def serialize_dynamodb() -> SerializedDynamoDB | None:
    """Install the DynamoDB serialization on moto's handler (idempotent; before boto3 clients are created)
    and return it. Returns None (and logs) when moto's handler is not where moto 5 puts it."""
    from botocore.handlers import BUILTIN_HANDLERS

    try:
        from moto.core.models import botocore_stubber
    except ImportError:  # pragma: no cover - moto layout changed
        logger.warning("moto internals changed: DynamoDB requests are not serialized")
        return None
    for index, entry in enumerate(BUILTIN_HANDLERS):
        if entry[0] != "before-send":
            continue
        if isinstance(entry[1], SerializedDynamoDB):
            return entry[1]
        if entry[1] is botocore_stubber:
            wrapper = SerializedDynamoDB(botocore_stubber)
            BUILTIN_HANDLERS[index] = (entry[0], wrapper, *entry[2:])
            return wrapper
    logger.warning("moto's botocore handler not found: DynamoDB requests are not serialized")
    return None
