"""In-memory fakes of the run queue (``RunSender`` + ``VisibilityExtender``, like ``adapters.queue.RunQueue``),
of its dead-letter queue (``DeadLetters``, like ``adapters.queue.DeadLetterQueue``) and of the dead-run sink (``DeadRunSink``, like ``adapters.alerts.DeadRunNotifier``): they record what was
sent, and refuse on demand (``fail_next``) so tests can force the failure paths."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

from jobsched.aws.queue import dead_letter_of
from jobsched.aws.wire import run_message_body
from jobsched.ports.alerts import Alert
from jobsched.ports.run_messages import DeadLetter, DeadRun, QueueSendError, RunMessage


class MemoryRunQueue:
    """Records every accepted message (``sent``, in order) and visibility change (``visibility``: ``(receipt
    handle, seconds)``). ``fail_next`` (a count) makes that many next ``send`` calls raise ``QueueSendError``
    for the whole batch (as SQS's per-entry refusals would), and that many ``change_visibility`` calls raise
    ``ConnectionError``."""

    def __init__(self) -> None:
        self.sent: list[RunMessage] = []
        self.visibility: list[tuple[str, int]] = []
        self.fail_next = 0
        self._lock = threading.Lock()

    def _failing(self) -> bool:
        if self.fail_next > 0:
            self.fail_next -= 1
            return True
        return False

    def send(self, messages: Sequence[RunMessage]) -> None:
        with self._lock:
            if self._failing():
                raise QueueSendError(list(messages))
            self.sent.extend(messages)

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        with self._lock:
            if self._failing():
                raise ConnectionError("visibility change refused (fake)")
            self.visibility.append((receipt_handle, max(0, min(seconds, 43200))))

    def change_visibility_batch(self, receipt_handles: Sequence[str], seconds: int) -> None:
        """``change_visibility`` of each handle (recorded one by one)."""
        for handle in receipt_handles:
            self.change_visibility(handle, seconds)

    def take(self) -> list[RunMessage]:
        """The messages sent so far, emptying the record (a consumer reading the queue)."""
        with self._lock:
            taken, self.sent = self.sent, []
            return taken


class MemoryAlerts:
    """Records every published alert (``published``), as the alerts topic's subscribers would see them."""

    def __init__(self) -> None:
        self.published: list[Alert] = []

    def publish(self, alert: Alert) -> None:
        self.published.append(alert)


class MemoryDeadLetters:
    """The run queue's dead-letter queue: ``letters`` in order; a received letter stays until deleted (a fake
    receive hands out every letter each time, as SQS would once their visibility ran out). ``redrive(message,
    receive_count)`` puts a run message there as SQS's redrive policy would."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []
        self._handles = itertools.count(1)
        self._lock = threading.Lock()

    def redrive(self, message: RunMessage, receive_count: int = 5) -> DeadLetter:
        with self._lock:
            letter = dead_letter_of(run_message_body(message), f"dlq-{next(self._handles)}", receive_count)
            self.letters.append(letter)
            return letter

    def receive(self, limit: int) -> list[DeadLetter]:
        with self._lock:
            return self.letters[:limit]

    def delete(self, receipt_handle: str) -> None:
        with self._lock:
            self.letters = [letter for letter in self.letters if letter.receipt_handle != receipt_handle]


class MemoryDeadRuns:
    """Records every notified dead run (``notified``); ``fail_next`` makes that many next ``notify`` calls
    raise ``ConnectionError`` (nothing recorded), as a lost dead-run message or alert would."""

    def __init__(self) -> None:
        self.notified: list[DeadRun] = []
        self.fail_next = 0
        self._lock = threading.Lock()

    def notify(self, dead: DeadRun) -> None:
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                raise ConnectionError("dead-run notification refused (fake)")
            self.notified.append(dead)
