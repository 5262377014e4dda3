"""The run side's ports: the run-queue message, the dead run, and the interfaces the worker, the sweeper
and the scheduler need from the run store, the run queue and the dead-run notifier."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jobsched.targets.base import TargetCall, iso_utc

MAX_DELAY_S = 900
"""SQS DelaySeconds limit: a run message is deferred by at most this."""


@dataclass(frozen=True)
class RunMessage:
    """The body of a run-queue message: the run's key. ``delay_s`` (0-900) defers delivery."""

    job_id: str
    scheduled_for: int  # epoch ms
    delay_s: int = 0

    def body(self) -> str:
        return json.dumps({"job_id": self.job_id, "scheduled_for": self.scheduled_for}, separators=(",", ":"))

    @classmethod
    def parse(cls, body: str) -> RunMessage:
        """Parse a message body; raises ValueError (KeyError/TypeError wrapped) for a malformed one."""
        try:
            data = json.loads(body)
            return cls(job_id=str(data["job_id"]), scheduled_for=int(data["scheduled_for"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"malformed run message: {body[:200]!r}") from error


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

    def envelope(self) -> dict[str, Any]:
        """The dead-run queue message: the run envelope (``run_id, job_id, scheduled_for, attempt, input``)
        plus ``owner``, ``job_name``, ``schedule``, ``timezone``, ``target_type``, ``error``, ``dead_at``."""
        return {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "scheduled_for": iso_utc(self.scheduled_for_ms),
            "attempt": self.attempts,
            "input": self.input,
            "owner": self.owner,
            "job_name": self.job_name,
            "schedule": self.schedule,
            "timezone": self.timezone,
            "target_type": self.target_type,
            "error": self.error,
            "dead_at": iso_utc(self.dead_at_ms),
        }


# --- the interfaces ------------------------------------------------------------------


class RunRows(Protocol):
    """The run lifecycle writes (``jobsched.store.runs.RunStore``)."""

    def claim(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        worker: str,
        now_ms: int,
        stale_before_ms: int,
        retry_due_by_ms: int,
    ) -> tuple[bool, dict[str, Any] | None]: ...

    def heartbeat(
        self, job_id: str, scheduled_for_ms: int, *, attempt: int, worker: str, now_ms: int
    ) -> bool: ...

    def succeed(
        self, job_id: str, scheduled_for_ms: int, *, attempt: int, worker: str, now_ms: int
    ) -> bool: ...

    def retry(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        attempt: int,
        worker: str,
        error: str,
        retry_at_ms: int,
        sweep_at_ms: int,
        heartbeat_at: int | None = None,
    ) -> bool: ...

    def dead(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        attempt: int,
        worker: str,
        now_ms: int,
        error: str,
        final_attempt: int,
        notify_at_ms: int,
        heartbeat_at: int | None = None,
    ) -> bool: ...

    def notified(self, job_id: str, scheduled_for_ms: int) -> bool: ...

    def skip(
        self,
        job_id: str,
        scheduled_for_ms: int,
        *,
        attempt: int,
        worker: str,
        now_ms: int,
        reason: str,
        heartbeat_at: int | None = None,
    ) -> bool: ...

    def give_back(
        self, job_id: str, scheduled_for_ms: int, *, attempt: int, worker: str, before: dict[str, Any]
    ) -> bool: ...

    def get(self, job_id: str, scheduled_for_ms: int) -> dict[str, Any] | None: ...


class JobSpecs(Protocol):
    """A job's spec item (``get_spec``: None when deleted) and its overlap lock (``jobsched.store.jobs.JobStore``):
    ``acquire_overlap`` returns None when taken, else the lock item of the try holding it."""

    def get_spec(self, job_id: str) -> dict[str, Any] | None: ...

    def acquire_overlap(
        self,
        job_id: str,
        *,
        run_id: str,
        attempt: int,
        worker: str,
        now_ms: int,
        stale_before_ms: int,
        expires_at_s: int,
        replacing: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None: ...

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool: ...

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> None: ...


class RunSender(Protocol):
    """Sends run messages (``jobsched.adapters.queue.RunQueue``). Raises on refusal."""

    def send(self, messages: Sequence[RunMessage]) -> None: ...


class VisibilityExtender(Protocol):
    """Extends an in-flight message's visibility (``RunQueue.change_visibility``)."""

    def change_visibility(self, receipt_handle: str, seconds: int) -> None: ...


class DeadRunSink(Protocol):
    """Dead-run queue + owner alert (``jobsched.adapters.alerts.DeadRunNotifier``). Raises on failure."""

    def notify(self, dead: DeadRun) -> None: ...


class TargetRunner(Protocol):
    """Runs one try against a target (``jobsched.targets.Targets``); raises ``TargetFailed``."""

    def execute(self, target: Any, call: TargetCall) -> str: ...
