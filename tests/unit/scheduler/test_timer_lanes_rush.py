"""The timer lanes' read path in a full tick (design §4.1): the late lane is sorted by writing, not by due
instant, so a tick that a rush's backlog fills reads it on: an entry filed late with an older due instant than
the backlog still goes first. On the in-memory fakes, one due shard so a handful of entries fills a page."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jobsched.domain.planning import TickLimits
from jobsched.ports.jobs import LATE
from jobsched.settings import Settings, memory_settings


@pytest.fixture
def settings() -> Settings:
    """One due shard, so a handful of entries fills a lane's page."""
    return memory_settings(due_shards=1)


def test_a_late_entry_older_than_a_rush_backlog_is_not_hidden_behind_unjudged_late_entries(
    harness: Any,
) -> None:
    T = harness.T0
    # Given a rush: 400 hourly jobs due at T (early lane), a leader handling 5 jobs a tick, 5 entries a page
    harness.clock.now_ms = T - 60_000
    harness.add_many(400, "0 * * * *")
    # and 5 jobs every second whose next entries (due T + 1 s, written T - 5 s) are in the late lane
    for _ in range(5):
        job = harness.job("every 1 second")
        state = harness.sched_for(job)
        late = harness.entry(job.id, T + 1000, written_at=T - 5000, version=state.version)
        assert late.lane == LATE
        harness.jobs.create(job, replace(state, next_run_at=T + 1000, due=late))
    y = harness.job("every 1 second")
    y_state = harness.sched_for(y)
    a = harness.contender(limits=TickLimits(max_jobs=5, page_size=5, threads=4))
    harness.run_seconds(a, 61)  # up to T + 1 s: the backlog fills every tick (its carry alone fills it)
    harness.drain()

    # When a job's fire older than the whole backlog (due T - 1 s: a catch-up's next fire, a one-off accepted
    # late) is filed in the late lane now, behind the 5 late entries due T + 1 s that no tick judges while the
    # older backlog fills every tick
    y_entry = harness.entry(y.id, T - 1000, written_at=harness.clock(), version=y_state.version)
    assert y_entry.lane == LATE
    harness.jobs.create(y, replace(y_state, next_run_at=T - 1000, due=y_entry))
    fired_after = None
    for second in range(1, 121):
        harness.run_seconds(a, 1)
        if any(m.job_id == y.id and m.scheduled_for == T - 1000 for m in harness.drain()):
            fired_after = second
            break

    # Then it goes first, oldest dispatch first, as a fresh read would take it (without reading the late lane on
    # in a full tick: not read until the backlog is gone, 80 s late)
    assert fired_after is not None and fired_after <= 5, fired_after
