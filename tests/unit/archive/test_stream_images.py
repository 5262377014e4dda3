"""The archive function reads a stream image's typed JSON into the same plain values as boto3's deserializer."""

from __future__ import annotations

from base64 import b64encode
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from jobsched.dynamodb.layout import plain
from jobsched.dynamodb.stream import plain_attribute

VALUES: list[Any] = [
    "team-a",
    "",
    12,
    -7,
    10**20,
    Decimal("1.5"),
    Decimal("2.0"),
    Decimal("1E+3"),
    True,
    False,
    None,
    b"\x00\xffbytes",
    [1, "a", {"x": [Decimal("0.25"), None]}],
    {"attempt": 2, "tries": [{"worker": "w", "round": 0}]},
    {"a", "b"},
    {1, 2},
    {b"x", b"y"},
]


@pytest.mark.parametrize("value", VALUES, ids=[f"{i}-{type(v).__name__}" for i, v in enumerate(VALUES)])
def test_a_stream_attribute_reads_as_the_deserializer_then_plain_give_it(value: Any) -> None:
    typed = TypeSerializer().serialize(value)
    expected = plain(TypeDeserializer().deserialize(typed))
    got = plain_attribute(_as_event_json(typed))
    if isinstance(expected, set):
        assert got == {plain(v) for v in expected}
        return
    if hasattr(expected, "value"):  # boto3's Binary
        expected = expected.value
    assert got == expected
    assert type(got) is type(expected)


def _as_event_json(value: Any) -> Any:
    """``value`` as a Lambda event carries it: binary base64-encoded (boto3's serializer leaves it bytes)."""
    if isinstance(value, bytes):
        return b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _as_event_json(v) for k, v in value.items()}
    if isinstance(value, list | set):
        return [_as_event_json(v) for v in value]
    return value


def test_an_unknown_attribute_type_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'X'"):
        plain_attribute({"X": "1"})


def test_a_malformed_number_is_refused() -> None:
    with pytest.raises(ValueError):
        plain_attribute({"N": "twelve"})
