"""Supervision of a running try: heartbeats (run row and message visibility) and the timeout."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobsched.ports.run_stores import JobSpecs, RunRows, VisibilityExtender
from jobsched.ports.runs import Owned, RunRow
from jobsched.ports.targets import TargetCall, TargetTimedOut

logger = logging.getLogger(__name__)


class TryAbandoned(Exception):
    """``supervise`` stopped a try because its heartbeat said to (``Heartbeat.beat`` returned False): the run
    is no longer ours, or its heartbeat has not been recorded for so long that it would soon look lost."""


class Waiter(Protocol):
    """Monotonic seconds, waiting on an event, and sleeping (the back-off between retried writes, seconds); tests
    pass a fake that moves simulated time."""

    def monotonic(self) -> float: ...

    def wait(self, event: threading.Event, seconds: float) -> bool: ...

    def sleep(self, seconds: float) -> None: ...


class RealWaiter:
    """``time.monotonic`` and ``Event.wait``: the production waiter."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(max(0.0, seconds))

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


# --- heartbeat and supervision ---------------------------------------------------------------------------


@dataclass(kw_only=True, eq=False)
class Heartbeat:
    """One beat per ``heartbeat_interval_s`` while a try runs: ``heartbeat_at = now`` on the run row
    (conditional on still being ours) and the message's visibility extended by ``visibility_s`` (so SQS
    redelivers it only after the beats stop long enough for the run to be taken over).

    ``beat(now_ms)`` is called by ``supervise`` in production and directly by tests. Errors are logged,
    never raised: one missed beat must not fail a try that is running fine. But the beat says when the try
    must stop (returns False), because another worker may run it next:

    - ``lost``: the row refused the beat: it is no longer ours (the sweeper or a redelivery declared this
      worker lost and took the run over, or an operator cancelled the run: ``refused`` is the row as the
      refusal answered it, design §5.8).
    - ``lock_lost``: with ``lock`` (a job whose ``overlap`` locks), the job's overlap lock refused the beat: another
      run took it as stale, so this try must stop before two runs of the job run together.
    - ``expiring``: no beat has been recorded for ``give_up_after_ms`` since ``last_ok_ms`` (the claim, then
      each recorded beat; epoch ms). Callers pass ``heartbeat_stale_s - heartbeat_interval_s``: the next beat
      would come when a claimer may already see the row as stale and take it over.

    ``watched``: a visibility extension failed and the run was put into the sweep index (``_watch``).
    """

    runs: RunRows
    owned: Owned
    visibility: VisibilityExtender | None
    receipt_handle: str | None
    visibility_s: int
    last_ok_ms: int | None = None
    give_up_after_ms: int | None = None
    lock: JobSpecs | None = None
    lost: bool = field(default=False, init=False)
    refused: RunRow | None = field(default=None, init=False)
    lock_lost: bool = field(default=False, init=False)
    expiring: bool = field(default=False, init=False)
    beats: int = field(default=0, init=False)
    watched: bool = field(default=False, init=False)

    def _silent_too_long(self, now_ms: int, *, strictly: bool) -> bool:
        if self.give_up_after_ms is None or self.last_ok_ms is None:
            return False
        silent = now_ms - self.last_ok_ms
        return silent > self.give_up_after_ms if strictly else silent >= self.give_up_after_ms

    def _give_up(self, now_ms: int) -> bool:
        self.expiring = True
        logger.error(
            "heartbeats failing too long: abandoning the try before the run looks lost",
            extra={"run_id": self.owned.run_id, "silent_ms": now_ms - (self.last_ok_ms or now_ms)},
        )
        return False

    def beat(self, now_ms: int) -> bool:
        """Beat once at ``now_ms`` (epoch ms). Returns False when the try must stop (``lost`` or
        ``expiring``); the message's visibility is then left alone."""
        self.beats += 1
        if self._silent_too_long(now_ms, strictly=True):
            # the previous write hung or this beat came late: the row may look stale before a write lands
            return self._give_up(now_ms)
        try:
            renewal = self.runs.renew(self.owned, now_ms=now_ms)
            if not renewal.renewed:
                self.lost, self.refused = True, renewal.row
                logger.warning(
                    "heartbeat refused: the run is no longer ours",
                    extra={"run_id": self.owned.run_id, "status": renewal.row and renewal.row.status.value},
                )
                return False
            if self.lock is not None and not self.lock.renew_overlap(
                self.owned.job_id,
                run_id=self.owned.run_id,
                attempt=self.owned.attempt,
                worker=self.owned.worker,
                now_ms=now_ms,
            ):
                self.lock_lost = True
                logger.warning(
                    "overlap lock taken over: another run of the job may start",
                    extra={"run_id": self.owned.run_id},
                )
                return False
            self.last_ok_ms = now_ms
        except Exception:
            logger.exception(
                "heartbeat write failed", extra={"run_id": self.owned.run_id, "last_ok_ms": self.last_ok_ms}
            )
            if self._silent_too_long(now_ms, strictly=False):
                return self._give_up(now_ms)
        if self.visibility is not None and self.receipt_handle:
            try:
                self.visibility.change_visibility(self.receipt_handle, self.visibility_s)
            except Exception:
                logger.exception("visibility extension failed", extra={"run_id": self.owned.run_id})
                self._watch(now_ms)
        return True

    def _watch(self, now_ms: int) -> None:
        """After a failed visibility extension, once: the message may be gone (a copy of it acknowledged) or come
        back early, so the run goes into the sweep index (``RunRows.watch``), due when this extension would have
        ended; a worker lost later is then taken over by the sweeper. Errors are logged (the next failure tries
        again)."""
        if self.watched:
            return
        try:
            self.runs.watch(self.owned, sweep_at_ms=now_ms + self.visibility_s * 1000)
            self.watched = True
        except Exception:
            logger.exception("run not put in the sweep index", extra={"run_id": self.owned.run_id})

    def hold(self, now_ms: int) -> bool:
        """While the try's outcome is being recorded (``domain.outcomes.OutcomeWrites``): one beat of the row
        (``heartbeat_at = now_ms``, conditional on the claim) and the message's visibility extended by
        ``visibility_s``, each made whether or not the other fails (errors logged), so no other worker takes the
        run over while this one still retries its outcome. The overlap lock is not renewed: the try has ended. Returns False when
        the row refused the beat (``lost``: it is no longer running under this claim), else True."""
        try:
            if not self.runs.heartbeat(self.owned, now_ms=now_ms):
                self.lost = True
                return False
            self.last_ok_ms = now_ms
        except Exception:
            logger.exception("heartbeat write failed while recording", extra={"run_id": self.owned.run_id})
        if self.visibility is not None and self.receipt_handle:
            try:
                self.visibility.change_visibility(self.receipt_handle, self.visibility_s)
            except Exception:
                logger.exception(
                    "visibility extension failed while recording", extra={"run_id": self.owned.run_id}
                )
                self._watch(now_ms)
        return True

    def expiring_error(self, now_ms: int) -> str:
        """The error recorded for a try abandoned because its heartbeats kept failing."""
        silent_s = (now_ms - (self.last_ok_ms if self.last_ok_ms is not None else now_ms)) / 1000
        return (
            f"attempt {self.owned.attempt} abandoned: its heartbeat could not be recorded for {silent_s:g} s "
            "(the run would soon look lost and be taken over)"
        )


