"""The CONTROL table in memory: leases (``domain.lease.LeaseStore``), watermarks
(``ports.control.WatermarkStore``), lateness summaries (``ports.lateness.LatenessStore``) and the partitions'
high-water mark (``ports.control.PartitionMarks``), with
the conditions of ``store.control.ControlStore`` (``tests/contract/test_control_store_contract.py``)."""

from __future__ import annotations

import threading

from jobsched.domain.lease import LeaseRecord


class MemoryControlStore:
    """Leases, watermarks and the high-water mark in dicts. ``fail_next``: exceptions the next calls raise (one
    each, oldest first), to force the callers' error paths; ``writes`` counts accepted lease writes."""

    def __init__(self) -> None:
        self.records: dict[int, LeaseRecord] = {}
        self.watermarks: dict[int, tuple[int, int]] = {}  # partition -> (bucket, term)
        self.positions: dict[int, tuple[str, int]] = {}  # partition -> (positions, term)
        self.lateness: dict[int, tuple[str, int]] = {}  # partition -> (lateness summary, term)
        self.marks: dict[str, int] = {}  # "partitions" / "due_shards" -> high-water mark
        self.fail_next: list[Exception] = []
        self.writes = 0
        self._lock = threading.Lock()

    def _maybe_fail(self) -> None:
        if self.fail_next:
            raise self.fail_next.pop(0)

    # --- leases ---------------------------------------------------------------------------------

    def read_lease(self, partition: int) -> LeaseRecord | None:
        """The lease record of ``partition``, or None."""
        self._maybe_fail()
        return self.records.get(partition)

    def take_lease(self, record: LeaseRecord, *, previous: LeaseRecord | None, now_ms: int) -> bool:
        """Write ``record`` if the stored lease is still ``previous`` (same term) and expired by ``now_ms``; with
        ``previous=None``, only if none exists."""
        self._maybe_fail()
        with self._lock:
            current = self.records.get(record.partition)
            if previous is None and current is not None:
                return False
            if previous is not None and (
                current is None or current.term != previous.term or current.expires_at >= now_ms
            ):
                return False
            self.records[record.partition] = record
            self.writes += 1
            return True

    def renew_lease(self, record: LeaseRecord) -> bool:
        """Move ``expires_at`` of the held lease to ``record.expires_at``, if holder and term are unchanged. A
        release is the same write at the release instant (``release_lease``)."""
        self._maybe_fail()
        with self._lock:
            current = self.records.get(record.partition)
            if current is None or current.holder != record.holder or current.term != record.term:
                return False
            self.records[record.partition] = record
            self.writes += 1
            return True

    release_lease = renew_lease

    # --- watermarks -----------------------------------------------------------------------------

    def read_watermark(self, partition: int) -> int | None:
        """The stored watermark bucket of ``partition``, or None."""
        self._maybe_fail()
        stored = self.watermarks.get(partition)
        return stored[0] if stored else None

    def advance_watermark(self, partition: int, bucket: int, *, term: int, now_ms: int) -> bool:
        """Store ``bucket`` if ahead of the stored one and no newer term wrote it (or none is stored)."""
        self._maybe_fail()
        with self._lock:
            stored = self.watermarks.get(partition)
            if stored is not None and not (stored[0] < bucket and stored[1] <= term):
                return False
            self.watermarks[partition] = (bucket, term)
            return True

    def read_positions(self, partition: int) -> str | None:
        """The stored read positions of ``partition``, or None."""
        return self._read_termed(self.positions, partition)

    def save_positions(self, partition: int, positions: str, *, term: int) -> bool:
        """Store ``positions`` unless a newer ``term`` stored them."""
        return self._save_termed(self.positions, partition, positions, term)

    def read_lateness(self, partition: int) -> str | None:
        """The stored lateness summary of ``partition`` (``ports.lateness.LatenessStore``), or None."""
        return self._read_termed(self.lateness, partition)

    def save_lateness(self, partition: int, summary: str, *, term: int) -> bool:
        """Store ``summary`` unless a newer ``term`` stored one."""
        return self._save_termed(self.lateness, partition, summary, term)

    def _read_termed(self, kept: dict[int, tuple[str, int]], partition: int) -> str | None:
        """The text ``kept`` holds for ``partition``, or None."""
        self._maybe_fail()
        stored = kept.get(partition)
        return stored[0] if stored else None

    def _save_termed(self, kept: dict[int, tuple[str, int]], partition: int, text: str, term: int) -> bool:
        """Keep ``(text, term)`` in ``kept`` for ``partition`` unless a newer term's is there."""
        self._maybe_fail()
        with self._lock:
            stored = kept.get(partition)
            if stored is not None and stored[1] > term:
                return False
            kept[partition] = (text, term)
            return True

    @property
    def high_water(self) -> int | None:
        """The partitions' high-water mark (None: none stored)."""
        return self.marks.get("partitions")

    @property
    def shard_high_water(self) -> int | None:
        """The due shards' high-water mark (None: none stored)."""
        return self.marks.get("due_shards")

    def raise_partition_high_water(self, partitions: int) -> tuple[int, bool]:
        """Record ``partitions``; returns ``(the most any deployment ran, whether no mark was stored)``."""
        return self._raise("partitions", partitions)

    def raise_shard_high_water(self, shards: int) -> tuple[int, bool]:
        """Record ``shards``; returns ``(the most any deployment used, whether no mark was stored)``."""
        return self._raise("due_shards", shards)

    def _raise(self, name: str, count: int) -> tuple[int, bool]:
        """Raise mark ``name`` to ``count``: ``(the mark after, whether it was missing)``."""
        self._maybe_fail()
        with self._lock:
            stored = self.marks.get(name)
            self.marks[name] = count if stored is None else max(stored, count)
            return self.marks[name], stored is None
