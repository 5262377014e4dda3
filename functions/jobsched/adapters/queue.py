"""The run queue (SQS): one message per delivery of a run, sent in batches of 10."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobsched.ports.runs import QueueSendError, RunMessage

MAX_DELAY_S = 900  # SQS DelaySeconds limit


class RunQueue:
    """SQS adapter of the run queue. ``sqs`` is a boto3 SQS client."""

    def __init__(self, sqs: Any, url: str) -> None:
        self.sqs = sqs
        self.url = url

    def send(self, messages: Sequence[RunMessage]) -> None:
        """Send messages in batches of 10 (one request per batch).

        Raises ``QueueSendError`` listing the messages SQS refused (callers retry or leave them to the sweeper).
        """
        failed: list[RunMessage] = []
        for start in range(0, len(messages), 10):
            batch = messages[start : start + 10]
            entries = [
                {"Id": str(i), "MessageBody": m.body(), "DelaySeconds": max(0, min(m.delay_s, MAX_DELAY_S))}
                for i, m in enumerate(batch)
            ]
            response = self.sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            failed.extend(batch[int(f["Id"])] for f in response.get("Failed", []))
        if failed:
            raise QueueSendError(failed)

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        """Make an in-flight message invisible for ``seconds`` more from now (0-43200; worker heartbeats).
        1 request. Raises botocore ClientError (e.g. an expired receipt handle)."""
        self.sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=max(0, min(seconds, 43200))
        )
