"""The backlog a full tick carries to the next ones, in fair rounds between owners (design §4.10): the due entries
it read and did not take, in dispatch order, with the lanes they came from.

Pure: one :class:`Backlog` belongs to a partition's ``DueReader``. A tick takes the first ``max_jobs`` entries
(:meth:`Backlog.take`) and plans them with what it read fresh; the entries it did not take go back in front of
those of their priority (:meth:`Backlog.put_back`), ordered by ``dispatch_order``: each priority is held apart, so
an entry put back never goes before a held one of a higher priority. So the fair rounds between owners are computed once over
the whole read-ahead backlog (``TickLimits.read_ahead``), and a tick's work stays that of ``max_jobs`` entries
however long the backlog. Entries are hints: the tick judges each against its job's state (design §4.1).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jobsched.domain.dispatch_order import dispatch_order
from jobsched.models import Priority
from jobsched.ports.jobs import HIGH_LANES, DueEntry

LaneKey = tuple[int, int, str]
"""``(bucket, shard, lane)``: ``DueEntry.lane_key``."""


@dataclass
class LaneHold:
    """What the backlog holds of one lane: ``count`` entries, none filed before ``oldest_at`` (epoch ms, the
    least ``DueEntry.at`` held since the lane's hold began: a lower bound, never raised while the hold lasts)."""

    count: int
    oldest_at: int


class Backlog:
    """Carried due entries in dispatch order, and per lane what is held (:class:`LaneHold`)."""

    def __init__(self) -> None:
        # per rank (:func:`_rank`), the entries held of that priority in dispatch order
        self._entries: dict[int, list[DueEntry]] = {}
        self._lanes: dict[LaneKey, LaneHold] = {}
        self._oldest_due: int | None = None

    def __len__(self) -> int:
        return sum(len(held) for held in self._entries.values())

    @property
    def entries(self) -> tuple[DueEntry, ...]:
        """The entries held, in dispatch order (priority first)."""
        return tuple(entry for rank in sorted(self._entries) for entry in self._entries[rank])

    @property
    def lanes(self) -> dict[LaneKey, LaneHold]:
        """The lanes the backlog holds entries of (a copy)."""
        return dict(self._lanes)

    @property
    def high_count(self) -> int:
        """The entries held of the ``high`` lanes (``ports.jobs.HIGH_LANES``)."""
        return sum(hold.count for key, hold in self._lanes.items() if key[2] in HIGH_LANES)

    @property
    def oldest_due(self) -> int | None:
        """A lower bound of the oldest ``due_at`` held (epoch ms; None when empty): the least since the backlog was
        last empty."""
        return self._oldest_due if len(self) else None

    def clear(self) -> None:
        """Hold nothing."""
        self._entries, self._lanes, self._oldest_due = {}, {}, None

    def take(self, count: int) -> list[DueEntry]:
        """Remove and return the first ``count`` entries (dispatch order: a higher priority's before any other)."""
        taken: list[DueEntry] = []
        for rank in sorted(self._entries):
            held = self._entries[rank]
            part, rest = held[: count - len(taken)], held[count - len(taken) :]
            taken.extend(part)
            if rest:
                self._entries[rank] = rest
            else:
                del self._entries[rank]
            if len(taken) >= count:
                break
        self._release(taken)
        return taken

    def drop_high(self) -> list[DueEntry]:
        """Remove and return every entry held of the ``high`` lanes (``ports.jobs.HIGH_LANES``) or priority, in
        dispatch order. Costs those entries alone."""
        dropped = self._entries.pop(_HIGH, [])
        self._release(dropped)
        return dropped

    def _release(self, entries: list[DueEntry]) -> None:
        for entry in entries:
            hold = self._lanes[entry.lane_key]
            hold.count -= 1
            if hold.count == 0:
                del self._lanes[entry.lane_key]

    def put_back(self, entries: Iterable[DueEntry]) -> None:
        """Put ``entries`` (a tick's, not taken) in front of those held of their priority, in ``dispatch_order``
        among themselves."""
        head = dispatch_order(entries)
        for entry in head:
            hold = self._lanes.get(entry.lane_key)
            if hold is None:
                self._lanes[entry.lane_key] = LaneHold(1, entry.at)
            else:
                hold.count += 1
                hold.oldest_at = min(hold.oldest_at, entry.at)
        if head:
            least = min(entry.due_at for entry in head)
            held = self._oldest_due if len(self) else None
            self._oldest_due = least if held is None else min(held, least)
        by_rank: dict[int, list[DueEntry]] = {}
        for entry in head:
            by_rank.setdefault(_rank(entry), []).append(entry)
        for rank, front in by_rank.items():
            self._entries[rank] = front + self._entries.get(rank, [])


_HIGH = Priority.HIGH.rank


def _rank(entry: DueEntry) -> int:
    """The list of the backlog an entry is held in: its priority's rank, ``high``'s for an entry of a ``high`` lane
    whatever the priority it names (so :meth:`Backlog.drop_high` releases every hold of those lanes)."""
    return _HIGH if entry.lane in HIGH_LANES else entry.priority.rank
