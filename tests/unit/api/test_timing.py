"""``jobsched.api.timing.retimed_since_ms``: how far back a re-timed job's pending fires are kept."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobsched.api.timing import KEPT_FIRES_MAX, retimed_since_ms
from jobsched.clock import to_ms
from jobsched.schedule.engine import Schedule, parse_schedule

START = datetime(2026, 1, 1, tzinfo=UTC)
NOW_MS = to_ms(datetime(2026, 6, 1, tzinfo=UTC))


class CountingSteps:
    """``schedule`` with its ``next_fire`` calls counted (the fires a check walks one by one)."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.steps = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.schedule, name)

    def next_fire(self, after: datetime) -> datetime | None:
        self.steps += 1
        return self.schedule.next_fire(after)


def every_second() -> Schedule:
    return parse_schedule("rate(1 second)", "UTC", start_at=START)


def test_a_backlog_of_at_most_kept_fires_max_is_kept() -> None:
    stored = NOW_MS - KEPT_FIRES_MAX * 1000

    since = retimed_since_ms(every_second(), every_second(), stored, NOW_MS, created_ms=to_ms(START))

    assert since == stored


def test_a_longer_backlog_counts_from_now_without_walking_its_fires() -> None:
    new = CountingSteps(every_second())
    stored = NOW_MS - (KEPT_FIRES_MAX + 1) * 1000

    since = retimed_since_ms(new, every_second(), stored, NOW_MS, created_ms=to_ms(START))  # type: ignore[arg-type]

    assert since == NOW_MS
    assert new.steps == 0
