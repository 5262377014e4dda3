"""The run archive on AWS (design §11): objects in the archive bucket (S3), and the spill queue (SQS) that keeps a
batch's objects, whole, when the bucket refuses them."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.domain.archive import split_object
from jobsched.ports.archive import ArchiveObject, ArchiveUnavailable

ARCHIVE_BUCKET_ENV = "ARCHIVE_BUCKET"
"""The archive function's environment variable naming the archive bucket."""
ARCHIVE_SPILL_ENV = "ARCHIVE_SPILL_URL"
"""The archive function's environment variable naming the spill queue's URL."""
SPILL_PART_BYTES = 180_000
"""The largest gzip body one spill message carries (base64 makes it 4/3 larger; SQS takes 256 KiB)."""
SPILL_KIND = "archive-object"


@dataclass(frozen=True)
class S3ArchiveObjects:
    """``ports.archive.ArchiveObjects`` on ``bucket`` through an S3 ``client``: one ``PutObject`` per object
    (``Content-Type: application/json``, ``Content-Encoding: gzip``; the bucket's default encryption)."""

    client: Any
    bucket: str

    def put(self, item: ArchiveObject) -> None:
        """Write ``item``. Raises ``ArchiveUnavailable`` when S3 refuses or cannot be reached (after botocore's
        own retries)."""
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=item.key,
                Body=item.body,
                ContentType="application/json",
                ContentEncoding="gzip",
            )
        except (ClientError, BotoCoreError) as error:
            raise ArchiveUnavailable(f"s3://{self.bucket}/{item.key}: {error}") from error


def spill_message(item: ArchiveObject) -> str:
    """The spill message of ``item``: ``{"kind": "archive-object", "key", "rows", "body": <base64 gzip>}``."""
    body = base64.b64encode(item.body).decode()
    return json.dumps({"kind": SPILL_KIND, "key": item.key, "rows": item.rows, "body": body})


def spilled_object(message: str) -> ArchiveObject:
    """The object a spill message carries. Raises ``ValueError`` (or ``KeyError``) when it is none."""
    value = json.loads(message)
    if value.get("kind") != SPILL_KIND:
        raise ValueError(f"not a spilled archive object: kind {value.get('kind')!r}")
    return ArchiveObject(str(value["key"]), base64.b64decode(value["body"]), int(value["rows"]))


@dataclass(frozen=True)
class SqsArchiveSpill:
    """``ports.archive.ArchiveSpill`` on the spill queue ``queue_url`` (an SQS ``client``): one message per object,
    an object over ``SPILL_PART_BYTES`` split into parts (``domain.archive.split_object``)."""

    client: Any
    queue_url: str

    def spill(self, items: Sequence[ArchiveObject]) -> None:
        """Send every object of ``items``, each part its own message. Raises the client's error."""
        for item in items:
            for part in split_object(item, SPILL_PART_BYTES):
                self.client.send_message(QueueUrl=self.queue_url, MessageBody=spill_message(part))


def redrive(
    client: Any, queue_url: str, store: S3ArchiveObjects, *, max_messages: int = 1000
) -> dict[str, int]:
    """Write the objects waiting in the spill queue to ``store``, deleting each message once its object is
    written, until the queue answers empty or ``max_messages`` were read. A message that is no spilled object is
    left (it comes back after its visibility timeout); a write that fails stops the pass (raises
    ``ArchiveUnavailable``), its message and the rest of those received made visible again for the next. Returns ``{"written": n, "left": m}``."""
    written = left = 0
    while written + left < max_messages:
        answer = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        messages = answer.get("Messages") or []
        if not messages:
            break
        for index, message in enumerate(messages):
            try:
                item = spilled_object(message["Body"])
            except (ValueError, KeyError):
                left += 1
                continue
            try:
                store.put(item)
            except ArchiveUnavailable:
                _release(client, queue_url, messages[index:])
                raise
            client.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            written += 1
    return {"written": written, "left": left}


def _release(client: Any, queue_url: str, messages: Sequence[dict[str, Any]]) -> None:
    """Make received ``messages`` visible again at once (the next pass retries them, not after the visibility
    timeout)."""
    for message in messages:
        client.change_message_visibility(
            QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
