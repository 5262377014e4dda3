"""Lateness by priority and owner in the metrics (design §8): the labels a run's lateness is counted under, the
summary of a scheduler partition's dispatch lateness that ``GET /health`` reads, and where that summary is kept.

Labels keep the metrics' cardinality bounded: an owner is named only while it is one of the top owners by backlog
(``jobsched.domain.lateness.top_owners``), every other owner counts as ``OTHER_OWNERS``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

OTHER_OWNERS = "other"
"""The owner label of every owner not among the top owners by backlog (and of runs whose job names no owner)."""


@dataclass(frozen=True)
class LatenessLabels:
    """What a run's lateness is counted under: ``priority`` (``high``, ``normal``, ``low``: ``models.Priority``)
    and ``owner``, the job's owner when it was one of the top owners by backlog at the tick that dispatched the run,
    else ``OTHER_OWNERS``. The metrics' dimensions ``priority`` and ``owner``."""

    priority: str
    owner: str


@dataclass(frozen=True)
class LatenessFigures:
    """Lateness of ``runs`` (> 0) runs, in ms: the median ``p50_ms``, the 99th percentile ``p99_ms`` (each the
    upper bound of its histogram bucket, within 5 % above the exact value, never above ``max_ms``) and
    ``max_ms``."""

    runs: int
    p50_ms: int
    p99_ms: int
    max_ms: int


@dataclass(frozen=True)
class LatenessSummary:
    """A scheduler partition's dispatch lateness (enqueue time minus dispatch instant, ms) over
    ``[since_ms, at_ms]`` (epoch ms), saved by its leader at most once a minute
    (``jobsched.domain.lateness.LatenessBoard``).

    ``groups``: figures per label, the owners named at most ``TOP_OWNERS`` (the others folded into
    ``OTHER_OWNERS``); ``priorities``: figures per priority over every owner; ``backlog``: the named owners with
    the largest backlog (due jobs one tick read) each had in the window, largest first; ``term``: the leader's
    fencing term."""

    partition: int
    since_ms: int
    at_ms: int
    term: int
    groups: tuple[tuple[LatenessLabels, LatenessFigures], ...]
    priorities: tuple[tuple[str, LatenessFigures], ...]
    backlog: tuple[tuple[str, int], ...]


class LatenessCodec(Protocol):
    """How a ``LatenessSummary`` is stored (``jobsched.aws.wire``'s JSON)."""

    def encode(self, summary: LatenessSummary) -> str:
        """The stored text of ``summary``."""
        ...

    def decode(self, text: str) -> LatenessSummary:
        """The summary ``encode`` stored. Raises ValueError for text it did not write."""
        ...


class LatenessStore(Protocol):
    """Where each partition's latest ``LatenessSummary`` is kept (the CONTROL store: item ``lateness#<partition>``),
    as the codec's text."""

    def save_lateness(self, partition: int, summary: str, *, term: int) -> bool:
        """Store ``summary`` for ``partition`` unless a newer ``term`` stored one: 1 write. Returns whether it was
        stored. Raises the store's errors."""
        ...

    def read_lateness(self, partition: int) -> str | None:
        """The stored summary of ``partition``, or None: 1 read. Raises the store's errors."""
        ...
