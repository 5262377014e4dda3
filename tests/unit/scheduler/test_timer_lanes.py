"""The tick's read path over timer items (design §4.1): entries stay after their job moves on, each lane is read
from the position the last leader stored, an entry filed ahead of its state write is held until the write lands,
and a late lane is passed only once its entries are older than the margin. On the in-memory fakes, which keep
every entry as DynamoDB keeps timer items."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC
from typing import Any

from jobsched.clock import from_ms
from jobsched.domain.due_reader import WATERMARK_MARGIN_MS
from jobsched.domain.planning import TickLimits
from jobsched.ports.jobs import EARLY, LATE, TIMER_LANES, DueQuery
from tests.support.scheduler import throttled


def _sent(harness: Any) -> Counter[tuple[str, int]]:
    return Counter((m.job_id, m.scheduled_for) for m in harness.drain())


def test_an_entry_filed_before_its_state_write_landed_is_held_until_it_lands(harness: Any) -> None:
    # Given a leader ticking, a job due in an hour, and another job whose creation filed its entry and never
    # landed (a refused write: an orphan)
    job = harness.add("every 1 hour")
    orphan = harness.job("every 1 hour")
    a = harness.contender()
    harness.run_seconds(a, 2)
    harness.drain()  # (its first fire, at its creation)
    now = harness.clock()

    # When an edit files the job's new entry (version 2, due in 20 s: the early lane, filed at its due instant)
    # and its state write lands 25 s later, 5 s after that instant
    edited = harness.entry(job.id, now + 20_000, written_at=now, version=2)
    lost = harness.entry(orphan.id, now + 20_000, written_at=now, version=1)
    assert edited.lane == lost.lane == EARLY
    harness.jobs.put_timers([edited, lost])
    harness.run_seconds(a, 25)
    sent = _sent(harness)
    state = harness.jobs.states[job.id]
    harness.jobs.states[job.id] = replace(state, version=2, next_run_at=now + 20_000, due=edited)
    harness.run_seconds(a, 3)
    sent += _sent(harness)

    # Then the fire ran once, as soon as its state said so (the entry was held, not passed, meanwhile)
    assert sent == Counter({(job.id, now + 20_000): 1})
    # And the orphan is passed once its writer's write can no longer land: the watermark goes past its bucket
    harness.run_seconds(a, 120)
    assert a.scheduler.watermark is not None and a.scheduler.watermark > lost.bucket
    assert not [key for key in _sent(harness) if key[0] == orphan.id]


def test_a_new_leader_reads_the_lanes_from_the_stored_positions(harness: Any) -> None:
    # Given 300 hourly jobs registered a minute before T0 (early entries at T0) that one leader ran
    harness.clock.now_ms = harness.T0 - 60_000
    ids = harness.add_many(300, "0 * * * *")
    a = harness.contender(limits=TickLimits(max_jobs=1000))
    harness.run_seconds(a, 70)
    assert set(_sent(harness)) == {(job_id, harness.T0) for job_id in ids}

    # When it hands over mid-bucket to a new leader (the next invocation)
    a.lease.release()
    b = harness.contender("b", limits=TickLimits(max_jobs=1000))
    harness.run_seconds(b, 2)

    # Then the new leader starts where the last one stored its positions: it reads none of the 300 handled
    # entries' states again, and sends nothing again
    read = [job_id for name, args, _ in b.recorder.calls if name == "scheduling_states" for job_id in args[0]]
    assert read == []
    assert _sent(harness) == Counter()


def test_a_late_entry_filed_by_a_writer_whose_clock_is_behind_is_still_read(harness: Any) -> None:
    # Given a leader running jobs every second (their entries in the late lane, filed at their writing) for 30 s
    harness.add_many(5, "every 1 second")
    a = harness.contender()
    harness.run_seconds(a, 30)
    harness.drain()

    # When a writer whose clock is 3 s behind creates a one-off due at its now + 1 s (2 s ago by the leader's
    # clock): filed at that instant, behind the entries the leader handled in the last seconds
    now = harness.clock()
    instant = (now - 3000) // 1000 * 1000 + 1000
    harness.clock.now_ms = now - 3000
    once = harness.job(f"at {from_ms(instant).astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')}Z")
    state = harness.sched_for(once)
    harness.clock.now_ms = now
    assert state.due is not None and state.due.lane == LATE and state.due.at < now - 1000
    harness.jobs.create(once, state)
    harness.run_seconds(a, 2)

    # Then the next tick reads it (the late lane is passed only WATERMARK_MARGIN_MS behind now) and runs it
    assert _sent(harness)[(once.id, instant)] == 1
    assert WATERMARK_MARGIN_MS > 3000


def test_a_job_whose_next_entry_could_not_be_filed_is_not_moved_and_is_retried(harness: Any) -> None:
    # Given 3 jobs due at T0, and a first tick whose filing of their next entries fails (DynamoDB throttled it)
    ids = harness.add_many(3, "every 1 minute")
    a = harness.contender()
    (first,) = harness.run_second_with(a, "put_timers", lambda entries: throttled())

    # Then their runs were sent but they were not moved (a move without its entry would never be read again)
    assert first.errors == 3 and first.moved == 0
    assert all(harness.sched(job_id)["next_run_at"] == harness.T0 for job_id in ids)

    # And the next tick sends them again (a worker's claim keeps one run per fire) and moves them
    (second,) = harness.run_seconds(a, 1)
    assert second.moved == 3 and second.errors == 0
    assert _sent(harness) == Counter({(job_id, harness.T0): 2 for job_id in ids})
    assert all(harness.sched(job_id)["next_run_at"] == harness.T0 + 60_000 for job_id in ids)


class _OldCodeJobs:
    """The job store as a scheduler invocation still running the GSI layout's code sees it (the minute of
    a deploy: the old invocation keeps the lease up to ~67 s after the new API is live): it reads only the
    ``due`` GSI, in which a job written by the new API (or moved by the migration pass) has no entry."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def due_lanes(self) -> tuple[str, ...]:
        return TIMER_LANES

    def query_due(self, query: DueQuery) -> Any:
        return [], None  # the GSI holds no entry of a job stored as a timer item


