"""Local mode's run queue with SQS's semantics, off moto: the part of the SQS API the run queue's users call
(``jobsched.aws.queue.RunQueue`` and ``jobsched.local.event_source.SqsEventSource``), on an SQLite
database of its own: a file in local mode's data directory (in memory when no path is given, for tests).

Why: profiled at 50 runs a second, moto's SQS recomputes every queue attribute by a pass over all its
messages on each ``SendMessageBatch`` (``moto.sqs.models.Queue.attributes``), so a send costs by queue length,
and that was the largest share of local mode's CPU once the tables were on SQLite. Here a send, a receive and a
delete each cost by the messages they touch (an index on ``(queue, visible_at)``).

The semantics kept (those of a standard SQS queue with a redrive policy): ``DelaySeconds`` (0-900) defers a
message's first visibility; a receive makes each message invisible for the queue's visibility timeout and
gives it a new receipt handle and ``ApproximateReceiveCount``; only the latest receipt handle deletes it or
changes its visibility (an older one is refused, as SQS refuses an expired handle); a message received
``max_receive_count`` times and not deleted goes to the dead-letter queue at its next receive instead of being
delivered again; ``WaitTimeSeconds`` long-polls. Messages are kept across restarts and a ``kill -9`` (WAL,
``synchronous=NORMAL``: a committed send is in the kernel's hands): a scheduled run has no row until a worker
claims it, so its message is its only record (design §4.2). At open, the messages received by the previous
process and not deleted are visible again at once (their receipt handles died with it). Times are the injected
``clock``'s epoch ms.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from jobsched.clock import Clock, system_clock
from jobsched.sqlite.database import checked_synchronous, create_private, is_transient

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, queue TEXT NOT NULL,"
    " body TEXT NOT NULL, sent_at INTEGER NOT NULL, visible_at INTEGER NOT NULL, receive_count INTEGER NOT NULL,"
    " first_received_at INTEGER, receipt TEXT, grp TEXT)",
    "CREATE INDEX IF NOT EXISTS messages_visible ON messages (queue, visible_at, seq)",
    "CREATE UNIQUE INDEX IF NOT EXISTS messages_receipt ON messages (receipt) WHERE receipt IS NOT NULL",
)
MAX_DELAY_S = 900
MAX_VISIBILITY_S = 43_200
MAX_GROUP_ID = 128
"""SQS's limit on a ``MessageGroupId``'s length (characters)."""
NOISY_SHARE = 0.10
"""SQS fair queues (AWS docs, "Amazon SQS fair queues"): a message group holding more than this share of the
queue's messages in flight, and at least :data:`NOISY_MIN` of its own, is noisy; the other groups' messages are
received first while it is."""
NOISY_MIN = 30
"""A message group with fewer messages than this in flight is never noisy (:data:`NOISY_SHARE`)."""


def is_noisy(own: int, in_flight: int) -> bool:
    """SQS fair queues' rule: a message group with ``own`` of the queue's ``in_flight`` messages is noisy when
    ``own`` is at least :data:`NOISY_MIN` and above :data:`NOISY_SHARE` of ``in_flight``."""
    return own >= NOISY_MIN and own > NOISY_SHARE * in_flight


_MAIN, _DEAD = "main", "dead"


def queue_arn(url: str) -> str:
    """The ARN of the SQS queue at ``url`` (``https://sqs.<region>.amazonaws.com/<account>/<name>``)."""
    parts = url.rstrip("/").split("/")
    host = parts[2] if len(parts) > 2 else ""
    region = host.split(".")[1] if host.count(".") >= 2 else "us-east-1"
    account, name = (parts[-2], parts[-1]) if len(parts) >= 5 else ("000000000000", parts[-1])
    return f"arn:aws:sqs:{region}:{account}:{name}"


def _error(code: str, message: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


@contextmanager
def _service_errors(operation: str) -> Iterator[None]:
    """A busy or failing queue file (lock timeout, I/O error, full disk) raised as SQS's 5xx
    ``ServiceUnavailable`` ``ClientError``, which the adapters treat as a failed request; other errors as they are."""
    try:
        yield
    except sqlite3.Error as error:
        if is_transient(error):
            raise _error("ServiceUnavailable", f"local run queue: {error}", operation) from error
        raise


class SqliteSqsQueue:
    """One SQS queue (``url``, ``arn``) and its dead-letter queue, answering like a boto3 SQS client for that
    queue, and for the dead-letter queue at ``dead_letter_url`` (receive, delete, visibility: what the sweeper's
    ``DeadLetterQueue`` calls; None: the dead letters are only listed by ``dead_lettered``), whose receives
    hide a letter ``dead_letter_visibility_s`` (that queue's own visibility timeout). ``visibility_timeout_s``: a receive's invisibility; ``max_receive_count``: receives before the
    dead-letter queue (0: never); ``clock``: epoch ms; ``wait``: how a long poll waits (seconds; tests pass a
    fake); ``path``: the database file that keeps the messages (None: in memory), with SQLite's ``synchronous``
    level (``NORMAL`` or ``FULL``, as ``jobsched.sqlite.database`` explains them). Thread-safe. Calls naming another queue URL raise ``ClientError`` ``NonExistentQueue``; bad
    arguments raise ``ClientError`` ``InvalidParameterValue``, as SQS answers them; a busy or failing file (lock
    timeout, I/O error, full disk) ``ClientError`` ``ServiceUnavailable``, as SQS's 5xx (a batch is sent whole or
    not at all)."""

    def __init__(
        self,
        url: str,
        arn: str,
        *,
        visibility_timeout_s: int,
        max_receive_count: int,
        clock: Clock = system_clock,
        wait: Callable[[threading.Condition, float], Any] | None = None,
        path: Path | str | None = None,
        dead_letter_url: str | None = None,
        dead_letter_visibility_s: int = 30,
        synchronous: str = "NORMAL",
    ) -> None:
        checked_synchronous(synchronous)
        self.url = url
        self.dead_letter_url = dead_letter_url
        self.dead_letter_visibility_s = dead_letter_visibility_s
        self.arn = arn
        self.visibility_timeout_s = visibility_timeout_s
        self.max_receive_count = max_receive_count
        self.clock = clock
        self._wait = wait or (lambda condition, seconds: condition.wait(seconds))
        if path is not None:
            create_private(Path(path))
        self._conn = sqlite3.connect(
            str(path) if path is not None else ":memory:",
            timeout=5.0,
            isolation_level=None,
            check_same_thread=False,
        )
        if path is not None:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
        for statement in _SCHEMA:
            self._conn.execute(statement)
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(messages)")}
        if "grp" not in columns:  # a file written before messages kept their group
            self._conn.execute("ALTER TABLE messages ADD COLUMN grp TEXT")
        # a previous process's receipts died with it: what it received and did not delete is visible again
        self._conn.execute(
            "UPDATE messages SET receipt = NULL, visible_at = MIN(visible_at, ?) WHERE receipt IS NOT NULL",
            (clock(),),
        )
        self._lock = threading.RLock()
        self._arrived = threading.Condition(self._lock)
        self._latest = 0

    def _now(self) -> int:
        """The queue's time: the clock's epoch ms, never before a time it already used (SQS's own time does not
        step back when a host's clock is corrected: a message sent without delay is visible at once)."""
        with self._lock:
            self._latest = max(self._latest, self.clock())
            return self._latest

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction on the queue file (the caller holds the lock): committed when the block ends, rolled
        back when it raises."""
        self._conn.execute("BEGIN")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def _check(self, url: str, operation: str) -> None:
        if url != self.url:
            raise _error(
                "AWS.SimpleQueueService.NonExistentQueue", f"no queue {url!r} in local mode", operation
            )

    def _queue_of(self, url: str, operation: str) -> str:
        """The stored queue name (``main`` or ``dead``) of ``url``; ``_check``'s error for another URL."""
        if url == self.dead_letter_url:
            return _DEAD
        self._check(url, operation)
        return _MAIN

    # --- sending --------------------------------------------------------------------------------

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        """Enqueue each entry (``Id``, ``MessageBody``, ``DelaySeconds``, ``MessageGroupId``: 1-128 characters,
        optional, as on a standard queue); ``Successful`` lists them all."""
        self._check(QueueUrl, "SendMessageBatch")
        if not 1 <= len(Entries) <= 10:
            raise _error(
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "1 to 10 entries", "SendMessageBatch"
            )
        now = self._now()
        done = []
        with self._lock, _service_errors("SendMessageBatch"):
            with self._transaction():  # the batch is written whole or not at all
                for entry in Entries:
                    delay = int(entry.get("DelaySeconds", 0))
                    if not 0 <= delay <= MAX_DELAY_S:
                        raise _error(
                            "InvalidParameterValue", f"DelaySeconds {delay} not in 0-900", "SendMessageBatch"
                        )
                    group = entry.get("MessageGroupId")
                    if group is not None and not 1 <= len(str(group)) <= MAX_GROUP_ID:
                        raise _error(
                            "InvalidParameterValue",
                            "MessageGroupId must be 1-128 characters",
                            "SendMessageBatch",
                        )
                    message_id = str(uuid.uuid4())
                    body = str(entry["MessageBody"])
                    self._conn.execute(
                        "INSERT INTO messages (id, queue, body, sent_at, visible_at, receive_count, grp)"
                        " VALUES (?, ?, ?, ?, ?, 0, ?)",
                        (message_id, _MAIN, body, now, now + delay * 1000, group),
                    )
                    done.append(
                        {
                            "Id": entry["Id"],
                            "MessageId": message_id,
                            "MD5OfMessageBody": hashlib.md5(body.encode()).hexdigest(),
                        }
                    )
            self._arrived.notify_all()
        return {"Successful": done, "Failed": []}

    def send_message(self, *, QueueUrl: str, MessageBody: str, DelaySeconds: int = 0) -> dict[str, Any]:
        """One message (``send_message_batch`` of one)."""
        sent = self.send_message_batch(
            QueueUrl=QueueUrl, Entries=[{"Id": "0", "MessageBody": MessageBody, "DelaySeconds": DelaySeconds}]
        )["Successful"][0]
        return {"MessageId": sent["MessageId"], "MD5OfMessageBody": sent["MD5OfMessageBody"]}

    # --- receiving ------------------------------------------------------------------------------

    def receive_message(
        self,
        *,
        QueueUrl: str,
        MaxNumberOfMessages: int = 1,
        WaitTimeSeconds: int = 0,
        VisibilityTimeout: int | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Up to ``MaxNumberOfMessages`` (1-10) visible messages, oldest visible first, each with its new
        ``ReceiptHandle`` and ``Attributes`` (``ApproximateReceiveCount``, ``SentTimestamp``,
        ``ApproximateFirstReceiveTimestamp``, ``MessageGroupId`` when sent with one); waits up to
        ``WaitTimeSeconds`` for one to arrive. As SQS fair queues do, while a message group is noisy
        (:func:`is_noisy`) the other groups' visible messages come first."""
        queue = self._queue_of(QueueUrl, "ReceiveMessage")
        if not 1 <= MaxNumberOfMessages <= 10:
            raise _error("InvalidParameterValue", "MaxNumberOfMessages must be 1-10", "ReceiveMessage")
        default_s = self.visibility_timeout_s if queue == _MAIN else self.dead_letter_visibility_s
        hidden_ms = (default_s if VisibilityTimeout is None else VisibilityTimeout) * 1000
        deadline = self._now() + max(0, WaitTimeSeconds) * 1000
        with self._lock, _service_errors("ReceiveMessage"):
            while True:
                got = self._take(queue, MaxNumberOfMessages, hidden_ms)
                now = self._now()
                if got or now >= deadline:
                    return {"Messages": got} if got else {}
                soonest = self._conn.execute(
                    "SELECT min(visible_at) FROM messages WHERE queue = ?", (queue,)
                ).fetchone()[0]
                until = min(deadline, soonest) if soonest is not None else deadline
                self._wait(self._arrived, max(0.001, (until - now) / 1000))

    def _take(self, queue: str, limit: int, hidden_ms: int) -> list[dict[str, Any]]:
        now = self._now()
        got: list[dict[str, Any]] = []
        with self._transaction():
            noisy = self._noisy_groups(now) if queue == _MAIN else []
            while len(got) < limit:
                rows = self._visible(queue, now, limit - len(got), noisy)
                if not rows:
                    break
                for seq, message_id, body, sent_at, count, first, group in rows:
                    if queue == _MAIN and 0 < self.max_receive_count <= count:  # redrive, as SQS does
                        self._conn.execute(
                            "UPDATE messages SET queue = ?, receipt = NULL, visible_at = ? WHERE seq = ?",
                            (_DEAD, now, seq),
                        )
                        continue
                    receipt = f"{message_id}#{uuid.uuid4().hex}"
                    first = first if first is not None else now
                    self._conn.execute(
                        "UPDATE messages SET receive_count = ?, receipt = ?, visible_at = ?, first_received_at = ?"
                        " WHERE seq = ?",
                        (count + 1, receipt, now + hidden_ms, first, seq),
                    )
                    got.append(
                        {
                            "MessageId": message_id,
                            "ReceiptHandle": receipt,
                            "Body": body,
                            "MD5OfBody": hashlib.md5(body.encode()).hexdigest(),
                            "Attributes": {
                                "ApproximateReceiveCount": str(count + 1),
                                "SentTimestamp": str(sent_at),
                                "ApproximateFirstReceiveTimestamp": str(first),
                                "SenderId": "jobsched-local",
                                **({"MessageGroupId": group} if group is not None else {}),
                            },
                        }
                    )
        return got

    def _noisy_groups(self, now: int) -> list[str]:
        """The message groups noisy now (:func:`is_noisy`), from the main queue's messages in flight (received,
        not visible again)."""
        counts = self._conn.execute(
            "SELECT grp, count(*) FROM messages WHERE queue = ? AND visible_at > ? AND receipt IS NOT NULL"
            " GROUP BY grp",
            (_MAIN, now),
        ).fetchall()
        total = sum(count for _, count in counts)
        return [group for group, count in counts if group is not None and is_noisy(count, total)]

    def _visible(self, queue: str, now: int, limit: int, noisy: list[str]) -> list[tuple[Any, ...]]:
        """Up to ``limit`` visible messages of ``queue``, oldest visible first: the ``noisy`` groups' only after
        every other's."""
        columns = "SELECT seq, id, body, sent_at, receive_count, first_received_at, grp FROM messages"
        order = "ORDER BY visible_at, seq LIMIT ?"
        if not noisy:
            return self._conn.execute(
                f"{columns} WHERE queue = ? AND visible_at <= ? {order}", (queue, now, limit)
            ).fetchall()
        marks = ", ".join("?" * len(noisy))
        quiet = self._conn.execute(
            f"{columns} WHERE queue = ? AND visible_at <= ? AND (grp IS NULL OR grp NOT IN ({marks})) {order}",
            (queue, now, *noisy, limit),
        ).fetchall()
        if len(quiet) >= limit:
            return quiet
        loud = self._conn.execute(
            f"{columns} WHERE queue = ? AND visible_at <= ? AND grp IN ({marks}) {order}",
            (queue, now, *noisy, limit - len(quiet)),
        ).fetchall()
        return quiet + loud

    # --- deleting and visibility ------------------------------------------------------------------

    def delete_message(self, *, QueueUrl: str, ReceiptHandle: str) -> dict[str, Any]:
        """Delete the message ``ReceiptHandle`` was issued for, if it is still its latest (else nothing,
        as SQS does for a handle of a deleted message)."""
        queue = self._queue_of(QueueUrl, "DeleteMessage")
        with self._lock, _service_errors("DeleteMessage"):
            self._conn.execute("DELETE FROM messages WHERE receipt = ? AND queue = ?", (ReceiptHandle, queue))
        return {}

    def delete_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        """``delete_message`` for each entry (``Id``, ``ReceiptHandle``)."""
        for entry in Entries:
            self.delete_message(QueueUrl=QueueUrl, ReceiptHandle=entry["ReceiptHandle"])
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}

    def change_message_visibility(
        self, *, QueueUrl: str, ReceiptHandle: str, VisibilityTimeout: int
    ) -> dict[str, Any]:
        """Make the in-flight message of ``ReceiptHandle`` visible ``VisibilityTimeout`` s (0-43200) from now.
        Raises ``ClientError`` ``InvalidParameterValue`` when the handle is not the message's latest or the
        message is no longer in flight (SQS: the receipt handle has expired)."""
        queue = self._queue_of(QueueUrl, "ChangeMessageVisibility")
        if not 0 <= VisibilityTimeout <= MAX_VISIBILITY_S:
            raise _error(
                "InvalidParameterValue", "VisibilityTimeout must be 0-43200", "ChangeMessageVisibility"
            )
        now = self._now()
        with self._lock, _service_errors("ChangeMessageVisibility"):
            changed = self._conn.execute(
                "UPDATE messages SET visible_at = ? WHERE receipt = ? AND queue = ? AND visible_at > ?",
                (now + VisibilityTimeout * 1000, ReceiptHandle, queue, now),
            ).rowcount
            if VisibilityTimeout == 0:
                self._arrived.notify_all()
        if not changed:
            raise _error(
                "InvalidParameterValue",
                f"Value {ReceiptHandle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
                "ChangeMessageVisibility",
            )
        return {}

    def change_message_visibility_batch(
        self, *, QueueUrl: str, Entries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """``change_message_visibility`` for each entry; a refused one is listed in ``Failed``."""
        done, failed = [], []
        for entry in Entries:
            try:
                self.change_message_visibility(
                    QueueUrl=QueueUrl,
                    ReceiptHandle=entry["ReceiptHandle"],
                    VisibilityTimeout=entry["VisibilityTimeout"],
                )
                done.append({"Id": entry["Id"]})
            except ClientError as error:
                failed.append(
                    {"Id": entry["Id"], "Code": error.response["Error"]["Code"], "SenderFault": True}
                )
        return {"Successful": done, "Failed": failed}

    def get_queue_attributes(
        self, *, QueueUrl: str, AttributeNames: list[str] | None = None
    ) -> dict[str, Any]:
        """``QueueArn`` and the approximate counts (visible, in flight, delayed) of the queue."""
        self._check(QueueUrl, "GetQueueAttributes")
        now = self._now()
        with self._lock, _service_errors("GetQueueAttributes"):
            visible, hidden, delayed = self._conn.execute(
                "SELECT sum(visible_at <= ?), sum(visible_at > ? AND receive_count > 0),"
                " sum(visible_at > ? AND receive_count = 0) FROM messages WHERE queue = ?",
                (now, now, now, _MAIN),
            ).fetchone()
        return {
            "Attributes": {
                "QueueArn": self.arn,
                "ApproximateNumberOfMessages": str(visible or 0),
                "ApproximateNumberOfMessagesNotVisible": str(hidden or 0),
                "ApproximateNumberOfMessagesDelayed": str(delayed or 0),
            }
        }

    def checkpoint(self) -> None:
        """Sync the queue file's WAL to the disk and copy it into the file (a passive checkpoint, as
        ``SqliteDatabase.checkpoint``): local mode calls both each second. Raises ``sqlite3.Error``."""
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def dead_lettered(self) -> list[str]:
        """The bodies of the messages moved to the dead-letter queue, oldest first."""
        with self._lock:
            return [
                b
                for (b,) in self._conn.execute(
                    "SELECT body FROM messages WHERE queue = ? ORDER BY seq", (_DEAD,)
                )
            ]
