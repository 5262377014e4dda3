"""Lateness by priority and owner in the metrics, with a bounded number of owners (design §8). Pure domain
logic.

Rules (one definition each):

- the **top owners** of a tick are the ``TOP_OWNERS`` owners with the largest backlog (due jobs the tick read),
  among those with at least ``TOP_OWNER_MIN_BACKLOG`` (:func:`top_owners`); every other owner is
  ``OTHER_OWNERS`` (:func:`labels_for`). So a metric labelled by priority and owner has at most
  ``3 x (TOP_OWNERS + 1)`` series at any time, and over time only owners that had a backlog of their own get a
  series: a quiet deployment's owners all count as ``other``;
- the tick labels each run it sends (``RunMessage.labels``): its dispatch lateness (``DispatchLatenessMs``) and the
  worker's start lateness (``RunLatenessMs``) are published under those labels, so the worker needs neither a read
  nor a write to know them;
- a partition's leader keeps its dispatch lateness per label in a histogram (:class:`LatenessBoard`) and saves a
  summary at most every ``LATENESS_SAVE_MS`` (one write a minute per partition while runs are dispatched, none
  when idle), which ``GET /health`` reads.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jobsched.models import Priority
from jobsched.ports.lateness import (
    OTHER_OWNERS,
    LatenessCodec,
    LatenessFigures,
    LatenessLabels,
    LatenessStore,
    LatenessSummary,
)

logger = logging.getLogger(__name__)

TOP_OWNERS = 10
"""How many owners are named in the lateness metrics at once: the top ones by backlog (the rest are ``other``)."""

TOP_OWNER_MIN_BACKLOG = 100
"""The backlog (due jobs in one tick) an owner needs to be named: below it, its runs do not wait behind its own."""

LATENESS_SAVE_MS = 60_000
"""How often (ms) at most a partition's leader saves its lateness summary (``LatenessBoard``)."""

PRIORITIES = tuple(p.value for p in Priority)
"""The priorities a lateness label takes, in dispatch order."""

_STEP = math.log(1.05)
"""The histogram's bucket width in log space: each bucket's upper bound is 5 % above its lower one."""


def top_owners(
    backlog: Mapping[str, int], *, k: int = TOP_OWNERS, min_backlog: int = TOP_OWNER_MIN_BACKLOG
) -> tuple[str, ...]:
    """The at most ``k`` owners of ``backlog`` (owner -> due jobs) with the largest backlog of at least
    ``min_backlog``, largest first (ties by name). The empty owner (jobs naming none) is never one, nor an owner
    named ``OTHER_OWNERS`` (its label is the other owners'; its runs count among them)."""
    ranked = sorted(
        (
            (owner, count)
            for owner, count in backlog.items()
            if owner and owner != OTHER_OWNERS and count >= min_backlog
        ),
        key=lambda pair: (-pair[1], pair[0]),
    )
    return tuple(owner for owner, _ in ranked[:k])


def priority_order(labels: LatenessLabels) -> tuple[int, str, str]:
    """The sort key of ``labels``: ``high``, ``normal``, ``low`` (``Priority.rank``; an unknown priority last), then
    the owner."""
    rank = Priority(labels.priority).rank if labels.priority in PRIORITIES else len(PRIORITIES)
    return (rank, labels.priority, labels.owner)


def backlog_of(owners: Iterable[str | None]) -> dict[str, int]:
    """Due jobs per owner: ``owners`` holds each due job's owner once (None: it names none, counted as ``""``)."""
    counts: dict[str, int] = {}
    for owner in owners:
        counts[owner or ""] = counts.get(owner or "", 0) + 1
    return counts


def labels_for(priority: str, owner: str | None, top: Iterable[str]) -> LatenessLabels:
    """The labels of a run of a job of ``priority`` and ``owner``: the owner's name when it is in ``top``, else
    ``OTHER_OWNERS``."""
    return LatenessLabels(priority, owner if owner and owner in top else OTHER_OWNERS)


