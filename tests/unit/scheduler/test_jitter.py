"""Jitter: each run dispatched within [scheduled_for, scheduled_for + jitter_s), at the same offset every day,
with the run key (scheduled_for) unchanged."""

from __future__ import annotations

from typing import Any

from jobsched.schedule.engine import jitter_offset_ms

DAY = 86400_000
HOUR = 3600_000


def test_jitter_dispatches_late_by_a_fixed_offset_never_early(harness: Any) -> None:
    harness.settings = harness.settings.model_copy(
        update={"due_bucket_s": 3600, "due_shards": 1, "lease_ttl_s": 7200}
    )
    jobs = [harness.add("0 2 * * *", jitter_s=600) for _ in range(3)]
    offsets = {job.id: jitter_offset_ms(job.id, 600) for job in jobs}
    assert all(0 <= o < 600_000 for o in offsets.values()) and len(set(offsets.values())) == 3
    a = harness.contender()
    first_fire = harness.T0 - 8 * HOUR + DAY  # T0 is 10:00 UTC: the next 02:00 is tomorrow

    for day in range(3):
        fire = first_fire + day * DAY
        for job in sorted(jobs, key=lambda j: offsets[j.id]):
            # A step just before the job's dispatch instant runs nothing for it ...
            harness.clock.now_ms = fire + offsets[job.id] - 1
            a.step()
            assert fire not in [r["scheduled_for"] for r in harness.runs_of(job.id)]
            # ... and one at the dispatch instant runs it
            harness.clock.now_ms = fire + offsets[job.id]
            a.step()
            row = harness.runs_of(job.id)[-1]
            assert row["scheduled_for"] == fire  # the run key is the nominal fire
            assert row["dispatch_at"] - row["scheduled_for"] == offsets[job.id]  # the same offset every day
            assert row["enqueued_at"] >= row["dispatch_at"]  # never early
            assert harness.sched(job.id)["next_run_at"] == fire + DAY
            assert harness.sched(job.id)["due_at"] == fire + DAY + offsets[job.id]
    assert sorted(m.job_id for m in harness.drain()) == sorted([job.id for job in jobs] * 3)
