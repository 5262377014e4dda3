"""A local stand-in for Lambda's SQS event source mapping: poll a queue, call a handler with SQS events.

What Lambda does (AWS docs, "Using Lambda with Amazon SQS"), and this class too:

- long-polls ``ReceiveMessage`` for batches of up to ``batch_size`` (10) messages;
- calls the function with ``{"Records": [...]}`` in the SQS event record format (``messageId``,
  ``receiptHandle``, ``body``, ``attributes``, ``messageAttributes``, ``eventSource: aws:sqs``...);
- with ``ReportBatchItemFailures``: deletes the messages not listed in the returned
  ``batchItemFailures``; a listed id, or an error raised by the function, leaves the message(s) on the
  queue to be delivered again; a response naming an unknown id fails the whole batch.

A message the handler reports failed (``batchItemFailures``) is left as the handler left it, as Lambda does:
the worker sets the visibility of each one it hands back itself (the give-back's back-off,
``domain.worker.GIVE_BACK_DELAY_S``), and that is when it comes back. One deliberate difference: when the
function fails as a whole (it raised, or answered an unknown id), Lambda lets the batch reappear after the
visibility it has (the run queue's timeout is 90 minutes); locally the whole batch's visibility is set to
``failure_visibility_s`` (10 s) so a redelivery is seen while you watch. The redrive policy
(``maxReceiveCount``) still moves a poison message to the dead-letter queue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from functools import cached_property
from typing import Any

from jobsched.lambda_context import LocalLambdaContext
from jobsched.observability import logger

Handler = Callable[[dict[str, Any], Any], Any]
"""A Lambda handler: ``handler(event, context)``."""


def _message_attributes(raw: dict[str, Any]) -> dict[str, Any]:
    """SQS API message attributes -> the event record's form (camelCase keys, list fields present)."""
    out: dict[str, Any] = {}
    for name, value in raw.items():
        out[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": value.get("BinaryListValues", []),
            "dataType": value.get("DataType", "String"),
        }
    return out


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda SQS event for ``messages`` as ``ReceiveMessage`` returned them."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes", {})),
                "messageAttributes": _message_attributes(m.get("MessageAttributes", {})),
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


@dataclass(eq=False)
class SqsEventSource:
    """Feeds one queue to one handler, like an SQS event source mapping with batch item failures on.

    ``sqs`` is a boto3 SQS client. ``poll_once`` handles one batch; ``run`` loops until stopped, letting the
    batch in hand finish (drain) before returning.
    """

    sqs: Any
    queue_url: str
    handler: Handler
    _: KW_ONLY
    function_name: str
    region: str = "us-east-1"
    batch_size: int = 10
    wait_s: int = 1
    failure_visibility_s: int = 10
    timeout_s: int = 900

    @cached_property
    def queue_arn(self) -> str:
        """The queue's ARN (one ``GetQueueAttributes`` call, then kept)."""
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        arn: str = attributes["Attributes"]["QueueArn"]
        return arn

    def poll_once(self) -> tuple[int, int]:
        """Receive one batch and process it. Returns ``(messages received, messages failed)``."""
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=self.wait_s,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0, 0
        event = sqs_event(messages, self.queue_arn, self.region)
        context = LocalLambdaContext(self.function_name, timeout_s=self.timeout_s, region=self.region)
        failed_ids, whole = self._invoke(event, context, messages)
        done = [m for m in messages if m["MessageId"] not in failed_ids]
        failed = [m for m in messages if m["MessageId"] in failed_ids]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        if failed and whole:
            self.sqs.change_message_visibility_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {
                        "Id": str(i),
                        "ReceiptHandle": m["ReceiptHandle"],
                        "VisibilityTimeout": self.failure_visibility_s,
                    }
                    for i, m in enumerate(failed)
                ],
            )
        return len(messages), len(failed)

    def _invoke(
        self, event: dict[str, Any], context: LocalLambdaContext, messages: list[dict[str, Any]]
    ) -> tuple[set[str], bool]:
        """Call the handler; the ids of the messages that failed, and whether the function failed as a whole
        (it raised, or reported an id not in the batch: then every message failed)."""
        every = {m["MessageId"] for m in messages}
        try:
            response = self.handler(event, context)
        except Exception:
            logger.exception(
                "handler failed; the whole batch will be delivered again", function=self.function_name
            )
            return every, True
        failures = (response or {}).get("batchItemFailures", []) if isinstance(response, dict) else []
        ids = {str(f.get("itemIdentifier", "")) for f in failures if isinstance(f, dict)}
        if not ids <= every:  # Lambda: an unknown or empty id fails the whole batch
            logger.warning(
                "handler reported unknown message ids; failing the batch", function=self.function_name
            )
            return every, True
        return ids, False

    def run(self, stop: threading.Event) -> None:
        """Process batches until ``stop`` is set; the batch in hand always finishes (drain)."""
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception:
                logger.exception("event source poll failed; retrying", function=self.function_name)
                stop.wait(1.0)
