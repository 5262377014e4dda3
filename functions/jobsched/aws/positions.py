"""The JSON form of the scheduler's stored read positions (``ports.positions.PositionsCodec``)."""

from __future__ import annotations

import json

from jobsched.observability import logger
from jobsched.ports.jobs import DueCursor
from jobsched.ports.positions import ReadPositions


class JsonPositions:
    """``ReadPositions`` as JSON ``{"floor": <bucket or null>, "watermark": <bucket or null>,
    "cursors": {"<bucket>:<shard>:<lane>": [at, job_id, due_at, version]}}``, cursors sorted by key."""

    def encode(self, positions: ReadPositions) -> str:
        """The positions as stored (``WatermarkStore.save_positions``)."""
        return json.dumps(
            {
                "floor": positions.floor,
                "watermark": positions.watermark,
                "cursors": {
                    f"{b}:{s}:{lane}": list(c) for (b, s, lane), c in sorted(positions.cursors.items())
                },
            }
        )

    def decode(self, text: str) -> ReadPositions:
        """Inverse of :meth:`encode`; a value no code of ours wrote is logged and reads as empty positions."""
        try:
            data = json.loads(text)
            cursors: dict[tuple[int, int, str], DueCursor] = {}
            for key, (at, job_id, due_at, version) in data["cursors"].items():
                bucket, shard, lane = key.split(":")
                cursors[(int(bucket), int(shard), lane)] = (int(at), str(job_id), int(due_at), int(version))
            floor, watermark = data.get("floor"), data.get("watermark")
            return ReadPositions(
                cursors,
                int(floor) if floor is not None else None,
                int(watermark) if watermark is not None else None,
            )
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            logger.error(
                "stored read positions unreadable; reading the lanes from their start", error=str(error)
            )
            return ReadPositions()
