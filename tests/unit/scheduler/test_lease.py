"""The leader lease against an in-memory store with DynamoDB's conditional semantics."""

from __future__ import annotations

import pytest

from jobsched.clock import FakeClock
from jobsched.domain.lease import LeaderLease, LeaseLost, LeaseRecord, new_holder_id
from jobsched.memory.control import MemoryControlStore as MemoryLeases

T0 = 1_772_445_600_000
TTL = 5_000


@pytest.fixture
def store() -> MemoryLeases:
    return MemoryLeases()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def contender(store: MemoryLeases, clock: FakeClock, holder: str) -> LeaderLease:
    return LeaderLease(store, 0, holder, clock=clock, ttl_ms=TTL)


def test_first_contender_acquires_and_a_second_stands_by(store: MemoryLeases, clock: FakeClock) -> None:
    a, b = contender(store, clock, "a"), contender(store, clock, "b")
    held = a.ensure()
    assert held is not None and held.holder == "a" and held.term == T0  # max(0 + 1, now)
    assert b.ensure() is None
    assert a.check() == T0 and a.valid_until == T0 + TTL - 1000


def test_standby_takes_over_within_ttl_of_the_leader_going_quiet_with_a_higher_term(
    store: MemoryLeases, clock: FakeClock
) -> None:
    a, b = contender(store, clock, "a"), contender(store, clock, "b")
    first = a.ensure()
    assert first is not None
    # Given the leader goes quiet; the standby polls once a second
    waited = 0
    while (taken := b.ensure()) is None:
        clock.advance(1000)
        waited += 1000
    assert waited <= TTL + 1000
    assert taken.term > first.term
    # The old leader's renewal is refused, and its writes are fenced off
    assert a.ensure() is None
    with pytest.raises(LeaseLost):
        a.check()


def test_renewal_keeps_the_lease_and_the_term(store: MemoryLeases, clock: FakeClock) -> None:
    a, b = contender(store, clock, "a"), contender(store, clock, "b")
    first = a.ensure()
    for _ in range(30):
        clock.advance(1000)
        renewed = a.ensure()
        assert renewed is not None and first is not None and renewed.term == first.term
        assert b.ensure() is None


def test_release_lets_a_standby_take_over_at_once(store: MemoryLeases, clock: FakeClock) -> None:
    a, b = contender(store, clock, "a"), contender(store, clock, "b")
    first = a.ensure()
    a.release()
    assert not a.held
    taken = b.ensure()
    assert taken is not None and first is not None and taken.term == first.term + 1


def test_terms_keep_growing_when_the_clock_is_behind(store: MemoryLeases, clock: FakeClock) -> None:
    store.records[0] = LeaseRecord(0, "old", T0 + 10_000_000, 0)  # a term ahead of this clock
    taken = contender(store, clock, "a").ensure()
    assert taken is not None and taken.term == T0 + 10_000_001


def test_a_paused_holder_stops_writing_once_its_lease_runs_out_by_its_own_clock(
    store: MemoryLeases, clock: FakeClock
) -> None:
    a, b = contender(store, clock, "a"), contender(store, clock, "b")
    a.ensure()
    clock.advance(TTL + 500)  # paused past the lease
    assert b.ensure() is not None  # taken over
    with pytest.raises(LeaseLost):
        a.check()  # renewal refused: lost
    assert not a.held


def test_check_renews_during_a_long_tick(store: MemoryLeases, clock: FakeClock) -> None:
    a = contender(store, clock, "a")
    a.ensure()
    for _ in range(20):  # a 20 s tick that checks every second
        clock.advance(1000)
        a.check()
    assert a.valid_until > clock()


def test_store_errors_keep_the_lease_until_it_runs_out(store: MemoryLeases, clock: FakeClock) -> None:
    a = contender(store, clock, "a")
    a.ensure()
    clock.advance(3000)
    store.fail_next = [RuntimeError("throttled"), RuntimeError("throttled")]
    assert a.ensure() is not None  # renewal failed with an error: still ours until valid_until
    a.check()  # renewal errors again, but the lease is still valid by the own clock
    clock.advance(1500)
    store.fail_next = [RuntimeError("throttled")]
    with pytest.raises(LeaseLost):
        a.check()  # past valid_until and renewal failed


def test_expired_but_untaken_lease_is_renewed_safely(store: MemoryLeases, clock: FakeClock) -> None:
    a = contender(store, clock, "a")
    held = a.ensure()
    clock.advance(TTL * 3)  # nobody took it meanwhile: same holder and term are still stored
    assert a.check() == (held.term if held else None)


def test_acquisition_errors_leave_the_contender_standing_by(store: MemoryLeases, clock: FakeClock) -> None:
    a = contender(store, clock, "a")
    store.fail_next = [RuntimeError("network")]
    assert a.ensure() is None and not a.held
    assert a.ensure() is not None


def test_release_errors_are_swallowed_and_the_lease_runs_out(store: MemoryLeases, clock: FakeClock) -> None:
    a, b = contender(store, clock, "a"), contender(store, clock, "b")
    a.ensure()
    store.fail_next = [RuntimeError("network")]
    a.release()
    assert not a.held
    assert b.ensure() is None  # still stored as held until the TTL
    clock.advance(TTL + 1)
    assert b.ensure() is not None


def test_forget_and_term_without_lease() -> None:
    a = LeaderLease(MemoryLeases(), 0, new_holder_id("fn"), clock=FakeClock(T0), ttl_ms=TTL)
    assert a.holder.startswith("fn/")
    with pytest.raises(LeaseLost):
        _ = a.term
    a.ensure()
    a.forget()
    assert not a.held
    a.release()  # nothing held: no write


def test_a_new_holder_knows_when_the_earlier_terms_stopped(store: MemoryLeases, clock: FakeClock) -> None:
    a, b, c = contender(store, clock, "a"), contender(store, clock, "b"), contender(store, clock, "c")
    first = a.ensure()
    assert first is not None and a.earlier_terms_until is None  # the partition's first lease
    # a holder that stops renewing: the next one learns its lease's expiry
    clock.advance(first.expires_at - clock() + 1)
    assert b.ensure() is not None and b.earlier_terms_until == first.expires_at + 1
    # a holder that releases: the next one learns the release instant
    clock.advance(500)
    released_at = clock()
    b.release()
    assert c.ensure() is not None and c.earlier_terms_until == released_at
