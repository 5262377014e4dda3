"""The sweeper's reading order over the sweep index's shards: a bounded pass starves no shard."""

from __future__ import annotations

from typing import Any

from jobsched.domain.sweeper import Sweeper, SweepReport
from jobsched.ports.runs import SWEEP_SHARDS, RunKey, SweepPage


class ShardedRows:
    """``sweep_due`` answering one due row per shard; records the order shards were read in."""

    def __init__(self) -> None:
        self.read: list[int] = []

    def sweep_due(self, shard: int, now_ms: int, *, limit: int, cursor: Any = None) -> SweepPage:
        self.read.append(shard)
        return SweepPage([RunKey(f"j_{shard}", 0)], None)


def _first_shards(now_ms: int, max_rows: int) -> list[int]:
    rows = ShardedRows()
    sweeper = Sweeper(
        settings=None,  # type: ignore[arg-type]  # reading the index needs only the rows
        runs=rows,  # type: ignore[arg-type]
        jobs=None,  # type: ignore[arg-type]
        queue=None,  # type: ignore[arg-type]
        failures=None,  # type: ignore[arg-type]
        clock=lambda: now_ms,
        metrics=None,  # type: ignore[arg-type]
        max_rows=max_rows,
    )
    report = SweepReport()
    sweeper._due_keys(now_ms, report)
    assert report.truncated == (max_rows < SWEEP_SHARDS)
    return rows.read


def test_each_minute_a_bounded_pass_starts_at_the_next_shard() -> None:
    # Given a backlog in every shard and room for only two rows per pass
    minute = 60_000
    # When the sweeper runs in consecutive minutes
    passes = [_first_shards(m * minute, max_rows=2) for m in range(SWEEP_SHARDS + 1)]
    # Then every shard is read first once per cycle, and the cycle repeats
    assert [p[0] for p in passes[:SWEEP_SHARDS]] == list(range(SWEEP_SHARDS))
    assert passes[SWEEP_SHARDS][0] == 0
    assert all(len(p) == 2 for p in passes)


def test_an_unbounded_pass_reads_every_shard_once() -> None:
    assert sorted(_first_shards(7 * 60_000, max_rows=10_000)) == list(range(SWEEP_SHARDS))
