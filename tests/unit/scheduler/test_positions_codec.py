"""The stored read positions' JSON form (``adapters.positions.JsonPositions``) and the floor a new leader takes
from them (``domain.due_reader.read_floor``)."""

from __future__ import annotations

import pytest

from jobsched.aws.positions import JsonPositions
from jobsched.domain.due_reader import UPGRADE_REWIND_MS, read_floor
from jobsched.ports.positions import ReadPositions


def test_positions_read_back_as_they_were_stored() -> None:
    positions = ReadPositions({(7, 1, "early"): (420_000, "j_" + "0" * 20, 420_000, 3)}, floor=5, watermark=7)

    assert JsonPositions().decode(JsonPositions().encode(positions)) == positions


@pytest.mark.parametrize(
    "text", ["", "not json", "[]", '{"cursors": {"7:1": [1, "j", 2, 3]}}', '{"floor": 1}']
)
def test_positions_no_code_of_ours_wrote_read_as_none(text: str) -> None:
    assert JsonPositions().decode(text) == ReadPositions()


def test_a_watermark_stored_without_positions_is_read_again_from_the_rewind() -> None:
    now_ms, bucket_ms = 100 * 60_000, 60_000

    cursors, floor = read_floor(99, None, now_ms, bucket_ms)

    assert cursors == {} and floor == (now_ms - UPGRADE_REWIND_MS) // bucket_ms


def test_positions_stored_behind_the_watermark_make_their_watermark_the_floor() -> None:
    cursors, floor = read_floor(12, ReadPositions(watermark=9), 100 * 60_000, 60_000)

    assert cursors == {} and floor == 9
