"""``Heartbeat.beat``: when the try must stop (the row refused the beat, or beats have failed too long)."""

from __future__ import annotations

from typing import Any

from jobsched.domain.retries import Owned
from jobsched.domain.supervision import Heartbeat
from jobsched.ports.runs import Renewal

STALE_MS = 120_000
INTERVAL_MS = 30_000


class FakeRuns:
    """``RunRows.heartbeat`` (and ``renew``) answering from a script: True (recorded), False (refused) or an exception."""

    def __init__(self, *answers: bool | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[int] = []

    def heartbeat(self, owned: Owned, *, now_ms: int) -> bool:
        self.calls.append(now_ms)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def renew(self, owned: Owned, *, now_ms: int) -> Renewal:
        return Renewal(self.heartbeat(owned, now_ms=now_ms))


class FakeVisibility:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        self.calls.append((receipt_handle, seconds))


def _heartbeat(runs: FakeRuns, visibility: FakeVisibility) -> Heartbeat:
    # claimed at t = 0; give up one interval before the row would look stale to another worker
    return Heartbeat(
        runs=runs,  # type: ignore[arg-type]
        owned=Owned("j_1", 0, 1, "w1"),
        visibility=visibility,
        receipt_handle="rh-1",
        visibility_s=150,
        last_ok_ms=0,
        give_up_after_ms=STALE_MS - INTERVAL_MS,
    )


def test_a_refused_beat_stops_the_try_and_leaves_the_message_alone() -> None:
    runs, visibility = FakeRuns(True, False), FakeVisibility()
    heartbeat = _heartbeat(runs, visibility)
    assert heartbeat.beat(30_000)
    assert not heartbeat.beat(60_000)
    assert heartbeat.lost and not heartbeat.expiring
    assert visibility.calls == [("rh-1", 150)]


def test_failing_beats_stop_the_try_one_interval_before_the_row_would_look_lost() -> None:
    down: Any = ConnectionError("DynamoDB unreachable")
    runs, visibility = FakeRuns(down, down, down), FakeVisibility()
    heartbeat = _heartbeat(runs, visibility)
    # a missed beat or two does not fail a try that is running fine (the message is still extended)
    assert heartbeat.beat(30_000)
    assert heartbeat.beat(60_000)
    assert not heartbeat.expiring
    # 90 s without a recorded beat: the next one would come when the row may already look stale
    assert not heartbeat.beat(90_000)
    assert heartbeat.expiring and not heartbeat.lost
    assert visibility.calls == [("rh-1", 150), ("rh-1", 150)]
    assert heartbeat.expiring_error(90_000) == (
        "attempt 1 abandoned: its heartbeat could not be recorded for 90 s "
        "(the run would soon look lost and be taken over)"
    )


def test_a_recorded_beat_restarts_the_count() -> None:
    down: Any = TimeoutError("throttled")
    runs, visibility = FakeRuns(down, down, True, down, down, down), FakeVisibility()
    heartbeat = _heartbeat(runs, visibility)
    assert [heartbeat.beat(t) for t in (30_000, 60_000, 90_000, 120_000, 150_000)] == [True] * 5
    assert heartbeat.last_ok_ms == 90_000
    assert not heartbeat.beat(180_000)  # 90 s after the last recorded beat
    assert heartbeat.expiring


def test_without_a_give_up_limit_failing_beats_never_stop_the_try() -> None:
    down: Any = ConnectionError("DynamoDB unreachable")
    runs = FakeRuns(*[down] * 10)
    heartbeat = Heartbeat(
        runs=runs,  # type: ignore[arg-type]
        owned=Owned("j_1", 0, 1, "w1"),
        visibility=None,
        receipt_handle=None,
        visibility_s=150,
    )
    assert all(heartbeat.beat(t * 30_000) for t in range(1, 11))
    assert not heartbeat.expiring


def test_a_late_beat_gives_up_without_writing_when_the_row_may_already_look_stale() -> None:
    # Given a write that hung (the supervisor's next beat comes 117 s after the last recorded one)
    runs, visibility = FakeRuns(True), FakeVisibility()
    heartbeat = _heartbeat(runs, visibility)
    # When it beats past the give-up limit
    assert not heartbeat.beat(117_000)
    # Then it stops the try without touching the row or the message: another worker may own it soon
    assert heartbeat.expiring and runs.calls == [] and visibility.calls == []
