"""Properties of the dispatch order (``domain.dispatch_order``, design §4.10): every entry exactly once, priority
first, fair rounds between owners within a priority, oldest first within an owner."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from jobsched.domain.dispatch_order import NO_OWNER, dispatch_order
from jobsched.dynamodb import layout
from jobsched.models import Priority
from jobsched.ports.jobs import DueEntry, hinted_priority

T0 = 1_772_445_600_000

_entry_fields = st.tuples(
    st.sampled_from(["a", "b", "c", "d", None]),
    st.sampled_from(list(Priority)),
    st.integers(min_value=0, max_value=5_000),
)


@st.composite
def due_sets(draw: st.DrawFn) -> list[DueEntry]:
    """Entries of distinct jobs: owner, priority and due instant drawn, a few owners and instants so ties occur."""
    fields = draw(st.lists(_entry_fields, max_size=60))
    return [
        DueEntry(f"j{i:03d}", 0, 0, 0, T0 + at, owner=owner, priority=priority)
        for i, (owner, priority, at) in enumerate(fields)
    ]


def _owner(entry: DueEntry) -> str:
    return entry.owner or NO_OWNER


@given(due_sets())
def test_every_entry_comes_out_exactly_once(entries: list[DueEntry]) -> None:
    ordered = dispatch_order(entries)
    assert Counter(e.job_id for e in ordered) == Counter(e.job_id for e in entries)


@given(due_sets())
def test_no_entry_comes_after_one_of_lower_priority(entries: list[DueEntry]) -> None:
    ranks = [e.priority.rank for e in dispatch_order(entries)]
    assert ranks == sorted(ranks)


@given(due_sets())
def test_an_owners_entries_keep_their_time_order_within_a_priority(entries: list[DueEntry]) -> None:
    ordered = dispatch_order(entries)
    for owner in {_owner(e) for e in entries}:
        for priority in Priority:
            mine = [(e.due_at, e.job_id) for e in ordered if _owner(e) == owner and e.priority is priority]
            assert mine == sorted(mine)


@given(due_sets(), st.integers(min_value=0, max_value=60))
def test_any_prefix_gives_owners_shares_within_one_of_each_other(entries: list[DueEntry], cut: int) -> None:
    # Within each priority, after any number of entries taken, an owner has at most one more than another unless
    # the other has nothing left: the fair share of a tick that takes only the prefix
    ordered = dispatch_order(entries)
    for priority in Priority:
        segment = [e for e in ordered if e.priority is priority]
        total = Counter(_owner(e) for e in segment)
        taken = Counter(_owner(e) for e in segment[:cut])
        for owner in total:
            for other in total:
                if taken[other] < total[other]:
                    assert taken[owner] <= taken[other] + 1


def test_an_owner_with_one_fire_is_not_behind_another_owners_backlog() -> None:
    # Given a noisy owner's 50 fires due before a quiet owner's one
    noisy = [DueEntry(f"n{i:02d}", 0, 0, 0, T0 + i, owner="noisy") for i in range(50)]
    quiet = DueEntry("q", 0, 0, 0, T0 + 100, owner="quiet")

    # When they are put in dispatch order
    ordered = dispatch_order([*noisy, quiet])

    # Then the quiet owner's fire is second: the noisy owner's oldest first (it is older), then the quiet one's
    assert [e.job_id for e in ordered[:3]] == ["n00", "q", "n01"]


def test_a_stored_entry_naming_an_unknown_priority_orders_as_normal() -> None:
    # A due entry is a hint (the job's state, read consistently, decides what runs): a timer item whose priority
    # no code path writes is read as normal rather than failing the tick's read
    entry = DueEntry("j_1", 0, 5, 0, T0, owner="team-a", priority=Priority.HIGH, lane="early-high")
    item = {**layout.timer_item(entry), "priority": "urgent"}

    assert layout.timer_entry_of_item(layout.timer_item(entry)).priority is Priority.HIGH
    assert layout.timer_entry_of_item(item).priority is Priority.NORMAL
    assert (hinted_priority(None), hinted_priority("low")) == (Priority.NORMAL, Priority.LOW)
