"""Roles grant what their function's code calls and not much more (the other direction, every request allowed,
is checked on moto in tests/integration/*/test_role_grants.py)."""

from __future__ import annotations

from jobsched.resources import RUN_QUEUE_DLQ
from tests.support.grants import granted


def test_only_the_sweeper_may_read_the_run_queues_dead_letter_queue() -> None:
    # The sweeper drains the DLQ (jobsched.domain.sweeper, wiring.Components.sweeper); the worker never reads it.
    def on_dlq(function: str) -> set[str]:
        return {action for action, resource, _ in granted(function) if resource == RUN_QUEUE_DLQ.env_var}

    assert on_dlq("sweeper") == {"sqs:ReceiveMessage", "sqs:DeleteMessage"}
    assert on_dlq("worker") == on_dlq("api") == on_dlq("scheduler") == set()