@dataclass
class Histogram:
    """Lateness values (ms, >= 0) in buckets 5 % wide: bounded memory whatever the number of runs, quantiles
    within 5 % above the exact value (:meth:`figures`)."""

    counts: dict[int, int] = field(default_factory=dict)
    runs: int = 0
    max_ms: int = 0

    @staticmethod
    def bucket(ms: int) -> int:
        """The bucket of ``ms``: 0 for 0 ms, else ``1 + floor(log(ms) / log(1.05))``."""
        return 0 if ms <= 0 else 1 + int(math.log(ms) / _STEP)

    def add(self, ms: int) -> None:
        """Count one value (a negative one counts as 0)."""
        ms = max(0, ms)
        key = self.bucket(ms)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.runs += 1
        self.max_ms = max(self.max_ms, ms)

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s values to this one."""
        for key, count in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + count
        self.runs += other.runs
        self.max_ms = max(self.max_ms, other.max_ms)

    def quantile(self, q: float) -> int:
        """The ``q`` quantile (0 < q <= 1; nearest rank): its bucket's upper bound, at most ``max_ms``. Raises
        ValueError when empty."""
        if not self.runs:
            raise ValueError("no values")
        rank = max(1, math.ceil(q * self.runs))
        seen = 0
        for key in sorted(self.counts):
            seen += self.counts[key]
            if seen >= rank:
                return min(self.max_ms, 0 if key == 0 else math.ceil(math.exp(key * _STEP)))
        return self.max_ms  # not reached: the counts add up to ``runs``

    def figures(self) -> LatenessFigures:
        """The count, median, 99th percentile and maximum. Raises ValueError when empty."""
        return LatenessFigures(self.runs, self.quantile(0.5), self.quantile(0.99), self.max_ms)


class LatenessBoard:
    """A partition leader's dispatch lateness per label (``TickResult.labelled_lateness``) and its top owners'
    backlog (``TickResult.top_owners``), saved through ``store`` (encoded by ``codec``) as a ``LatenessSummary``
    at most every ``LATENESS_SAVE_MS`` of tick time, when runs were dispatched since the last save.

    A failed save is logged and the figures kept for the next attempt; a leader that loses its lease starts over
    (:meth:`forget`). Not thread-safe: one loop feeds it."""

    def __init__(self, partition: int, store: LatenessStore, codec: LatenessCodec) -> None:
        self.partition = partition
        self.store = store
        self.codec = codec
        self._groups: dict[LatenessLabels, Histogram] = {}
        self._backlog: dict[str, int] = {}
        self._since = 0  # when the window began (epoch ms), while ``_groups`` holds figures

    def forget(self) -> None:
        """Drop the figures not yet saved."""
        self._groups, self._backlog, self._since = {}, {}, 0

    def record(
        self,
        now_ms: int,
        term: int,
        labelled: Iterable[tuple[LatenessLabels, int]],
        top: Iterable[tuple[str, int]],
    ) -> bool:
        """Add one tick's ``labelled`` dispatch lateness (labels, ms) and ``top`` owners' backlog (owner, due jobs)
        at ``now_ms`` (epoch ms), and save the summary when ``LATENESS_SAVE_MS`` have passed since the window
        began (at the first tick that dispatched a run since the last save). Returns whether a summary was saved.
        Raises nothing (a failed save is logged)."""
        if not self._groups:  # the window begins at the first tick that dispatched since the last save
            self._since, self._backlog = now_ms, {}
        for labels, ms in labelled:
            self._groups.setdefault(labels, Histogram()).add(ms)
        for owner, count in top:
            self._backlog[owner] = max(self._backlog.get(owner, 0), count)
        if not self._groups or now_ms - self._since < LATENESS_SAVE_MS:
            return False
        summary = self.summary(now_ms, term)
        try:
            self.store.save_lateness(self.partition, self.codec.encode(summary), term=term)
        except Exception as error:
            logger.warning(
                "lateness summary not saved", extra={"partition": self.partition, "error": str(error)}
            )
            return False
        self.forget()
        return True

    def summary(self, now_ms: int, term: int) -> LatenessSummary:
        """The figures since the window began, up to ``now_ms``: owners beyond the ``TOP_OWNERS`` with the largest
        backlog in the window folded into ``OTHER_OWNERS``, groups in priority order then owner; and the figures
        per priority over every owner."""
        named = set(top_owners(self._backlog, min_backlog=0))
        folded: dict[LatenessLabels, Histogram] = {}
        for labels, histogram in self._groups.items():
            key = labels if labels.owner in named else LatenessLabels(labels.priority, OTHER_OWNERS)
            folded.setdefault(key, Histogram()).merge(histogram)
        groups = tuple((labels, folded[labels].figures()) for labels in sorted(folded, key=priority_order))
        by_priority: dict[str, Histogram] = {}
        for labels, histogram in self._groups.items():
            by_priority.setdefault(labels.priority, Histogram()).merge(histogram)
        priorities = tuple(
            (priority, by_priority[priority].figures())
            for priority in sorted(by_priority, key=lambda p: priority_order(LatenessLabels(p, "")))
        )
        backlog = tuple(sorted(((o, self._backlog[o]) for o in named), key=lambda pair: (-pair[1], pair[0])))
        return LatenessSummary(
            partition=self.partition,
            since_ms=self._since if self._groups else now_ms,
            at_ms=now_ms,
            term=term,
            groups=groups,
            priorities=priorities,
            backlog=backlog,
        )
