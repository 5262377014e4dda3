"""The promises around a full tick's carried backlog (design §4.1, a rush): edits, pauses and
deletes landing while a job waits in the carry, a lease lost and regained with a carry, a failed send or state read
in a tick that takes a carry, an entry written into a carried shard after the full tick's read, and instant ticks
between whole seconds while a carry drains. On the in-memory fakes with the injected clock and small ``TickLimits``
so that ticks are full."""

from __future__ import annotations

from collections import Counter
from datetime import UTC
from typing import Any

from jobsched.api.schemas import JobCreate, JobPatch
from jobsched.api.service import JobService
from jobsched.clock import from_ms
from jobsched.domain.planning import TickLimits
from jobsched.models import RunStatus
from tests.support.scheduler import throttled

LIMITS = TickLimits(max_jobs=30, page_size=100, threads=2)


def service(harness: Any) -> JobService:
    return JobService(**harness.parts())


def create(harness: Any, schedule: str, **fields: Any) -> str:
    body = {
        "name": f"job-{harness.clock()}-{fields.pop('n', 0)}",
        "schedule": schedule,
        "command": "echo",
        **fields,
    }
    return service(harness).create_job("team-a", JobCreate.model_validate(body)).job.id


def carried(contender: Any) -> set[str]:
    return {entry.job_id for entry in contender.scheduler.reader.backlog.entries}


def sent_by(harness: Any, contenders: list[Any]) -> Counter[tuple[str, int]]:
    """Every (job, fire) the contenders' schedulers enqueued, with how many times."""
    sent: Counter[tuple[str, int]] = Counter()
    for contender in contenders:
        for name, args, _ in contender.recorder.results:
            if name == "send":
                sent.update((m.job_id, m.scheduled_for) for m in args[0])
    return sent


def rush(harness: Any, count: int, schedule: str) -> list[str]:
    """``count`` jobs registered through the API, each with its first fire at T0 (created 30 s before)."""
    harness.clock.now_ms = harness.T0 - 30_000
    return [create(harness, schedule, n=i) for i in range(count)]


def test_jobs_edited_paused_and_deleted_while_in_the_carry_are_honoured(harness: Any) -> None:
    # Given 100 hourly jobs due at T0 and a first tick of 30 that carries the other 70
    ids = rush(harness, 100, "0 * * * *")
    a = harness.contender(limits=LIMITS)
    harness.clock.now_ms = harness.T0 - 1000
    (first,) = harness.run_seconds(a, 1)
    assert first.due == 30
    waiting = sorted(carried(a))
    assert len(waiting) == 70

    # When, before the next tick, one carried job is re-timed to 10:30 daily, one is paused, one deleted, and
    # one re-timed to every minute
    retimed, paused, deleted, minutely = waiting[:4]
    svc = service(harness)
    svc.update_job("team-a", retimed, JobPatch(schedule="30 10 * * *"))
    svc.pause_job("team-a", paused)
    svc.delete_job("team-a", deleted)
    svc.update_job("team-a", minutely, JobPatch(schedule="* * * * *"))
    harness.run_seconds(a, 5 * 60)

    # Then no fire went out twice, none of the paused, deleted or re-timed jobs' T0 fire went out after the
    # change (their edit landed before the tick that would have taken them), the re-timed ones follow their
    # new schedules, and every other job's T0 fire went out once
    sent = sent_by(harness, [a])
    assert set(sent.values()) == {1}
    fires = {job_id: sorted(at for j, at in sent if j == job_id) for job_id in ids}
    assert fires[paused] == [] and fires[deleted] == [] and fires[retimed] == []
    assert fires[minutely] == [harness.T0 + k * 60_000 for k in range(6)]
    assert harness.sched(retimed)["next_run_at"] == harness.T0 + 30 * 60_000
    others = set(ids) - {retimed, paused, deleted, minutely}
    assert all(fires[job_id] == [harness.T0] for job_id in others)


