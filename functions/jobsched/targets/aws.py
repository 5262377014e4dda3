"""``lambda`` and ``sqs`` targets: the run envelope to a function (synchronous) or a queue.

Clients come from a factory called on first use (boto3 clients made by the wiring, so a worker that never
runs such a target never creates one; tests pass a Stubber-wrapped or moto client).
The Lambda client must allow a read timeout of at least the worker's timeout cap and must not retry an
invoke on its own (a retry after a read timeout would run the function twice).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cached_property
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.models import LambdaTarget, SqsTarget
from jobsched.ports.targets import TargetCall, TargetFailed, head_bytes, output_limit, truncate


def _client_error(service: str, name: str, error: Exception) -> TargetFailed:
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        return TargetFailed(f"{service} {name}: {info.get('Code', 'Error')}: {info.get('Message', '')}")
    return TargetFailed(f"{service} {name}: {type(error).__name__}: {error}")


class _ClientExecutor:
    """An executor holding one boto3 client, made by ``client_factory`` on first use (see the module docstring)."""

    def __init__(self, client_factory: Callable[[], Any]) -> None:
        self._client_factory = client_factory

    @cached_property
    def client(self) -> Any:
        return self._client_factory()


class LambdaExecutor(_ClientExecutor):
    """Runs ``lambda`` targets: ``Invoke`` with ``InvocationType=RequestResponse`` and the run envelope.
    A ``FunctionError`` in the response fails the try, with the function's error payload in the message. The head
    of the response payload (or of the error payload) is the try's ``output``."""

    def execute(self, target: LambdaTarget, call: TargetCall) -> str:
        payload = json.dumps(call.envelope(), separators=(",", ":")).encode()
        try:
            response = self.client.invoke(
                FunctionName=target.function, InvocationType="RequestResponse", Payload=payload
            )
            body = response["Payload"].read() if response.get("Payload") is not None else b""
        except (ClientError, BotoCoreError) as error:
            raise _client_error("lambda", target.function, error) from error
        text = body.decode("utf-8", "replace")
        call.output = head_bytes(text, output_limit(bool(response.get("FunctionError")))) if text else None
        if response.get("FunctionError"):
            raise TargetFailed(
                truncate(f"lambda {target.function} failed ({response['FunctionError']}): {text}")
            )
        return f"lambda {target.function}: status {response.get('StatusCode')}"


class SqsExecutor(_ClientExecutor):
    """Runs ``sqs`` targets: sends the run envelope. A FIFO queue (URL ending ``.fifo``) gets
    ``MessageDeduplicationId = run id`` (SQS drops a repeat within 5 minutes) and ``MessageGroupId = job id``
    (one job's runs stay in order). The message id is the try's ``output``."""

    def execute(self, target: SqsTarget, call: TargetCall) -> str:
        kwargs: dict[str, Any] = {
            "QueueUrl": target.queue_url,
            "MessageBody": json.dumps(call.envelope(), separators=(",", ":")),
            "MessageAttributes": {"run_id": {"DataType": "String", "StringValue": call.run_id}},
        }
        if target.queue_url.endswith(".fifo"):
            kwargs["MessageDeduplicationId"] = call.run_id[:128]
            kwargs["MessageGroupId"] = call.job_id[:128]
        try:
            response = self.client.send_message(**kwargs)
        except (ClientError, BotoCoreError) as error:
            raise _client_error("sqs", target.queue_url, error) from error
        call.output = str(response.get("MessageId")) if response.get("MessageId") else None
        return f"sqs message {response.get('MessageId')}"