def supervise(
    work: Callable[[], str],
    *,
    call: TargetCall,
    beat: Callable[[], bool] | None,
    interval_s: float,
    waiter: Waiter,
) -> str:
    """Run ``work`` (one try) in a daemon thread; call ``beat`` every ``interval_s`` seconds while it runs.

    Past ``call.timeout_s`` seconds (monotonic, from ``waiter``) the try is cancelled (``call.cancel``: a
    shell command is killed, a cooperative command stops) and abandoned, raising ``TargetTimedOut``. When
    ``beat`` returns False the try is cancelled and abandoned the same way, raising ``TryAbandoned``.
    Returns ``work``'s result or re-raises its exception. ``call.ended`` is set when ``work`` has returned, so
    after a cancel the caller can tell whether the try really stopped.
    """
    done = call.ended
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = work()
        except BaseException as error:
            result["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name=f"try-{call.run_id}-{call.attempt}", daemon=True).start()
    start = waiter.monotonic()
    deadline = start + call.timeout_s
    next_beat = start + interval_s
    while not done.is_set():
        now = waiter.monotonic()
        if now >= deadline:
            call.cancel.cancel()
            raise TargetTimedOut(f"timed out after {call.timeout_s:g} s (timeout_s)")
        if now >= next_beat:
            if beat is not None and not beat():
                call.cancel.cancel()
                raise TryAbandoned(f"try abandoned after {now - start:g} s: told to stop by its heartbeat")
            next_beat = now + interval_s
        waiter.wait(done, min(deadline, next_beat) - now)
    if "error" in result:
        raise result["error"]
    return str(result["value"])
