"""The stuck rule of the due index's anti-entropy (pure): which entries are taken for lost, and their new entry."""

from __future__ import annotations

from dataclasses import replace

from jobsched.domain.due_repair import STUCK_AFTER_MS, is_stuck, refiled_entry, stuck_due_before
from jobsched.ports.jobs import EARLY, INDEX, LATE, DueEntry

NOW = 1_772_445_600_000
BUCKET_MS = 60_000
DRAINED = {0: NOW // BUCKET_MS}
OLD = DueEntry("j_1", 0, NOW // BUCKET_MS - 200, 3, NOW - STUCK_AFTER_MS - 1, lane=EARLY, version=4)


def test_an_entry_past_the_threshold_in_a_drained_bucket_is_stuck() -> None:
    assert stuck_due_before(NOW) == NOW - STUCK_AFTER_MS
    assert is_stuck(OLD, now_ms=NOW, watermarks=DRAINED)
    assert is_stuck(replace(OLD, lane=LATE), now_ms=NOW, watermarks=DRAINED)


def test_an_entry_not_past_the_threshold_undrained_unled_or_off_the_timer_lanes_is_not() -> None:
    assert not is_stuck(replace(OLD, due_at=NOW - STUCK_AFTER_MS), now_ms=NOW, watermarks=DRAINED)
    assert not is_stuck(OLD, now_ms=NOW, watermarks={0: OLD.bucket})  # its bucket not drained yet
    assert not is_stuck(OLD, now_ms=NOW, watermarks={1: NOW // BUCKET_MS})  # its partition has no watermark
    assert not is_stuck(replace(OLD, lane=INDEX), now_ms=NOW, watermarks=DRAINED)  # the migration's
    assert not is_stuck(None, now_ms=NOW, watermarks=DRAINED)  # not in the due index


def test_a_stuck_entry_is_refiled_in_the_late_lane_at_now_in_a_current_shard() -> None:
    entry = refiled_entry(OLD, now_ms=NOW, shards=1, bucket_ms=BUCKET_MS)
    assert (entry.job_id, entry.partition, entry.due_at, entry.version) == ("j_1", 0, OLD.due_at, 4)
    assert (entry.lane, entry.position, entry.bucket, entry.shard) == (LATE, NOW, NOW // BUCKET_MS, 0)
