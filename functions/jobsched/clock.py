"""Time in jobsched: epoch milliseconds (UTC) everywhere but the API's ISO 8601 text, the conversions between
the two (``from_ms``, ``to_ms``), and the injected clock (every component takes ``now_ms``, so tests drive
hours of simulated time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""Epoch milliseconds count from here (the Unix epoch, UTC)."""


def from_ms(ms: int) -> datetime:
    """Epoch milliseconds -> aware UTC datetime, exactly: integer arithmetic, as a float of epoch seconds is
    coarser than a microsecond past 2^33 s (year 2242) and can land before the instant. Raises ValueError for
    an instant outside years 1-9999."""
    try:
        return EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        raise ValueError(f"{ms} ms since the epoch is outside years 1-9999") from None


def maybe_from_ms(ms: int | None) -> datetime | None:
    """:func:`from_ms` of ``ms`` (epoch milliseconds); None stays None."""
    return None if ms is None else from_ms(ms)


def to_ms(value: datetime) -> int:
    """Aware datetime -> epoch milliseconds (UTC)."""
    return round(value.timestamp() * 1000)


Clock = Callable[[], int]
"""A callable returning the current time as epoch milliseconds (UTC)."""


def iso_utc(ms: int) -> str:
    """Epoch milliseconds -> ISO 8601 UTC with ``Z`` (``2026-12-04T18:00:00Z``; milliseconds only when present),
    the same spelling as the API. Raises ValueError for an instant outside years 1-9999 (``from_ms``)."""
    instant = from_ms(ms)
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
