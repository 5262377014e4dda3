"""The tick on the in-memory fakes: runs created once, enqueued, jobs moved from scheduled_for; the index's
edges; the adapters' failures; the watermark. Requests per run and a malformed stored item stay on moto
(tests/integration/scheduler/test_tick.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jobsched.aws.wire import parse_run_message, run_message_body
from jobsched.clock import from_ms
from jobsched.domain.due_reader import WATERMARK_MARGIN_MS
from jobsched.domain.planning import TickLimits
from jobsched.domain.registration import partition_of
from jobsched.dynamodb import layout
from jobsched.models import RunStatus
from jobsched.ports.jobs import HIGH_LANES, DueQuery
from jobsched.ports.run_messages import QueueSendError, RunMessage
from tests.support.scheduler import throttled


def test_due_job_gets_one_run_enqueued_and_moves_from_scheduled_for(harness: Any) -> None:
    # Given a job every 10 seconds, first fire at T0 (its creation instant: rates anchor there)
    job = harness.add("every 10 seconds")
    a = harness.contender()

    # When the scheduler ticks once a second for 25 s (5 ms after each boundary)
    results = harness.run_seconds(a, 25)

    # Then the fires T0, T0+10 s, T0+20 s ran once each
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert fires == [harness.T0, harness.T0 + 10_000, harness.T0 + 20_000]
    assert all(r["status"] == RunStatus.QUEUED.value for r in harness.runs_of(job.id))
    assert [m.scheduled_for for m in harness.drain()] == fires
    # And next_run_at moved from the last scheduled_for, not from now
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 30_000
    assert sum(r.enqueued for r in results) == 3
    # The run due at T0 was found by the tick at T0+1.005 s; the others 5 ms after their instant
    assert [late for r in results for late in r.dispatch_lateness_ms] == [1005, 5, 5]


def test_one_off_leaves_the_index_after_its_run(harness: Any) -> None:
    job = harness.add("at 2026-03-02T10:00:03Z")
    harness.run_seconds(harness.contender(), 10)
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0 + 3000]
    sched = harness.sched(job.id)
    assert "next_run_at" not in sched and "due_pk" not in sched and "due_at" not in sched


def test_paused_and_deleted_jobs_are_not_run(harness: Any) -> None:
    paused = harness.add("every 1 second", paused=True)
    deleted = harness.add("every 1 second")
    harness.jobs.delete(deleted, deleted_at_ms=harness.clock(), retention_days=None)
    kept = harness.add("every 1 second")
    harness.run_seconds(harness.contender(), 5)
    assert harness.runs_of(paused.id) == [] and harness.runs_of(deleted.id) == []
    assert len(harness.runs_of(kept.id)) == 6  # T0 .. T0+5 s


def test_a_job_paused_during_the_tick_is_not_put_back_in_the_index(harness: Any) -> None:
    job = harness.add("every 1 minute")
    a = harness.contender()

    def pause_it(*_: Any, **__: Any) -> None:  # the API pauses the job while the tick is running
        state = harness.jobs.states[job.id]
        harness.jobs.states[job.id] = replace(state, paused=True, due=None)

    a.recorder.before["move"] = pause_it
    (result,) = harness.run_seconds(a, 1)
    assert result.conflicts == 1 and result.moved == 0
    sched = harness.sched(job.id)
    assert "due_pk" not in sched and sched["paused"] is True
    harness.run_seconds(a, 61)
    assert len(harness.runs_of(job.id)) == 1  # the fire that was due when it was read; nothing after


def test_a_job_deleted_during_the_tick_is_not_recreated_by_the_move(harness: Any) -> None:
    job = harness.add("every 1 minute")
    a = harness.contender()
    a.recorder.before["move"] = lambda *_, **__: harness.jobs.delete(
        job, deleted_at_ms=harness.clock(), retention_days=None
    )
    (result,) = harness.run_seconds(a, 1)
    assert result.conflicts == 1
    assert harness.sched(job.id) is None


def test_end_at_stops_the_job(harness: Any) -> None:
    job = harness.add("every 10 seconds", end_at=from_ms(harness.T0 + 25_000))
    harness.run_seconds(harness.contender(), 60)
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [
        harness.T0 + k * 10_000 for k in range(3)
    ]
    assert "due_pk" not in harness.sched(job.id)


def test_refused_messages_leave_the_job_due_and_the_next_tick_enqueues_them(harness: Any) -> None:
    job = harness.add("every 1 minute")
    a = harness.contender()

    def refuse(messages: list[RunMessage]) -> None:
        raise QueueSendError(list(messages))

    (first,) = harness.run_second_with(a, "send", refuse)
    assert first.created == 1 and first.enqueued == 0 and first.moved == 0
    assert first.lag_ms > 0  # the fire is due and not enqueued
    (second,) = harness.run_seconds(a, 1)
    # the run is sent again (a scheduled run has no row before its claim: its message is its record)
    assert second.created == 1 and second.existing == 0 and second.enqueued == 1 and second.moved == 1
    assert second.lag_ms == 0
    assert [m.scheduled_for for m in harness.drain()] == [harness.T0]
    assert len(harness.runs_of(job.id)) == 1


def test_a_failed_send_request_is_retried_next_tick(harness: Any) -> None:
    harness.add("every 1 minute")
    a = harness.contender()
    (first,) = harness.run_second_with(a, "send", throttled)
    assert first.enqueued == 0 and first.moved == 0
    (second,) = harness.run_seconds(a, 1)
    assert second.enqueued == 1 and second.moved == 1


def test_a_scheduled_run_is_sent_without_a_row_and_its_message_carries_the_row_fields(harness: Any) -> None:
    job = harness.add("every 1 minute", jitter_s=30)
    a = harness.contender()
    assert sum(r.created for r in harness.run_seconds(a, 60)) == 1
    assert a.recorder.count("put_new") == 0 and harness.runs.rows() == []
    (message,) = harness.drain()
    assert message.scheduled_for == harness.T0 and message.term == a.lease.term
    assert message.dispatch_at is not None and message.enqueued_at is not None
    assert harness.T0 <= message.dispatch_at <= message.enqueued_at
    assert parse_run_message(run_message_body(message)) == message
    assert (
        parse_run_message(run_message_body(message)).dispatch_at,
        parse_run_message(run_message_body(message)).term,
    ) == (
        message.dispatch_at,
        message.term,
    )
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000


def test_a_failed_put_of_a_skipped_fire_leaves_the_job_due_for_the_next_tick(harness: Any) -> None:
    job = harness.add("every 1 minute", missed="skip", misfire_grace_s=5)
    harness.clock.advance(600_000)  # ten fires missed: recorded skipped, the put of their row is throttled
    a = harness.contender()
    (first,) = harness.run_second_with(a, "put_new", throttled)
    assert first.skipped == 0 and first.moved == 0 and first.errors == 1 and harness.runs_of(job.id) == []
    (second,) = harness.run_seconds(a, 1)
    assert second.skipped >= 10 and second.moved == 1
    statuses = [r["status"] for r in harness.runs_of(job.id)]
    assert statuses.count(RunStatus.SKIPPED.value) == second.skipped


def test_a_failed_move_is_retried_without_a_second_run(harness: Any) -> None:
    job = harness.add("every 1 minute")
    a = harness.contender()
    (first,) = harness.run_second_with(a, "move", throttled)
    assert first.created == 1 and first.moved == 0 and first.errors == 1
    (second,) = harness.run_seconds(a, 1)
    assert second.created == 1 and second.moved == 1  # sent again: a copy the claim refuses
    assert len(harness.runs_of(job.id)) == 1
    assert [m.scheduled_for for m in harness.drain()] == [harness.T0, harness.T0]
    assert harness.sched(job.id)["next_run_at"] == harness.T0 + 60_000


def test_a_stale_index_entry_is_handled_once_and_refused(harness: Any) -> None:
    # Given the index still returns a job's previous entry next to its current one (GSIs lag)
    job = harness.add("every 1 second")
    a = harness.contender()
    harness.run_seconds(a, 1)
    current = layout.state_from_item(harness.sched(job.id)).due
    assert current is not None
    stale = replace(current, due_at=harness.T0)

    real_query = harness.jobs.query_due

    class StaleJobs:
        def __init__(self) -> None:
            self.inner = harness.jobs

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def query_due(self, query: DueQuery) -> Any:
            items, key = real_query(query)
            here = query.key == (stale.partition, stale.bucket, stale.shard)
            return ([stale] if here else []) + items, key

    b = harness.contender("b", jobs=StaleJobs())
    a.lease.release()
    (result,) = harness.run_seconds(b, 1)
    # Then the job is planned once, from its scheduling item read consistently (not from the stale entry):
    # no refused put, no refused move, no duplicate, and the current fire runs
    assert result.due == 1 and result.existing == 0 and result.conflicts == 0 and result.moved == 1
    fires = [r["scheduled_for"] for r in harness.runs_of(job.id)]
    assert len(fires) == len(set(fires))
    assert fires == [harness.T0 + k * 1000 for k in range(len(fires))]


def test_at_most_max_jobs_per_tick_oldest_first(harness: Any) -> None:
    ids = harness.add_many(25, "every 1 minute")
    a = harness.contender(limits=TickLimits(max_jobs=10, threads=2))
    results = harness.run_seconds(a, 3)
    assert [r.due for r in results] == [10, 10, 5]
    assert {m.job_id for m in harness.drain()} == set(ids)
    assert results[0].lag_ms > 0 and results[2].lag_ms == 0


def test_the_watermark_advances_only_over_drained_buckets(harness: Any) -> None:
    bucket_ms = harness.settings.due_bucket_s * 1000
    job = harness.add("every 1 minute")
    a = harness.contender()
    a.recorder.before["move"] = throttled  # the job can't move: its bucket stays undrained
    harness.run_seconds(a, 1)
    harness.clock.now_ms = harness.T0 + 3 * bucket_ms
    harness.run_seconds(a, 1)
    # The empty bucket before the job's advanced; the job's own bucket holds the watermark
    assert a.scheduler.watermark == harness.T0 // bucket_ms
    assert harness.control.read_watermark(0) == harness.T0 // bucket_ms
    # Once it moves, the watermark passes its bucket, but only up to buckets ended > margin ago
    del a.recorder.before["move"]
    (result,) = harness.run_seconds(a, 1)
    assert result.moved == 1
    now = harness.clock()
    assert a.scheduler.watermark == (now - WATERMARK_MARGIN_MS) // bucket_ms
    assert harness.control.read_watermark(0) == a.scheduler.watermark
    assert len(harness.runs_of(job.id)) == 4  # T0 .. T0+3 min, caught up


def test_a_new_partition_starts_its_watermark_at_its_oldest_entry(harness: Any) -> None:
    # Given a job registered ten minutes before any scheduler ever ran
    job = harness.add("at 2026-03-02T10:00:30Z")
    harness.clock.advance(600_000)
    a = harness.contender()
    harness.run_seconds(a, 1)
    assert a.scheduler.watermark is not None
    assert [r["scheduled_for"] for r in harness.runs_of(job.id)] == [harness.T0 + 30_000]


def test_a_schedule_that_no_longer_parses_is_recorded_and_leaves_the_index(harness: Any) -> None:
    job = harness.add("every 1 minute")
    harness.jobs.states[job.id] = replace(harness.jobs.states[job.id], timezone="Mars/Olympus_Mons")
    harness.run_seconds(harness.contender(), 1)
    (row,) = harness.runs_of(job.id)
    assert row["status"] == RunStatus.SKIPPED.value and "schedule error" in row["error"]
    assert "due_pk" not in harness.sched(job.id)


def test_tick_requires_leadership(harness: Any) -> None:
    a = harness.contender()
    with pytest.raises(RuntimeError):
        a.scheduler.tick(harness.clock(), a.lease)
    with pytest.raises(ValueError):
        harness.contender(partition=harness.settings.scheduler_partitions)


def test_a_failed_due_query_ends_the_step_and_the_next_one_recovers(harness: Any) -> None:
    job = harness.add("every 1 minute")
    a = harness.contender()
    assert harness.run_second_with(a, "query_due", throttled) == []
    (result,) = harness.run_seconds(a, 1)
    assert result.created == 1 and len(harness.runs_of(job.id)) == 1


def test_a_failed_watermark_read_delays_leadership_work_until_it_succeeds(harness: Any) -> None:
    harness.add("every 1 minute")
    a = harness.contender()
    assert harness.run_second_with(a, "read_watermark", throttled) == []
    assert a.lease.held and a.scheduler.watermark is None
    (result,) = harness.run_seconds(a, 1)
    assert result.created == 1


def test_watermark_write_errors_and_refusals_keep_the_tick_going(harness: Any) -> None:
    bucket_ms = harness.settings.due_bucket_s * 1000
    a = harness.contender()
    harness.run_seconds(a, 1)
    start = a.scheduler.watermark
    # A write error: the in-memory watermark stays, the tick still succeeds
    a.recorder.before["advance_watermark"] = throttled
    harness.clock.now_ms = harness.T0 + 2 * bucket_ms
    (result,) = harness.run_seconds(a, 1)
    assert not result.aborted and a.scheduler.watermark == start
    del a.recorder.before["advance_watermark"]
    # A refusal (someone stored a later watermark): adopt the stored one
    harness.control.advance_watermark(0, start + 50, term=a.lease.term, now_ms=harness.clock())
    harness.run_seconds(a, 1)
    assert a.scheduler.watermark == start + 50


def test_a_far_behind_watermark_is_read_in_bounded_steps_oldest_first(harness: Any) -> None:
    # Given a job every 30 minutes (its entry in T0+30 min's bucket once moved), a daily one at 11:30
    # (T0+90 min's bucket), and a scheduler down for three hours (180 one-minute buckets behind)
    every_30 = harness.add("*/30 * * * *")
    daily = harness.add("30 11 * * *")
    a = harness.contender()
    harness.run_seconds(a, 1)
    a.lease.release()
    harness.clock.now_ms = harness.T0 + 3 * 3600_000
    b = harness.contender("b", limits=TickLimits(backlog_buckets=60, threads=4))

    # When it comes back, each tick reads at most 60 old buckets (plus the newest two)
    results = harness.run_seconds(b, 4)

    # Then the first tick finds the 30-minute job (and runs its six missed fires, oldest first) but not
    # yet the daily job, whose bucket is past the first 60: that shows as lag, and the next tick runs it
    # (the early and late lanes of every shard, the two high lanes of the high shard)
    assert results[0].queries == 62 * (harness.settings.due_shards * 2 + len(HIGH_LANES))
    fires = [(r["scheduled_for"] - harness.T0) // 60_000 for r in harness.runs_of(every_30.id)]
    assert fires == [0, 30, 60, 90, 120, 150, 180]
    assert results[0].created == 6 and results[0].lag_ms > 3600_000
    assert results[1].created == 1 and [r["scheduled_for"] for r in harness.runs_of(daily.id)] == [
        harness.T0 + 90 * 60_000
    ]
    assert results[-1].lag_ms == 0


def test_partitions_each_run_only_their_own_jobs(harness: Any) -> None:
    harness.settings = harness.settings.model_copy(update={"scheduler_partitions": 2})
    jobs = [harness.add("every 1 minute") for _ in range(12)]
    partitions = {job.id: partition_of(job.id, 2) for job in jobs}
    assert set(partitions.values()) == {0, 1}
    p0, p1 = harness.contender("p0", partition=0), harness.contender("p1", partition=1)
    harness.run_seconds(p0, 1)
    harness.run_seconds(p1, 1)
    for job in jobs:
        (row,) = harness.runs_of(job.id)
        owner = p0 if partitions[job.id] == 0 else p1
        assert row["term"] == owner.lease.term  # created by its own partition's leader
    assert p0.lease.held and p1.lease.held  # independent leases


@pytest.mark.parametrize("asked", [True, False])
def test_fires_recorded_skipped_alert_the_owner_when_the_job_asks(harness: Any, asked: bool) -> None:
    from jobsched.memory.queue import MemoryAlerts

    job = harness.add("every 1 minute", missed="skip", misfire_grace_s=5, alerts={"on_skipped": asked})
    harness.clock.advance(600_000)  # ten fires missed while no scheduler ran
    alerts = MemoryAlerts()

    (result,) = harness.run_seconds(harness.contender(alerts=alerts), 1)

    assert result.skipped >= 10
    if not asked:
        assert alerts.published == []
        return
    (alert,) = alerts.published
    assert (alert.kind, alert.job_id, alert.owner) == ("skipped", job.id, job.owner)
    assert f"{result.skipped} fire(s)" in alert.subject and "backfill" in alert.body


def test_a_skipped_fires_alert_goes_out_after_the_ticks_runs_are_sent(harness: Any) -> None:
    # Given a job that skips the fires it missed and alerts its owner, and a job due now in the same tick
    harness.add("every 1 minute", missed="skip", misfire_grace_s=5, alerts={"on_skipped": True})
    harness.clock.advance(600_000)  # ten fires missed while no scheduler ran
    on_time = harness.add("every 1 second")
    sent_before_alert: list[int] = []

    class Sink:
        """Notes how many sends the tick had made when the alert was published (SNS answers in tens of ms,
        and up to its call bounds when it is down: an alert published first holds every run of the tick)."""

        def publish(self, _alert: Any) -> None:
            sent_before_alert.append(contender.recorder.count("send"))

    contender = harness.contender(alerts=Sink())

    (result,) = harness.run_seconds(contender, 1)

    assert result.skipped >= 10 and result.created >= 1
    assert any(
        m.job_id == on_time.id for call in contender.recorder.calls if call[0] == "send" for m in call[1][0]
    )
    assert sent_before_alert == [contender.recorder.count("send")]


def test_a_tick_that_loses_its_lease_after_saving_skipped_fires_still_alerts_their_owner_once(
    harness: Any,
) -> None:
    from jobsched.memory.queue import MemoryAlerts
    from tests.unit.scheduler.test_fencing import takeover

    # Given a job that skips the fires it missed and alerts its owner, and a leader that stalls right after
    # saving the skipped row while a standby takes its lease over
    job = harness.add("every 1 minute", missed="skip", misfire_grace_s=5, alerts={"on_skipped": True})
    harness.clock.advance(600_000)
    alerts = MemoryAlerts()
    a = harness.contender("a", alerts=alerts, limits=TickLimits(threads=1))
    stalled: list[Any] = []

    def stall(*_: Any, **__: Any) -> None:
        if not stalled:
            stalled.append(None)
            stalled.append(takeover(harness, a))

    a.recorder.after["put_new"] = stall

    (result,) = harness.run_seconds(a, 1)

    # Then its tick stops at its next write, and the skipped rows it saved are told of, once
    assert result.aborted and result.skipped >= 1
    (alert,) = alerts.published
    assert (alert.kind, alert.job_id) == ("skipped", job.id) and f"{result.skipped} fire(s)" in alert.subject


def test_the_skipped_fires_alerts_of_one_tick_are_published_together(harness: Any) -> None:
    import threading

    from jobsched.memory.queue import MemoryAlerts

    # Given three jobs that skip the fires they missed and alert their owners, all due in one tick
    jobs = [
        harness.add("every 1 minute", missed="skip", misfire_grace_s=5, alerts={"on_skipped": True})
        for _ in range(3)
    ]
    harness.clock.advance(600_000)  # ten fires missed while no scheduler ran

    class Sink(MemoryAlerts):
        """SNS down: each publish takes its call bounds (SCHEDULER_CALLS: 7 s). Published one after another,
        the alerts of n jobs hold the scheduler n x 7 s (the next ticks' runs late, the invocation past its
        stop margin, which leaves room for one call in flight), where the saves that published them before
        held it 7 s: so each publish here waits until the three are in flight together, else fails."""

        together = threading.Barrier(3, timeout=5)

        def publish(self, alert: Any) -> None:
            self.together.wait()
            super().publish(alert)

    alerts = Sink()

    (result,) = harness.run_seconds(harness.contender(alerts=alerts), 1)

    # Then every owner hears of their skipped fires (the three publishes were in flight at once)
    assert result.skipped >= 30
    assert sorted(alert.job_id for alert in alerts.published) == sorted(job.id for job in jobs)
