"""DynamoDB capacity units from item sizes: the published sizing rules, as pure functions.

moto does not report ``ConsumedCapacity`` faithfully, so the benchmarks compute write and read units
themselves from the items as DynamoDB stores them (wire format: ``{"name": {"S": "..."}}``), observed
before and after each request (see ``bench.counting``). Rules and their sources (AWS DynamoDB Developer
Guide):

- "DynamoDB item sizes and formats": an item's size is the sum of its attribute names' UTF-8 lengths and
  its values' sizes. Strings: UTF-8 bytes. Numbers: 1 byte per two significant digits (leading and
  trailing zeroes trimmed) + 1. Binary: raw bytes. Boolean and null: 1 byte. List and map: 3 bytes + the
  sizes of their elements + 1 byte per element (a map element's size includes its name). Sets: the sum of
  their elements' sizes.
- "Read/write capacity mode" (on-demand): 1 write unit per started 1 KB of item size; 1 read unit per
  started 4 KB for a strongly consistent read, half of it eventually consistent; a Query rounds the total
  of the items it reads up once (not per item); a read of nothing still costs the minimum.
- "PutItem"/"UpdateItem" API reference and "Working with items": a write costs by the larger of the item
  before and after; a delete by the deleted item; a refused conditional write by the existing item (or 1).
- "Using Global Secondary Indexes in DynamoDB", section "Provisioned throughput considerations": an index
  entry is the table key + the index key + the projected attributes; writing an item that enters the index
  costs one index write, leaving it one, changing an index key attribute two (delete + put), changing only
  projected attributes one, anything else none.
- "Amazon DynamoDB Transactions: How it works", section "Capacity management for transactions": every
  item written in ``TransactWriteItems`` costs twice (prepare + commit).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Item = Mapping[str, Mapping[str, Any]]
"""An item in DynamoDB's wire format: attribute name -> ``{"<type>": value}``."""

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number given as its decimal text (``"1767225600000"``, ``"-0.50"``, ``"1E+3"``):
    1 per two significant digits, rounded up, plus 1."""
    mantissa = text.strip().lstrip("+-").lower().split("e")[0]
    digits = mantissa.replace(".", "").strip("0")
    significant = max(1, len(digits))
    return math.ceil(significant / 2) + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value in wire format (without its name). Raises ValueError for an unknown type."""
    if len(value) != 1:
        raise ValueError(f"not a DynamoDB attribute value: {value!r}")
    kind, data = next(iter(value.items()))
    if kind == "S":
        return len(str(data).encode("utf-8"))
    if kind == "N":
        return number_size(str(data))
    if kind == "B":
        return _binary_size(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(s).encode("utf-8")) for s in data)
    if kind == "NS":
        return sum(number_size(str(n)) for n in data)
    if kind == "BS":
        return sum(_binary_size(b) for b in data)
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in data)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(v) + 1 for k, v in data.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def _binary_size(data: Any) -> int:
    if isinstance(data, bytes | bytearray):
        return len(data)
    return len(base64.b64decode(str(data)))


def item_size(item: Item | None) -> int:
    """Bytes of an item: attribute names (UTF-8) + values. 0 for None (no item)."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(size_bytes: int) -> int:
    """Write units of one item write of ``size_bytes``: 1 per started KB, at least 1."""
    return max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))


def read_units(size_bytes: int, *, consistent: bool) -> float:
    """Read units of a read of ``size_bytes`` in total (one item, or all items a Query read): 1 per started
    4 KB strongly consistent, half that eventually consistent; at least the minimum of one."""
    units = max(1, math.ceil(size_bytes / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


@dataclass(frozen=True)
class IndexShape:
    """A global secondary index as the cost rules see it: its key attributes, the base table's key
    attributes, and its projection (``INCLUDE`` projects ``non_key`` besides the keys)."""

    name: str
    keys: tuple[str, ...]
    table_keys: tuple[str, ...]
    projection: Literal["ALL", "KEYS_ONLY", "INCLUDE"]
    non_key: tuple[str, ...] = ()

    def entry(self, item: Item | None) -> dict[str, Mapping[str, Any]] | None:
        """The index entry of ``item``, or None when the item is absent or lacks an index key (sparse)."""
        if not item or any(key not in item for key in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        names = {*self.table_keys, *self.keys, *(self.non_key if self.projection == "INCLUDE" else ())}
        return {name: item[name] for name in names if name in item}


@dataclass(frozen=True)
class WriteCost:
    """Write units of one item write: on the table and on its indexes (index name -> units)."""

    table: int
    indexes: Mapping[str, int]

    @property
    def total(self) -> int:
        return self.table + sum(self.indexes.values())


def index_write_units(shape: IndexShape, before: Item | None, after: Item | None) -> int:
    """Write units an item write costs on one index, from the item before and after (None: absent)."""
    old, new = shape.entry(before), shape.entry(after)
    if old is None and new is None:
        return 0
    if old is None:
        return write_units(item_size(new))
    if new is None:
        return write_units(item_size(old))
    if any(old.get(k) != new.get(k) for k in shape.keys):
        return write_units(item_size(old)) + write_units(item_size(new))
    if old != new:
        return write_units(max(item_size(old), item_size(new)))
    return 0


def item_write_cost(
    before: Item | None,
    after: Item | None,
    *,
    indexes: Iterable[IndexShape] = (),
    succeeded: bool = True,
    transactional: bool = False,
) -> WriteCost:
    """Write units of one put/update/delete of an item that was ``before`` and became ``after``.

    A refused conditional write costs the existing item's size (at least 1) and touches no index.
    ``transactional`` doubles the table write (prepare + commit); index writes are not doubled.
    """
    if not succeeded:
        return WriteCost(write_units(item_size(before)), {})
    table = write_units(max(item_size(before), item_size(after)))
    if transactional:
        table *= 2
    return WriteCost(table, {shape.name: index_write_units(shape, before, after) for shape in indexes})
