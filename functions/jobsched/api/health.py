"""``GET /health`` (its metrics in design §8): the scheduler's dispatch lateness per priority and for the top
owners by backlog, from the lateness summary each partition's leader saves once a minute
(``jobsched.domain.lateness``).

Another owner's name is not shown: a top owner that is not the caller appears with ``owner`` null (its rank and
figures only). The metrics (``DispatchLatenessMs``, ``RunLatenessMs`` by ``priority`` and ``owner``) name every
top owner, for the deployment's operators.

Several partitions' summaries are combined conservatively: runs add up, and each percentile and maximum is the
largest of the partitions' (exact with one partition, the default)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, Field

from jobsched.clock import from_ms
from jobsched.domain.lateness import TOP_OWNER_MIN_BACKLOG, TOP_OWNERS, priority_order
from jobsched.models import Priority
from jobsched.ports import lateness as stored
from jobsched.ports.lateness import OTHER_OWNERS, LatenessFigures, LatenessLabels

logger = logging.getLogger(__name__)


class PriorityLateness(BaseModel):
    """Dispatch lateness of the runs of one priority (ms)."""

    priority: Priority = Field(description="the jobs' priority")
    runs: int = Field(description="runs dispatched in the window")
    p50_ms: int = Field(description="median dispatch lateness (ms): enqueued minus the dispatch instant")
    p99_ms: int = Field(description="99th percentile dispatch lateness (ms)")
    max_ms: int = Field(description="largest dispatch lateness (ms)")


class OwnerLateness(BaseModel):
    """One of the top owners by backlog, with its dispatch lateness per priority."""

    rank: int = Field(description="1 for the owner with the largest backlog, 2 for the next, ...")
    owner: str | None = Field(description="the owner, when it is the caller; null for another owner")
    you: bool = Field(description="whether this owner is the caller")
    backlog: int = Field(
        description="the largest backlog (due jobs one tick read) the owner had in the window"
    )
    by_priority: list[PriorityLateness] = Field(description="its dispatch lateness per priority")


class Health(BaseModel):
    """``GET /health``: the scheduler's dispatch lateness over its latest window (as the metrics: design §8)."""

    since: datetime | None = Field(
        description="start of the window the figures cover (UTC); null: no summary saved yet"
    )
    until: datetime | None = Field(description="end of the window (UTC), the latest summary's time")
    partitions: int = Field(description="scheduler partitions of the deployment")
    reporting: int = Field(description="partitions with a saved summary")
    by_priority: list[PriorityLateness] = Field(
        description="dispatch lateness per priority, over every owner (priorities with runs, high first)"
    )
    top_owners: list[OwnerLateness] = Field(
        description=f"the owners with the largest backlog (at most {TOP_OWNERS}, each with at least "
        f"{TOP_OWNER_MIN_BACKLOG} due jobs in one tick), largest first"
    )
    other: list[PriorityLateness] = Field(description="dispatch lateness per priority of every other owner")


class HealthReads:
    """``GET /health`` on the CONTROL store's lateness summaries (``store``, read through ``codec``) of the
    deployment's ``partitions`` (1 read each)."""

    def __init__(self, store: stored.LatenessStore, codec: stored.LatenessCodec, partitions: int) -> None:
        self.store = store
        self.codec = codec
        self.partitions = partitions

    def summaries(self) -> list[stored.LatenessSummary]:
        """Every partition's latest summary; one no code of ours wrote is logged and left out. Raises the store's
        errors."""
        found: list[stored.LatenessSummary] = []
        for partition in range(self.partitions):
            text = self.store.read_lateness(partition)
            if text is None:
                continue
            try:
                found.append(self.codec.decode(text))
            except ValueError as error:
                logger.error(
                    "lateness summary unreadable", extra={"partition": partition, "error": str(error)}
                )
        return found

    def health(self, caller: str) -> Health:
        """The figures as ``caller`` (an owner) may see them. Raises the store's errors."""
        summaries = self.summaries()
        groups = combined((labels, figures) for s in summaries for labels, figures in s.groups)
        priorities = combined(
            (LatenessLabels(priority, ""), figures) for s in summaries for priority, figures in s.priorities
        )
        backlog: dict[str, int] = {}
        for summary in summaries:
            for owner, count in summary.backlog:
                backlog[owner] = max(backlog.get(owner, 0), count)
        ranked = sorted(backlog.items(), key=lambda pair: (-pair[1], pair[0]))[:TOP_OWNERS]
        named = {owner for owner, _ in ranked}
        return Health(
            since=from_ms(min(s.since_ms for s in summaries)) if summaries else None,
            until=from_ms(max(s.at_ms for s in summaries)) if summaries else None,
            partitions=self.partitions,
            reporting=len(summaries),
            by_priority=_lines(priorities, None),
            top_owners=[
                OwnerLateness(
                    rank=rank,
                    owner=owner if owner == caller else None,
                    you=owner == caller,
                    backlog=count,
                    by_priority=_lines(groups, owner),
                )
                for rank, (owner, count) in enumerate(ranked, start=1)
            ],
            other=_lines(
                combined(
                    (LatenessLabels(labels.priority, OTHER_OWNERS), figures)
                    for labels, figures in groups.items()
                    if labels.owner not in named
                ),
                OTHER_OWNERS,
            ),
        )


def combined(
    groups: Iterable[tuple[LatenessLabels, LatenessFigures]],
) -> dict[LatenessLabels, LatenessFigures]:
    """The figures of equal labels combined: runs added, each percentile and the maximum the largest (an upper
    bound of the combined runs'), in priority order (``domain.lateness.priority_order``)."""
    merged: dict[LatenessLabels, LatenessFigures] = {}
    for labels, figures in groups:
        known = merged.get(labels)
        merged[labels] = (
            figures
            if known is None
            else LatenessFigures(
                known.runs + figures.runs,
                max(known.p50_ms, figures.p50_ms),
                max(known.p99_ms, figures.p99_ms),
                max(known.max_ms, figures.max_ms),
            )
        )
    return {labels: merged[labels] for labels in sorted(merged, key=priority_order)}


def _lines(groups: dict[LatenessLabels, LatenessFigures], owner: str | None) -> list[PriorityLateness]:
    """``groups`` of ``owner`` (None: every group) as the answer's lines; groups of an unknown priority left
    out."""
    return [
        PriorityLateness(
            priority=Priority(labels.priority),
            runs=figures.runs,
            p50_ms=figures.p50_ms,
            p99_ms=figures.p99_ms,
            max_ms=figures.max_ms,
        )
        for labels, figures in groups.items()
        if (owner is None or labels.owner == owner) and labels.priority in {p.value for p in Priority}
    ]
