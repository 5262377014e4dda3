"""The scheduler's stored read positions: the record a leader keeps of how far it read each due-index lane, and
the codec that turns it into the text ``WatermarkStore.save_positions`` stores (``read_positions`` returns).
Implemented by ``jobsched.aws.positions.JsonPositions``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from jobsched.ports.jobs import DueCursor


@dataclass(frozen=True)
class ReadPositions:
    """One partition's read positions. ``cursors``: per ``(bucket, shard, lane)`` the ``DueEntry.order`` of the
    last entry passed; ``floor``: the oldest bucket behind the watermark still to be read
    (``due_reader.UPGRADE_REWIND_MS``), or None; ``watermark``: the watermark (bucket) when they were stored, or
    None. Buckets are epoch ms // bucket width (ms)."""

    cursors: dict[tuple[int, int, str], DueCursor] = field(default_factory=dict)
    floor: int | None = None
    watermark: int | None = None


class PositionsCodec(Protocol):
    """Turns :class:`ReadPositions` into stored text and back."""

    def encode(self, positions: ReadPositions) -> str:
        """The text to store; equal positions give equal text (the tick stores only what changed)."""
        ...

    def decode(self, text: str) -> ReadPositions:
        """Inverse of :meth:`encode`. A text no code of ours wrote reads as empty positions (no cursor, no floor,
        no watermark: a new leader then reads its lanes from their start, slower, never wrong); never raises."""
        ...
