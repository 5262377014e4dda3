"""The tick against moto: runs created once, enqueued, jobs moved from scheduled_for; the index's edges."""

from __future__ import annotations

from typing import Any

from jobsched.adapters.queue import RunMessage
from jobsched.models import RunStatus, from_ms
from jobsched.scheduler import TickLimits
from jobsched.schedules import jitter_offset_ms


def test_due_job_gets_one_run_enqueued_and_moves_from_scheduled_for(harness: Any) -> None:
    # Given a job every 10 seconds, first fire at T0 (its creation instant: rates anchor there)
    job = harness.add("every 10 seconds")
    a = harness.contender()

    # When the scheduler ticks once a second for 25 s (5 ms after each boundary)
    results = harness.run_seconds(a, 25)

    # Then the fires T0+10 s, +20 s ran once each (T0 itself was due at creation: the first tick finds it)
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert fires == [harness.T0, harness.T0 + 10_000, harness.T0 + 20_000]
    assert all(r["status"] == RunStatus.QUEUED.value for r in harness.runs_of(job.id))
    assert [m.scheduled_for for m in harness.drain()] == fires
    # And next_run_at moved from the last scheduled_for, not from now
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 30_000
    assert sum(r.enqueued for r in results) == 3
    # The run due at T0 was found by the tick at T0+1.005 s; the others 5 ms after their instant
    assert [late for r in results for late in r.dispatch_lateness_ms] == [1005, 5, 5]
