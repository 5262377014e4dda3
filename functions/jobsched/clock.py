"""The injected clock: every component takes ``now_ms`` so tests drive hours of simulated time."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], int]
"""A callable returning the current time as epoch milliseconds (UTC)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_utc(ms: int) -> str:
    """Epoch milliseconds -> ISO 8601 UTC with ``Z`` (``2026-12-04T18:00:00Z``; milliseconds only when present),
    the same spelling as the API."""
    instant = _EPOCH + timedelta(milliseconds=ms)  # exact (no float rounding of the milliseconds)
    spec = "milliseconds" if ms % 1000 else "seconds"
    return instant.isoformat(timespec=spec).replace("+00:00", "Z")


def system_clock() -> int:
    """Wall-clock time, epoch milliseconds."""
    return time.time_ns() // 1_000_000


class FakeClock:
    """A manual clock for tests and simulations: ``clock()`` returns ``now_ms``; ``advance(ms)`` moves it."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def sleep(self, seconds: float) -> None:
        """A sleep that only moves simulated time."""
        self.now_ms += int(seconds * 1000)
