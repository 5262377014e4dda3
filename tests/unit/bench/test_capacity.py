"""The DynamoDB sizing rules the benchmarks price writes with (AWS, "DynamoDB item sizes and formats";
"Using Global Secondary Indexes in DynamoDB"; "Amazon DynamoDB Transactions: How it works")."""

from __future__ import annotations

import pytest

from bench.capacity import (
    IndexShape,
    index_write_units,
    item_size,
    item_write_cost,
    number_size,
    read_units,
    value_size,
    write_units,
)
from bench.counting import index_shapes
from jobsched.resources import JOBS, RUNS


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("0", 2),  # one significant digit: 1 byte for it + 1
        ("7", 2),
        ("12", 2),
        ("123", 3),
        ("1000", 2),  # trailing zeroes trimmed
        ("0.0012", 2),  # leading zeroes trimmed
        ("-12.5", 3),
        ("1767225600000", 5),  # an epoch ms: 8 significant digits
        ("1E+3", 2),
    ],
)
def test_number_size_counts_significant_digits(text: str, size: int) -> None:
    assert number_size(text) == size


def test_string_is_its_utf8_bytes_and_names_count() -> None:
    # "é" is 2 bytes in UTF-8; the attribute name "nä" is 3
    assert value_size({"S": "héllo"}) == 6
    assert item_size({"nä": {"S": "héllo"}}) == 3 + 6


def test_binary_bool_null_and_sets() -> None:
    assert value_size({"B": "AAEC"}) == 3  # base64 of 3 raw bytes
    assert value_size({"BOOL": True}) == 1
    assert value_size({"NULL": True}) == 1
    assert value_size({"SS": ["ab", "c"]}) == 3
    assert value_size({"NS": ["1", "123"]}) == 2 + 3


def test_list_and_map_have_3_bytes_plus_1_per_element() -> None:
    assert value_size({"L": []}) == 3
    assert value_size({"M": {}}) == 3
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (2 + 1) + (2 + 1)
    assert value_size({"M": {"k": {"S": "ab"}}}) == 3 + (1 + 2 + 1)


def test_unknown_type_is_rejected() -> None:
    with pytest.raises(ValueError):
        value_size({"X": "?"})
    with pytest.raises(ValueError):
        value_size({"S": "a", "N": "1"})


@pytest.mark.parametrize(("size", "units"), [(0, 1), (1, 1), (1024, 1), (1025, 2), (32 * 1024 + 400, 33)])
def test_write_units_per_started_kb(size: int, units: int) -> None:
    assert write_units(size) == units


def test_read_units_per_started_4kb_half_when_eventual() -> None:
    assert read_units(0, consistent=True) == 1.0
    assert read_units(0, consistent=False) == 0.5
    assert read_units(4096, consistent=True) == 1.0
    assert read_units(4097, consistent=False) == 1.0
    assert read_units(33 * 1024, consistent=False) == 4.5


def _item(size: int, **extra: str) -> dict[str, dict[str, str]]:
    """An item of exactly ``size`` bytes plus the ``extra`` string attributes."""
    item = {"pk": {"S": "p"}, **{k: {"S": v} for k, v in extra.items()}}
    pad = size - item_size(item) - len("pad")
    assert pad >= 0
    item["pad"] = {"S": "x" * pad}
    assert item_size(item) == size
    return item


def test_update_costs_the_larger_of_before_and_after() -> None:
    small, large = _item(500), _item(1500)
    assert item_write_cost(small, large).table == 2
    assert item_write_cost(large, small).table == 2
    assert item_write_cost(None, small).table == 1


def test_refused_conditional_write_costs_the_existing_item_and_no_index() -> None:
    shape = IndexShape("i", ("gk",), ("pk",), "ALL")
    existing = _item(3000, gk="a")
    cost = item_write_cost(existing, None, indexes=[shape], succeeded=False)
    assert cost.table == 3
    assert cost.indexes == {}
    assert item_write_cost(None, None, succeeded=False).table == 1


def test_transactional_write_costs_double_on_the_table_only() -> None:
    shape = IndexShape("i", ("gk",), ("pk",), "KEYS_ONLY")
    cost = item_write_cost(None, _item(100, gk="a"), indexes=[shape], transactional=True)
    assert cost.table == 2
    assert cost.indexes == {"i": 1}
    assert cost.total == 3


def test_index_entry_enters_leaves_moves_and_projected_changes() -> None:
    shape = IndexShape("i", ("gk", "gs"), ("pk",), "INCLUDE", ("inc",))
    base = {"pk": {"S": "p"}, "gk": {"S": "a"}, "gs": {"N": "1"}, "inc": {"S": "x"}, "other": {"S": "o"}}
    assert shape.entry({"pk": {"S": "p"}}) is None  # sparse: no index key, no entry
    assert shape.entry(base) == {k: base[k] for k in ("pk", "gk", "gs", "inc")}
    # enters the index / leaves it: one write
    assert index_write_units(shape, {"pk": {"S": "p"}}, base) == 1
    assert index_write_units(shape, base, {"pk": {"S": "p"}}) == 1
    # an index key changes: delete + put
    assert index_write_units(shape, base, {**base, "gs": {"N": "2"}}) == 2
    # a projected attribute changes: one write; an attribute outside the projection: none
    assert index_write_units(shape, base, {**base, "inc": {"S": "y"}}) == 1
    assert index_write_units(shape, base, {**base, "other": {"S": "p"}}) == 0
    # absent before and after: none
    assert index_write_units(shape, None, None) == 0


def test_index_entry_size_is_what_the_projection_holds() -> None:
    keys_only = IndexShape("k", ("gk",), ("pk",), "KEYS_ONLY")
    big = _item(5000, gk="a")
    # the 5000-byte item's KEYS_ONLY entry is a few bytes: one unit, not five
    assert index_write_units(keys_only, None, big) == 1
    everything = IndexShape("a", ("gk",), ("pk",), "ALL")
    assert index_write_units(everything, None, big) == 5


def test_index_shapes_follow_the_shared_resource_definitions() -> None:
    due, by_owner, by_upstream = index_shapes(JOBS)
    assert (due.name, due.keys, due.table_keys, due.projection) == (
        "due",
        ("due_pk", "due_at"),
        ("pk", "sk"),
        "INCLUDE",
    )
    assert "next_run_at" in due.non_key
    assert (by_owner.name, by_owner.projection) == ("by_owner", "ALL")
    # only the spec items of jobs that run after another carry after_job (design §2.1)
    assert (by_upstream.name, by_upstream.keys, by_upstream.projection) == (
        "by_upstream",
        ("after_job", "name"),
        "ALL",
    )
    sweep, failures = index_shapes(RUNS)
    assert (sweep.keys, sweep.table_keys, sweep.projection) == (
        ("sweep_pk", "sweep_at"),
        ("job_id", "scheduled_for"),
        "KEYS_ONLY",
    )
    # the failures index shares the table's sort key: only rows carrying fail_owner are in it
    assert (failures.keys, failures.projection) == (("fail_owner", "scheduled_for"), "ALL")
