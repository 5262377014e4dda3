"""A leader paused past its lease (a stale term) can neither move next_run_at nor write runs."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain.planning import TickLimits
from jobsched.domain.registration import due_entry
from jobsched.domain.runs import new_run
from jobsched.ports.errors import Conflict
from jobsched.ports.jobs import Move


def takeover(harness: Any, a: Any, seconds: int = 8) -> Any:
    """While ``a`` is frozen, ``seconds`` pass and a standby ``b`` takes over and ticks."""
    b = harness.contender("b")
    harness.run_seconds(b, seconds)
    assert b.lease.held and b.lease.term > a.lease.term
    return b


def test_a_paused_leader_writes_nothing_after_a_takeover(harness: Any) -> None:
    job = harness.add("every 1 second")
    a = harness.contender("a")
    harness.run_seconds(a, 2)
    # Given a is paused (between two ticks) while b takes over and moves the job on
    b = takeover(harness, a)
    calls_before = len(a.recorder.calls)
    # When a wakes up and steps again
    assert a.step() is None
    # Then its renewal is refused and it makes no write at all
    names = {name for name, _, _ in a.recorder.calls[calls_before:]}
    assert names == {"renew_lease", "read_lease"} or names == {"renew_lease"}
    assert not a.lease.held
    assert harness.sched(job.id)["term"] == b.lease.term


def test_a_leader_paused_mid_tick_stops_before_its_writes(harness: Any) -> None:
    job = harness.add("every 1 second")
    a = harness.contender("a", limits=TickLimits(threads=1))
    harness.run_seconds(a, 1)
    frozen: dict[str, Any] = {}

    def freeze_after_reading(*_: Any, **__: Any) -> None:
        if not frozen:
            frozen["b"] = None
            frozen["b"] = takeover(harness, a)  # a has read the due index, then stalls for 8 s

    a.recorder.after["query_due"] = freeze_after_reading
    calls_before = len(a.recorder.calls)
    harness.clock.now_ms += 1000
    result = a.step()
    # a either finds its lease gone at its first write, or (reading the scheduling items after the stall) that
    # b moved the job on, so it has nothing to write
    assert result is not None and (result.aborted or (result.due == 0 and result.created == 0))
    names = [name for name, _, _ in a.recorder.calls[calls_before:]]
    assert "put_new" not in names and "move" not in names and "send" not in names
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert len(fires) == len(set(fires))
    # a's runs are those of its one complete tick (at T0+1.005 s); everything later is b's
    rows = harness.runs_of(job.id)
    assert {r["scheduled_for"] for r in rows if r["term"] != frozen["b"].lease.term} == {
        harness.T0,
        harness.T0 + 1000,
    }
    assert len(rows) > 2


def test_the_store_refuses_a_stale_term_even_when_next_run_at_matches(harness: Any) -> None:
    # Given a newer leader stamped the job with its term
    job = harness.add("every 1 minute")
    a = harness.contender("a")
    harness.run_seconds(a, 1)
    b = takeover(harness, a, seconds=65)  # past the next fire: b moves the job
    current = harness.sched(job.id)
    assert current["term"] == b.lease.term
    # When the old leader (guard bypassed) tries to move it from the current next_run_at
    due = due_entry(
        job.id,
        current["next_run_at"] + 60_000,
        partition=0,
        shards=4,
        bucket_ms=60_000,
        now_ms=harness.clock(),
    )
    with pytest.raises(Conflict) as refused:
        harness.jobs.move(
            Move(
                job.id,
                expected_next_run_at=current["next_run_at"],
                expected_version=current["version"],
                partition=0,
                term=a.lease.term if a.lease.held else b.lease.term - 1,
                next_run_at=current["next_run_at"] + 60_000,
                due=due,
            )
        )
    # Then the move is refused (fencing) and the stored item is returned with the refusal
    assert refused.value.current is not None and refused.value.current.term == b.lease.term
    assert harness.sched(job.id) == current
    # And once a worker's claim made the run's row, a row it tries to save for that fire again is refused by
    # the unique (job_id, scheduled_for)
    claimed = harness.claim(job.id, harness.T0, term=b.lease.term)
    assert claimed.claimed
    existing = harness.runs.put_new(
        new_run(job.id, harness.T0, now_ms=harness.clock(), retention_days=90, term=b.lease.term - 1)
    )
    assert existing is not None and existing.term != b.lease.term - 1
