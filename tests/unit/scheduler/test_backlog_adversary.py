"""The carried backlog under adversarial timing (design §4.10): entries read fresh while a ``high`` backlog is held,
new ``high`` fires arriving in a lane the backlog holds. On the in-memory fakes with the injected clock and small
``TickLimits`` so that ticks are full."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from jobsched.clock import from_ms
from jobsched.domain.backlog import Backlog
from jobsched.domain.planning import TickLimits
from jobsched.models import Priority
from jobsched.ports.jobs import EARLY, EARLY_HIGH, DueEntry
from tests.support.scheduler import throttled
from tests.unit.scheduler.test_backlog_promises import create, sent_by

LIMITS = TickLimits(max_jobs=30, page_size=1000, threads=2)


def _sent_order(contender: Any) -> list[tuple[str, int]]:
    return [
        (m.job_id, m.scheduled_for)
        for name, args, _ in contender.recorder.results
        if name == "send"
        for m in args[0]
    ]


def test_a_normal_fire_read_behind_a_high_backlog_never_goes_before_its_high_fires(harness: Any) -> None:
    # Given 100 high hourly jobs due at T0 and a first tick of 30 that reads them all and carries 70
    harness.clock.now_ms = harness.T0 - 30_000
    high = [create(harness, "0 * * * *", n=i, priority="high") for i in range(100)]
    a = harness.contender(limits=LIMITS)
    harness.clock.now_ms = harness.T0 - 1000
    (first,) = harness.run_seconds(a, 1)
    assert first.due == 30

    # When a normal one-off due 2 s before the rush (accepted late) is created half a second into it: the next
    # tick reads it fresh, the oldest due, while its 30 places go to the carried high fires
    harness.clock.now_ms = harness.T0 + 500
    instant = harness.T0 - 2000
    normal = create(harness, f"at {from_ms(instant).astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')}Z", n=1000)
    harness.run_seconds(a, 5)

    # Then it goes out after every high fire due with it, each fire once
    order = [job_id for job_id, _ in _sent_order(a)]
    assert set(order) == set(high) | {normal}
    assert order.index(normal) == len(order) - 1, order.index(normal)
    assert set(sent_by(harness, [a]).values()) == {1}


def test_a_high_fire_due_while_a_few_high_fires_are_carried_goes_before_the_normal_backlog(
    harness: Any,
) -> None:
    # Given 40 high and 100 normal hourly jobs due at T0, a high one-off due at T0 + 2 s, all registered 30 s
    # before, and ticks of 30: the first tick sends 30 high fires and carries 10 high and 100 normal ones
    harness.clock.now_ms = harness.T0 - 30_000
    high = harness.add_many(40, "0 * * * *", priority=Priority.HIGH)
    normal = harness.add_many(100, "0 * * * *")
    at = from_ms(harness.T0 + 2_000).strftime("%Y-%m-%dT%H:%M:%SZ")
    late_high = harness.add_many(1, f"at {at}", priority=Priority.HIGH)[0]
    harness.clock.now_ms = harness.T0
    a = harness.contender(limits=LIMITS)

    # When the scheduler ticks through the backlog
    ticks = []
    for _ in range(6):
        harness.run_seconds(a, 1)
        ticks.append([m.job_id for m in harness.drain()])

    # Then the tick of T0 + 2 s (the second) sends the high one-off before any normal fire of T0, and every fire
    # went out once
    assert set(ticks[0]) <= set(high) and len(ticks[0]) == 30
    assert late_high in ticks[1], [(n, late_high in t) for n, t in enumerate(ticks)]
    assert ticks[1][:11] and set(ticks[1][:11]) <= set(high) | {late_high}
    sent = [j for tick in ticks for j in tick]
    assert sorted(sent) == sorted(high + normal + [late_high])


def _entry(job_id: str, due_at: int, priority: Priority) -> DueEntry:
    lane = EARLY_HIGH if priority is Priority.HIGH else EARLY
    return DueEntry(
        job_id, 0, due_at // 60_000, 0, due_at, lane=lane, version=1, owner="o", priority=priority
    )


def test_a_normal_entry_put_back_waits_behind_the_high_ones_held() -> None:
    # Given a backlog of five high entries of which a tick took two
    backlog = Backlog()
    high = [_entry(f"h{n}", 60_000, Priority.HIGH) for n in range(5)]
    backlog.put_back(high)
    assert backlog.take(2) == high[:2]

    # When that tick puts back a normal entry it read fresh (older than them: filed by a writer whose clock is
    # behind, or an entry whose state write landed late) and did not take
    normal = _entry("n", 59_000, Priority.NORMAL)
    backlog.put_back([normal])

    # Then the next ticks take the three high entries held before it, and the holds count what is left
    assert backlog.entries == (*high[2:], normal)
    assert backlog.take(3) == high[2:] and backlog.high_count == 0 and backlog.take(3) == [normal]
    assert len(backlog) == 0 and backlog.lanes == {} and backlog.oldest_due is None


def test_the_fires_a_failed_tick_took_from_the_carry_go_out_in_the_next_tick(harness: Any) -> None:
    # Given 100 hourly jobs due at T0 and a first tick of 30 that carries 70
    harness.clock.now_ms = harness.T0 - 30_000
    ids = [create(harness, "0 * * * *", n=i) for i in range(100)]
    a = harness.contender(limits=LIMITS)
    harness.clock.now_ms = harness.T0 - 1000
    (first,) = harness.run_seconds(a, 1)
    assert first.due == 30 and len(harness.drain()) == 30

    # When the next tick takes 30 of the carry and cannot read their scheduling states
    taken: list[str] = []
    assert harness.run_second_with(a, "scheduling_states", lambda ids: (taken.extend(ids), throttled())) == []
    assert len(taken) == 30
    (third,) = harness.run_seconds(a, 1)

    # Then the tick after it sends those 30 first, in their turn (not after the rest of the carry), and every
    # fire goes out once
    assert third.due == 30
    assert {m.job_id for m in harness.drain()} == set(taken)
    harness.run_seconds(a, 5)
    sent = sent_by(harness, [a])
    assert set(sent) == {(job_id, harness.T0) for job_id in ids} and set(sent.values()) == {1}


def test_letting_go_of_the_high_backlog_releases_every_hold_of_the_high_lanes() -> None:
    # Given a backlog holding a high entry, a normal one, and an entry of a high lane naming no priority we write
    # (read as normal: ``ports.jobs.hinted_priority``)
    backlog = Backlog()
    high = _entry("h", 60_000, Priority.HIGH)
    odd = DueEntry("x", 0, 1, 0, 60_000, lane=EARLY_HIGH, version=1, owner="o", priority=Priority.NORMAL)
    normal = _entry("n", 60_000, Priority.NORMAL)
    backlog.put_back([normal, odd, high])

    # When the high backlog is let go
    dropped = backlog.drop_high()

    # Then both entries of the high lane go with it, and no hold of a high lane is left
    assert set(dropped) == {high, odd}
    assert backlog.entries == (normal,) and backlog.high_count == 0
    assert all(lane != EARLY_HIGH for _, _, lane in backlog.lanes)


def test_jobs_whose_runs_could_not_be_read_after_a_failover_are_taken_again_by_the_next_tick(
    harness: Any,
) -> None:
    # Given leader a's full tick at T0 that carries 370 of 400 jobs, a stalling past its lease, and b taking over
    # and carrying 340 of the 370 still due (late fires of a term that stopped: their runs are read first)
    harness.clock.now_ms = harness.T0 - 30_000
    ids = [create(harness, "0 * * * *", n=i, misfire_grace_s=1, missed="skip") for i in range(400)]
    a = harness.contender("a", limits=LIMITS)
    b = harness.contender("b", limits=LIMITS)
    harness.clock.now_ms = harness.T0 - 1000
    harness.run_seconds(a, 1)
    harness.clock.advance(int(harness.settings.lease_ttl_s * 1000) + 1000)
    harness.run_seconds(b, 1)
    assert b.recorder.count("rows_between") == 30

    # When b's next tick takes 30 of its carry and cannot read their runs
    failed: list[str] = []
    harness.run_second_with(b, "rows_between", lambda job_id, *_, **__: (failed.append(job_id), throttled()))
    assert len(failed) == 30
    calls = len(b.recorder.calls)
    harness.run_seconds(b, 1)

    # Then the tick after it takes those 30 again first, in their turn, and every fire goes out once
    states = [c for c in b.recorder.calls[calls:] if c[0] == "scheduling_states"]
    assert {job_id for c in states for job_id in c[1][0]} == set(failed)
    harness.run_seconds(b, 15)
    sent = sent_by(harness, [a, b])
    assert set(sent) == {(job_id, harness.T0) for job_id in ids} and set(sent.values()) == {1}
