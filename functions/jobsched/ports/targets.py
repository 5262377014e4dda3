"""The targets port: what every target receives (``TargetCall``), how a try fails (``TargetFailed`` and its
kinds), its cancellation (``CancelToken``), the bounds of what a try keeps of a target's output, and the
interface of an executor (``Executor``; ``jobsched.targets.Targets`` dispatches to one per target type).

Every target receives the run id as its idempotency key (design §5.5): the same on every delivery and every
attempt of one run.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobsched.clock import iso_utc
from jobsched.models import DEFAULT_CANCEL_GRACE_S, MAX_ERROR_CHARS


class TargetFailed(Exception):
    """The try failed. ``str(error)`` is the message recorded on the run as its ``error``."""


class TargetNotStarted(TargetFailed):
    """The try could not reach its target for a transient reason before anything was sent (e.g. STS throttled
    the role the worker assumes for the job's owner): the worker gives the claim back instead of counting a
    try."""


class TargetTimedOut(TargetFailed):
    """The try ran past the job's ``timeout_s`` and was abandoned (a shell command is killed)."""


def truncate(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, marked when cut (errors stored on runs: MAX_ERROR_CHARS)."""
    if len(text) <= limit:
        return text
    marker = " ... [truncated]"
    return text[: max(0, limit - len(marker))] + marker


SUCCESS_OUTPUT_BYTES = 256
"""Bytes of output kept of a successful try (its run row must stay small on the happy path)."""
FAILED_OUTPUT_BYTES = 3072
"""Bytes of output kept of a failed try (with its error, at most 1 KiB, a failed try keeps at most 4 KiB)."""
CUT_MARK = "..."


def head_bytes(text: str, limit: int) -> str:
    """The start of ``text`` within ``limit`` UTF-8 bytes (never a broken character), ending in ``...`` when
    cut. ``limit`` >= 3."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: limit - len(CUT_MARK)].decode("utf-8", "ignore") + CUT_MARK


def tail_bytes(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` UTF-8 bytes (never a broken character), starting with ``...`` when
    cut (a command's output: the end says what went wrong). ``limit`` >= 3."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return CUT_MARK + data[len(data) - (limit - len(CUT_MARK)) :].decode("utf-8", "ignore")


def output_limit(failed: bool) -> int:
    """Bytes of output a try keeps: ``FAILED_OUTPUT_BYTES`` when it failed, else ``SUCCESS_OUTPUT_BYTES``."""
    return FAILED_OUTPUT_BYTES if failed else SUCCESS_OUTPUT_BYTES


def tail(text: str, limit: int = 1000) -> str:
    """The last ``limit`` characters of ``text`` (a command's stderr: the end says what went wrong)."""
    return text if len(text) <= limit else "..." + text[-limit:]


class CancelToken:
    """Set when the worker abandons a try (timeout). Long-running code waits on it (``wait``) or registers a
    callback (``on_cancel``, e.g. killing a process group); callbacks run once, in the cancelling thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when cancelled meanwhile."""
        return self._event.wait(seconds)

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` at cancellation (at once if already cancelled)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def cancel(self) -> None:
        """Cancel: set the flag and run the registered callbacks (their errors are ignored)."""
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            with contextlib.suppress(Exception):  # a failed cleanup must not hide the timeout
                callback()


@dataclass
class TargetCall:
    """One try of one run, as handed to a target.

    ``scheduled_for_ms`` is the run's nominal fire instant (epoch ms, UTC); ``attempt`` is 1-based;
    ``timeout_s`` is the job's timeout (already capped by the deployment's worker cap); ``input`` is the
    job's JSON input; ``owner`` the job's owner (``lambda`` and ``sqs`` targets act for it:
    ``jobsched.targets.ownership``); ``upstream_run_id`` a chained run's upstream run (design §2.1), None for
    any other run.

    ``output``: set by the executor to an excerpt of what the target said, already within ``output_limit``
    (http: status and the head of the body; shell: the tails of stdout and stderr; lambda: the head of the
    response payload or of the function error; sqs: the message id; command: the returned value as JSON).
    The worker records it with the try (``jobsched.ports.tries``); None: the target said nothing worth keeping.
    """

    run_id: str
    job_id: str
    scheduled_for_ms: int
    attempt: int
    input: Any = None
    timeout_s: float = 300.0
    owner: str | None = None
    upstream_run_id: str | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    stop_grace_s: float = float(DEFAULT_CANCEL_GRACE_S)
    """Seconds a cancelled ``shell`` command's process group has between SIGTERM and SIGKILL (the job's
    ``cancel_grace_s``)."""
    output: str | None = None
    ended: threading.Event = field(default_factory=threading.Event)
    """Set by the worker's supervisor once the try's code has returned (or raised): after a cancel, whether the
    try has really stopped."""

    @property
    def idempotency_key(self) -> str:
        """The run id: identical on every delivery and attempt of the run."""
        return self.run_id

    @property
    def scheduled_for(self) -> str:
        """``scheduled_for`` as ISO 8601 UTC (``2026-12-04T18:00:00Z``)."""
        return iso_utc(self.scheduled_for_ms)

    def envelope(self) -> dict[str, Any]:
        """The run envelope sent to ``lambda`` and ``sqs`` targets (design §5.5):
        ``{run_id, job_id, scheduled_for (ISO UTC), attempt, input}``, and ``upstream_run_id`` for a chained
        run (design §2.1)."""
        envelope = {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "scheduled_for": self.scheduled_for,
            "attempt": self.attempt,
            "input": self.input,
        }
        if self.upstream_run_id is not None:
            envelope["upstream_run_id"] = self.upstream_run_id
        return envelope


class Executor(Protocol):
    """Runs one kind of target. Returns a short description of the result (for logs); raises
    ``TargetFailed`` (or ``TargetTimedOut``) when the try failed."""

    def execute(self, target: Any, call: TargetCall) -> str: ...