def test_a_job_written_by_the_new_api_while_an_old_scheduler_leads_is_fired(harness: Any) -> None:
    # Given an old-code scheduler invocation leading partition 0 (it started at T0 + 30 s; the deploy lands at
    # T0 + 40 s, so it keeps the lease until about T0 + 97 s)
    harness.clock.now_ms = harness.T0 + 30_000
    old = harness.contender("old", jobs=_OldCodeJobs(harness.jobs))
    harness.run_seconds(old, 10)

    # When the new API creates a job every 5 minutes (first fire now + 5 s: a late-lane timer in the current
    # bucket) and the old invocation goes on leading to the end of its run
    job = harness.add("every 5 minutes")
    first = harness.jobs.states[job.id].next_run_at
    harness.run_seconds(old, 55)
    assert old.scheduler.watermark is not None
    harness.drain()

    # And the next invocation (new code) takes over and ticks for 10 minutes
    harness.control.positions.clear()  # (the GSI layout's code stores no read positions)
    old.lease.release()
    new = harness.contender("new")
    harness.run_seconds(new, 600)
    sent = Counter((m.job_id, m.scheduled_for) for m in harness.drain())

    # Then the job's fires ran (late by a minute at most for the first): none is lost (without the floor the
    # old leader closed the timer's bucket, the new one never read behind the watermark, and the job's state
    # pointed at that timer for ever: no fire at all)
    assert first is not None and old.scheduler.watermark > first // (harness.settings.due_bucket_s * 1000)
    assert sent[(job.id, first)] == 1
    assert sum(n for (j, _), n in sent.items() if j == job.id) >= 2


def test_a_rollback_then_roll_forward_fires_the_jobs_the_new_code_had_moved_onto_timer_items(
    harness: Any,
) -> None:
    # Given the new code live: its leader ran a job every minute for 3 minutes (each move filed a timer item
    # and took the job's state out of the old ``due`` GSI) and stored its read positions
    job = harness.add("every 1 minute")
    new1 = harness.contender("new1")
    harness.run_seconds(new1, 180)
    assert sum(1 for m in harness.drain() if m.job_id == job.id) >= 3
    stored = dict(harness.control.positions)
    assert stored  # the new code stored read positions

    # When the stack update fails later and CloudFormation rolls the functions back to the code before timer
    # items for 5 minutes: its leader reads only the GSI (no entry of this job) and advances the watermark
    # (it stores no read positions: the ones the new code stored stay as they were)
    new1.lease.release()
    old = harness.contender("old", jobs=_OldCodeJobs(harness.jobs))
    harness.run_seconds(old, 300)
    harness.drain()
    harness.control.positions.clear()
    harness.control.positions.update(stored)
    old.lease.release()

    # And the deploy is retried: the new code leads again for 10 minutes
    new2 = harness.contender("new2")
    harness.run_seconds(new2, 600)
    sent = Counter((m.job_id, m.scheduled_for) for m in harness.drain())

    # Then the job fires again, from the watermark the new code's positions were stored with (without it: its
    # state points at a timer item in a bucket the old code closed, read positions exist, no floor: lost)
    assert sum(n for (j, _), n in sent.items() if j == job.id) >= 9
