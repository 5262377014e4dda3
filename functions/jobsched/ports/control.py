"""The scheduler's control ports: due-index watermarks and read positions, the partitions' high-water mark, and the guard the
tick asks before each write. Implemented by ``jobsched.dynamodb.control.ControlStore`` (DynamoDB) and
``jobsched.memory.control.MemoryControlStore`` (in memory); leases are ``jobsched.domain.lease.LeaseStore``."""

from __future__ import annotations

from typing import Protocol


class WatermarkStore(Protocol):
    """Per partition, the oldest due-index bucket not yet drained (an integer ``due_at // bucket width``)."""

    def read_watermark(self, partition: int) -> int | None:
        """The stored watermark of ``partition`` (strongly consistent), or None."""
        ...

    def advance_watermark(self, partition: int, bucket: int, *, term: int, now_ms: int) -> bool:
        """Store ``bucket`` if it is ahead of the stored watermark and no newer ``term`` wrote it (or none is
        stored). False when refused: watermarks never move back."""
        ...

    def read_positions(self, partition: int) -> str | None:
        """The stored read positions of ``partition``'s due-index lanes (strongly consistent; as
        ``ports.positions.PositionsCodec.encode`` wrote them), or None."""
        ...

    def save_positions(self, partition: int, positions: str, *, term: int) -> bool:
        """Store ``positions`` unless a newer ``term`` stored them. False when refused."""
        ...


class PartitionMarks(Protocol):
    """The most scheduler partitions, and the most due shards, any deployment ran."""

    def raise_partition_high_water(self, partitions: int) -> tuple[int, bool]:
        """Record that a deployment runs ``partitions`` partitions. Returns ``(the most any deployment ran,
        whether no mark was stored yet)``."""
        ...

    def raise_shard_high_water(self, shards: int) -> tuple[int, bool]:
        """Record that a deployment files due entries in ``shards`` due shards (``Settings.due_shards``). Returns
        ``(the most any deployment used, whether no mark was stored yet)``: a due entry may be in any shard below
        it, so the tick reads that many (``Scheduler.read_shards``)."""
        ...


class Guard(Protocol):
    """What the tick asks before each write: the held term, or ``LeaseLost`` (``LeaderLease.check``)."""

    def check(self) -> int:
        """The fencing term of the held lease. Raises ``jobsched.domain.lease.LeaseLost``."""
        ...


class LeaderGuard(Guard, Protocol):
    """A :class:`Guard` that knows when the terms before it stopped (``LeaderLease``)."""

    @property
    def earlier_terms_until(self) -> int | None:
        """Epoch ms after which no earlier term wrote or sent anything; None: there was no earlier term."""
        ...
