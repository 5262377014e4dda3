"""The order in which a tick dispatches the fires due now (design §4.10): priority first, then fair shares between
owners, then time. Pure functions, no I/O.

Rules (one definition, used by ``Scheduler._plan`` to choose a full tick's jobs and by ``TickWriter.enqueue`` to
order its messages):

- every ``high`` entry goes before every ``normal`` one, every ``normal`` before every ``low`` one;
- within a priority, owners take turns (round robin): each round takes each owner's oldest entry not yet taken,
  the owners in the order of their oldest entry; an owner with one due fire waits one round, not behind an
  owner's whole backlog;
- within an owner, oldest dispatch instant first (``due_at``, then ``job_id``).

Entries without an owner (written before entries kept it) share the owner ``""``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import TypeVar

from jobsched.ports.jobs import DueEntry

T = TypeVar("T")

NO_OWNER = ""
"""The owner of an entry that names none, for the fair share."""


def fair_rounds(
    items: Iterable[T], *, owner: Callable[[T], str], age: Callable[[T], tuple[int, str]]
) -> list[T]:
    """``items`` in round-robin order between owners: round ``r`` holds the ``r``-th oldest item of each owner
    that has more than ``r``, owners ordered by their oldest item (``age``: a sortable ``(epoch ms, tie-break)``).
    Returns every item exactly once. O(n log n)."""
    by_owner: dict[str, list[T]] = {}
    for item in items:
        by_owner.setdefault(owner(item), []).append(item)
    queues = [sorted(group, key=age) for group in by_owner.values()]
    queues.sort(key=lambda queue: (age(queue[0]), owner(queue[0])))
    ordered: list[T] = []
    depth = 0
    while len(queues) > 1:
        ordered.extend(queue[depth] for queue in queues)
        depth += 1
        queues = [queue for queue in queues if len(queue) > depth]
    if queues:  # one owner left: the rest of its items in turn
        ordered.extend(queues[0][depth:])
    return ordered


def dispatch_order(entries: Iterable[DueEntry]) -> list[DueEntry]:
    """``entries`` (due by now, one per job) in dispatch order: by priority (``Priority.rank``), then in fair
    rounds between owners (:func:`fair_rounds`), then oldest ``due_at`` first (ties by ``job_id``). Every entry
    appears exactly once."""
    by_priority: dict[int, list[DueEntry]] = {}
    for entry in entries:
        by_priority.setdefault(entry.priority.rank, []).append(entry)
    ordered: list[DueEntry] = []
    for rank in sorted(by_priority):
        ordered.extend(fair_rounds(by_priority[rank], owner=lambda e: e.owner or NO_OWNER, age=_AGE))
    return ordered


_AGE = attrgetter("due_at", "job_id")
"""An entry's age for the rounds, ``(due_at, job_id)`` (a C-level key: a tick may order a backlog of tens of
thousands of entries, ``TickLimits.read_ahead``)."""
