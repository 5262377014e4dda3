"""A fire sent on time is never recorded missed (a leader dying before its move, a move failing for long), on
the DynamoDB adapters under moto: the same scenarios as tests/unit/scheduler/test_crash.py on the fakes."""

from __future__ import annotations

from tests.unit.scheduler.test_crash import (
    test_a_fire_sent_by_a_leader_whose_move_keeps_failing_is_not_recorded_missed,
    test_a_fire_sent_on_time_by_a_leader_that_died_before_its_move_is_not_recorded_missed,
    test_fires_sent_during_a_catch_up_are_not_inside_a_later_leaders_skipped_summary,
)

__all__ = [
    "test_a_fire_sent_by_a_leader_whose_move_keeps_failing_is_not_recorded_missed",
    "test_a_fire_sent_on_time_by_a_leader_that_died_before_its_move_is_not_recorded_missed",
    "test_fires_sent_during_a_catch_up_are_not_inside_a_later_leaders_skipped_summary",
]