def test_a_lease_lost_and_regained_with_a_carry_sends_no_fire_twice(harness: Any) -> None:
    # Given leader a's full tick at T0 that carries 70 of 100 jobs
    ids = rush(harness, 100, "0 * * * *")
    a = harness.contender("a", limits=LIMITS)
    b = harness.contender("b", limits=LIMITS)
    harness.clock.now_ms = harness.T0 - 1000
    harness.run_seconds(a, 1)
    assert len(carried(a)) == 70

    # When a stalls past its lease, b takes over and drains the backlog, then b stops and a steps again
    harness.clock.advance(int(harness.settings.lease_ttl_s * 1000) + 1000)
    harness.run_seconds(b, 6)
    b.loop.stop()
    harness.run_seconds(a, 6)

    # Then each fire went out exactly once between the two leaders, and a's carry was dropped with its lease
    sent = sent_by(harness, [a, b])
    assert set(sent) == {(job_id, harness.T0) for job_id in ids} and set(sent.values()) == {1}
    assert not carried(a)


def test_a_failed_send_or_state_read_in_a_tick_taking_a_carry_loses_no_fire(harness: Any) -> None:
    # Given 100 jobs due at T0 and a first tick of 30 that carries 70
    ids = rush(harness, 100, "0 * * * *")
    a = harness.contender(limits=LIMITS)
    harness.clock.now_ms = harness.T0 - 1000
    harness.run_seconds(a, 1)

    # When the next tick's sends all fail, and the tick after it cannot read the scheduling states
    (second,) = harness.run_second_with(a, "send", throttled)
    assert second.due == 30 and second.errors == 30
    assert harness.run_second_with(a, "scheduling_states", throttled) == []
    harness.run_seconds(a, 8)

    # Then every fire went out exactly once, and the watermark passed the rush's bucket
    sent = sent_by(harness, [a])
    assert set(sent) == {(job_id, harness.T0) for job_id in ids} and set(sent.values()) == {1}
    harness.run_seconds(a, 90)
    assert a.scheduler.watermark > harness.T0 // (harness.settings.due_bucket_s * 1000)


def test_an_entry_due_before_the_backlog_written_into_a_carried_shard_is_taken_oldest_first(
    harness: Any,
) -> None:
    # Given 400 hourly jobs due at T0 and a first tick of 30 that reads them all and carries 370
    rush(harness, 400, "0 * * * *")
    a = harness.contender(limits=TickLimits(max_jobs=30, page_size=1000, threads=2))
    harness.clock.now_ms = harness.T0 - 1000
    (first,) = harness.run_seconds(a, 1)
    assert first.due == 30

    # When a one-off whose instant is 2 s before the rush (accepted late, misfire grace 5 s) is created half a
    # second into it: its entry, the oldest due, lands in a shard the carry stands for
    harness.clock.now_ms = harness.T0 + 500
    instant = harness.T0 - 2000
    late = create(
        harness,
        f"at {from_ms(instant).astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')}Z",
        misfire_grace_s=5,
        missed="skip",
    )
    assert harness.sched(late)["next_run_at"] == instant
    harness.run_seconds(a, 15)

    # Then the next tick takes it first, oldest dispatch first (as a query of its shard would have), and it
    # runs within its grace: it is not recorded missed 14 ticks later behind the backlog
    rows = [r for r in harness.all_runs() if r["job_id"] == late]
    assert not [r for r in rows if r["status"] == RunStatus.SKIPPED], rows
    assert sent_by(harness, [a])[(late, instant)] == 1


def test_instant_ticks_between_seconds_while_a_carry_drains_send_each_fire_once_never_early(
    harness: Any,
) -> None:
    # Given 100 hourly jobs due at T0 and ten one-offs at sub-second instants through the first ten seconds
    ids = rush(harness, 100, "0 * * * *")
    instants = [harness.T0 + 1000 * k + 400 for k in range(10)]
    one_offs = [
        create(
            harness, f"at {from_ms(at).astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z", n=1000 + k
        )
        for k, at in enumerate(instants)
    ]
    a = harness.contender(limits=LIMITS)

    # When its loop runs on the fake clock (ticks on each second, instant ticks between them) through the rush
    harness.clock.now_ms = harness.T0 - 1000
    a.loop.run(lambda: harness.clock() < harness.T0 + 20_000)
    assert a.loop.report.ticks > 21  # instant ticks besides the 21 on whole seconds

    # Then every fire went out once, none before its dispatch instant
    messages = [m for name, args, _ in a.recorder.results if name == "send" for m in args[0]]
    sent = Counter((m.job_id, m.scheduled_for) for m in messages)
    expected = {(job_id, harness.T0) for job_id in ids} | set(zip(one_offs, instants, strict=True))
    assert set(sent) == expected and set(sent.values()) == {1}
    assert all(m.enqueued_at is not None and m.enqueued_at >= m.dispatch_at for m in messages)
