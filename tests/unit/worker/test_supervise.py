"""``supervise``: heartbeats on an interval and the timeout, driven in simulated time (no sleeping)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from jobsched.clock import iso_utc
from jobsched.domain.retries import lost_worker_error
from jobsched.domain.supervision import TryAbandoned, supervise
from jobsched.ports.targets import TargetCall, TargetFailed, TargetTimedOut, truncate


class SimWaiter:
    """Simulated monotonic time; ``release_at`` lets the try finish once that much time has passed (then the
    wait gives it up to 30 s real to end, so a busy machine cannot add a heartbeat)."""

    def __init__(self, release: threading.Event | None = None, release_at: float = float("inf")) -> None:
        self.now = 0.0
        self.release = release
        self.release_at = release_at

    def monotonic(self) -> float:
        return self.now

    def wait(self, event: threading.Event, seconds: float) -> bool:
        self.now += seconds
        if self.release is not None and self.now >= self.release_at:
            self.release.set()
        return event.wait(30.0) if self.release is not None and self.release.is_set() else event.is_set()


def _recording(beats: list[float], waiter: SimWaiter) -> Callable[[], bool]:
    """A beat that records when it came and lets the try go on."""

    def beat() -> bool:
        beats.append(waiter.now)
        return True

    return beat


def _call(timeout_s: float) -> TargetCall:
    return TargetCall(run_id="j_1@0", job_id="j_1", scheduled_for_ms=0, attempt=1, timeout_s=timeout_s)


def test_beats_every_interval_while_the_try_runs() -> None:
    # Given a try that ends after 100 s of simulated time, with a 30 s heartbeat interval
    release = threading.Event()
    waiter = SimWaiter(release, release_at=100)
    beats: list[float] = []
    # When it runs under supervision
    result = supervise(
        lambda: "done" if release.wait(30) else "stuck",
        call=_call(300),
        beat=_recording(beats, waiter),
        interval_s=30,
        waiter=waiter,
    )
    # Then it beat at 30, 60 and 90 s, and its result came back
    assert result == "done"
    assert beats == [30, 60, 90]


def test_past_the_timeout_the_try_is_cancelled_and_abandoned() -> None:
    waiter = SimWaiter()
    call = _call(45)
    beats: list[float] = []
    with pytest.raises(TargetTimedOut, match="timed out after 45 s"):
        supervise(
            lambda: "never" if call.cancel.wait(5) else "x",
            call=call,
            beat=_recording(beats, waiter),
            interval_s=30,
            waiter=waiter,
        )
    assert call.cancel.cancelled
    assert beats == [30]
    assert waiter.now == 45


def test_a_beat_that_says_stop_cancels_and_abandons_the_try() -> None:
    # Given a try that would run for ever, and a heartbeat that says stop on its second beat
    waiter = SimWaiter()
    call = _call(300)
    beats: list[float] = []

    def beat() -> bool:
        beats.append(waiter.now)
        return len(beats) < 2

    # When it runs under supervision
    with pytest.raises(TryAbandoned, match="try abandoned after 60 s"):
        supervise(
            lambda: "never" if call.cancel.wait(5) else "x",
            call=call,
            beat=beat,
            interval_s=30,
            waiter=waiter,
        )
    # Then the try was cancelled at once, long before its timeout
    assert call.cancel.cancelled
    assert beats == [30, 60]
    assert waiter.now == 60


def test_the_try_exception_is_re_raised() -> None:
    def broken() -> str:
        raise TargetFailed("nope")

    with pytest.raises(TargetFailed, match="nope"):
        supervise(broken, call=_call(10), beat=None, interval_s=30, waiter=SimWaiter(threading.Event(), 0))


def test_cancel_callbacks_run_once_and_late_registrations_run_at_once() -> None:
    call = _call(1)
    ran: list[str] = []
    call.cancel.on_cancel(lambda: ran.append("first"))
    call.cancel.on_cancel(lambda: (_ for _ in ()).throw(RuntimeError("cleanup failed")))
    call.cancel.cancel()
    call.cancel.cancel()
    call.cancel.on_cancel(lambda: ran.append("late"))
    assert ran == ["first", "late"]


def test_errors_are_truncated_and_instants_are_iso_utc() -> None:
    assert truncate("x" * 5000).endswith(" ... [truncated]") and len(truncate("x" * 5000)) == 2000
    assert truncate("short") == "short"
    assert iso_utc(1_767_578_400_000) == "2026-01-05T02:00:00Z"
    assert iso_utc(1_767_578_400_123) == "2026-01-05T02:00:00.123Z"
    assert lost_worker_error(2, 1_767_578_400_000, 120) == (
        "worker lost during attempt 2: no heartbeat since 2026-01-05T02:00:00Z (over 120 s)"
    )
