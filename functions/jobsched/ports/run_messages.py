"""The run side's messages: the run-queue message, one delivery of it to a worker, a letter of the run queue's
dead-letter queue, and the dead run the dead-run notifier sends. Their wire formats are
``jobsched.aws.wire``'s.

Every instant is an int of epoch milliseconds (UTC)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobsched.ports.lateness import LatenessLabels
from jobsched.ports.runs import RunKey

MAX_DELAY_S = 900
"""SQS DelaySeconds limit: a run message is deferred by at most this."""


@dataclass(frozen=True)
class RunMessage:
    """The body of a run-queue message: the run's key. ``delay_s`` (0-900) defers delivery.

    A scheduled run has no row until a worker claims it: its message is its durable record (design §4.2), so
    the scheduler adds what the claim writes into the new row: ``dispatch_at`` (the fire plus the job's jitter
    offset) and ``enqueued_at``, epoch ms, and ``term`` (the fencing term of the scheduler that sent it).
    ``enqueued_at`` is when the message was sent, at or after its run's current round was queued (the row's
    ``enqueued_at``, which a re-run or a backfill sets anew): every sender sets it, so a letter of an earlier
    round is told apart (``message_round_began``). ``owner``: the job's owner, sent as the message's
    ``MessageGroupId`` (SQS fair queues: design §4.10), not in the body. ``labels``: what the run's lateness is
    counted under (priority, and owner or ``other``: ``jobsched.domain.lateness``), set by the tick. All are
    optional (messages of earlier versions carry none) and take no part in equality: a message names its run by
    key.
    """

    job_id: str
    scheduled_for: int  # epoch ms
    delay_s: int = 0
    dispatch_at: int | None = field(default=None, compare=False)
    enqueued_at: int | None = field(default=None, compare=False)
    term: int | None = field(default=None, compare=False)
    owner: str | None = field(default=None, compare=False)
    labels: LatenessLabels | None = field(default=None, compare=False)

    @property
    def key(self) -> RunKey:
        return RunKey(self.job_id, self.scheduled_for)


@dataclass(frozen=True)
class Delivery:
    """One delivery of a run message to a worker (built from an SQS record by ``adapters.queue.delivery_of``).

    ``worker`` names the claimer (the Lambda request id, or host/pid/thread); ``receipt_handle`` is None when
    the delivery is not from SQS (nothing to extend); ``receive_count`` is SQS's ApproximateReceiveCount;
    ``remaining_ms`` returns the milliseconds left in the invocation (None: no limit)."""

    message: RunMessage
    worker: str
    receipt_handle: str | None = None
    receive_count: int = 1
    remaining_ms: Callable[[], int] | None = None


@dataclass(frozen=True)
class DeadLetter:
    """A message of the run queue's dead-letter queue: its ``body`` (a ``RunMessage`` body, or anything a
    producer got wrong), the ``receipt_handle`` that deletes it, how many times the run queue delivered it
    before redriving it here (``receive_count``, 0 when unknown), and ``message``, the body parsed by the queue
    adapter (None: the body is not a run message)."""

    body: str
    receipt_handle: str
    receive_count: int = 0
    message: RunMessage | None = field(kw_only=True)


class QueueSendError(Exception):
    """Some messages of a batch were not accepted; ``failed`` lists them."""

    def __init__(self, failed: list[RunMessage]) -> None:
        super().__init__(f"{len(failed)} run message(s) not accepted by SQS")
        self.failed = failed


@dataclass(frozen=True)
class DeadRun:
    """A run that ended ``dead``. Instants are epoch ms (UTC); ``attempts`` is the number of tries made."""

    run_id: str
    job_id: str
    scheduled_for_ms: int
    attempts: int
    error: str
    dead_at_ms: int
    owner: str | None = None
    job_name: str | None = None
    schedule: str | None = None
    timezone: str | None = None
    target_type: str | None = None
    input: Any = None
    alert: bool = (
        True  # the job's alerts.on_dead: whether the owner's alert goes out with the dead-run message
    )
