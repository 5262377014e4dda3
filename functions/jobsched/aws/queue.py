"""The run queue (SQS): one message per delivery of a run, sent in batches of 10; the parsing of a
delivered SQS record into the worker's ``Delivery``; and the run queue's dead-letter queue, which the sweeper
drains."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from jobsched.aws.wire import parse_run_message, run_message_body
from jobsched.dynamodb.errors import TRANSIENT_ERRORS
from jobsched.ports.run_messages import MAX_DELAY_S, DeadLetter, Delivery, QueueSendError, RunMessage

MESSAGE_GROUP_MAX = 128
"""SQS's limit on a ``MessageGroupId``'s length (characters)."""


def message_group_id(owner: str) -> str:
    """The ``MessageGroupId`` of ``owner``'s run messages: the owner itself when SQS takes it (1-128 characters of
    printable ASCII, no space), else ``owner#`` and 40 hex digits of its SHA-256 (the same owner, the same group)."""
    if 0 < len(owner) <= MESSAGE_GROUP_MAX and all(33 <= ord(c) <= 126 for c in owner):
        return owner
    return "owner#" + hashlib.sha256(owner.encode()).hexdigest()[:40]


def default_worker_id() -> str:
    """``<host>/<pid>/<thread>``: names a worker thread when no Lambda request id is at hand."""
    return f"{socket.gethostname()}/{os.getpid()}/{threading.get_ident()}"


def delivery_of(record: SQSRecord | dict[str, Any], lambda_context: Any = None) -> Delivery:
    """The ``Delivery`` of one SQS record of the run queue (Powertools' ``SQSRecord`` or its event dict).

    The worker id is the Lambda request id when a context is given, else ``default_worker_id()``; the
    context's ``get_remaining_time_in_millis`` becomes ``Delivery.remaining_ms``. Raises ValueError for a
    malformed body (the record fails; SQS redrive moves a poison message to the run queue's DLQ).
    """
    if isinstance(record, dict):
        record = SQSRecord(record)
    request_id = getattr(lambda_context, "aws_request_id", None)
    return Delivery(
        message=parse_run_message(record.body),
        worker=str(request_id) if request_id else default_worker_id(),
        receipt_handle=record.raw_event.get("receiptHandle") or None,
        receive_count=int((record.raw_event.get("attributes") or {}).get("ApproximateReceiveCount", 1)),
        remaining_ms=getattr(lambda_context, "get_remaining_time_in_millis", None),
    )


class RunQueue:
    """SQS adapter of the run queue. ``sqs`` is a boto3 SQS client."""

    def __init__(self, sqs: Any, url: str) -> None:
        self.sqs = sqs
        self.url = url

    def send(self, messages: Sequence[RunMessage]) -> None:
        """Send messages in batches of 10 (one request per batch). A message's ``owner`` is its
        ``MessageGroupId``: on a standard queue, SQS fair queues deliver quiet owners' messages first while one
        owner holds most of those in flight (design §4.10).

        Raises ``QueueSendError`` listing the messages SQS refused, or, when a request fails outright (a
        throttle, a timeout, a service error after the SDK's retries), that batch and every later one (callers
        retry or leave them to the sweeper).
        """
        failed: list[RunMessage] = []
        for start in range(0, len(messages), 10):
            batch = messages[start : start + 10]
            entries = [
                {
                    "Id": str(i),
                    "MessageBody": run_message_body(m),
                    "DelaySeconds": max(0, min(m.delay_s, MAX_DELAY_S)),
                    **({"MessageGroupId": message_group_id(m.owner)} if m.owner else {}),
                }
                for i, m in enumerate(batch)
            ]
            try:
                response = self.sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            except TRANSIENT_ERRORS as error:
                raise QueueSendError([*failed, *messages[start:]]) from error
            failed.extend(batch[int(f["Id"])] for f in response.get("Failed", []))
        if failed:
            raise QueueSendError(failed)

    def change_visibility_batch(self, receipt_handles: Sequence[str], seconds: int) -> None:
        """``change_visibility`` for several in-flight messages: one ChangeMessageVisibilityBatch per 10. An
        entry SQS refuses (an expired handle: the message is back on the queue anyway) is left as it is.
        Raises botocore ClientError when a request fails."""
        timeout = max(0, min(seconds, 43200))
        for start in range(0, len(receipt_handles), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": timeout}
                for i, handle in enumerate(receipt_handles[start : start + 10])
            ]
            self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        """Make an in-flight message invisible for ``seconds`` more from now (0-43200; worker heartbeats).
        1 request. Raises botocore ClientError (e.g. an expired receipt handle)."""
        self.sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=max(0, min(seconds, 43200))
        )


def dead_letter_of(body: str, receipt_handle: str, receive_count: int = 0) -> DeadLetter:
    """A dead letter with its ``body`` parsed as a run message (``DeadLetter.message``; None when the body is not
    one: malformed JSON, a field missing or of the wrong type)."""
    try:
        message: RunMessage | None = parse_run_message(body)
    except ValueError:
        message = None
    return DeadLetter(body, receipt_handle, receive_count, message=message)


class DeadLetterQueue:
    """SQS adapter of the run queue's dead-letter queue (``resources.RUN_QUEUE_DLQ``), the ``DeadLetters`` port.
    ``sqs`` is a boto3 SQS client."""

    def __init__(self, sqs: Any, url: str) -> None:
        self.sqs = sqs
        self.url = url

    def receive(self, limit: int) -> list[DeadLetter]:
        """Up to ``limit`` messages, 10 per request (short polls; stops at the first empty answer)."""
        letters: list[DeadLetter] = []
        while len(letters) < limit:
            batch = self.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=min(10, limit - len(letters)),
                AttributeNames=["ApproximateReceiveCount"],
            ).get("Messages", [])
            if not batch:
                break
            letters.extend(
                dead_letter_of(
                    m.get("Body", ""),
                    m["ReceiptHandle"],
                    int((m.get("Attributes") or {}).get("ApproximateReceiveCount", 0)),
                )
                for m in batch
            )
        return letters

    def delete(self, receipt_handle: str) -> None:
        """Delete one message. 1 request. Raises botocore ClientError."""
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=receipt_handle)
