"""Durability of local mode: the DynamoDB tables in a JSON snapshot file, kept current from table streams.

moto keeps everything in memory, so local mode saves the four tables (jobs, runs, control, idempotency)
to ``<data dir>/state.json``:

- On start, :func:`restore` loads the file into the fresh moto tables (items whose TTL passed are dropped,
  as DynamoDB's TTL would have; scheduler leases are marked expired, since no holder survives a restart,
  keeping their fencing ``term``).
- While running, every table has a DynamoDB stream; :class:`TableMirror` applies each stream record to an
  in-memory copy of the tables (O(changes), never a scan), and :class:`Snapshotter` writes the copy
  atomically (temp file, fsync, rename) every ``interval_s`` (2 s) when it changed.
- At a graceful stop the final snapshot is taken from a full scan (the source of truth).

A SIGKILL therefore loses at most the writes of the last ``interval_s`` (plus the stream poll period).
The file is the DynamoDB JSON of each item (``{"S": ...}``, ``{"N": ...}``), so types round-trip exactly.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.config import Config

from jobsched.clock import Clock, system_clock
from jobsched.observability import logger
from jobsched.resources import CONTROL, TABLES, TableDef

FORMAT = "jobsched-local-state"
VERSION = 1
STATE_FILE = "state.json"

Item = dict[str, Any]
"""A DynamoDB item in the low-level (typed) JSON form: ``{"pk": {"S": "job#j_1"}, ...}``."""

StreamListener = Callable[[str, list[dict[str, Any]]], None]
"""Called with ``(table id, stream records)`` after each batch of records of a table was applied."""


class StateFileError(Exception):
    """The state file exists but cannot be used (unreadable, not jobsched's, or from a newer version)."""


def _key_of(table: TableDef, keys: Item) -> str:
    names = [table.partition.name] + ([table.sort.name] if table.sort else [])
    return json.dumps([keys[n] for n in names], sort_keys=True, separators=(",", ":"))


def _expired(table: TableDef, item: Item, now_s: int) -> bool:
    if not table.ttl_attribute:
        return False
    value = item.get(table.ttl_attribute, {}).get("N")
    return value is not None and 0 < float(value) < now_s


def read_state(path: Path) -> dict[str, list[Item]]:
    """The items per table id (``"Jobs"``, ``"Runs"``...) saved in ``path``; empty when the file is absent.

    Raises ``StateFileError`` for a file that is not a readable jobsched state file.
    """
    if not path.exists():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise StateFileError(f"{path} is unreadable ({error}); move it away to start empty") from error
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise StateFileError(f"{path} is not a jobsched local state file; move it away to start empty")
    if document.get("version") != VERSION:
        raise StateFileError(f"{path} has version {document.get('version')}; this jobsched reads {VERSION}")
    tables = document.get("tables")
    if not isinstance(tables, dict):
        raise StateFileError(f"{path} has no tables")
    return {str(k): list(v) for k, v in tables.items()}


def write_state(path: Path, tables: dict[str, list[Item]], saved_at_ms: int) -> None:
    """Write the snapshot atomically: a temp file in the same folder, fsync, then rename over ``path``."""
    document = {"format": FORMAT, "version": VERSION, "saved_at_ms": saved_at_ms, "tables": tables}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(document, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    try:
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _prepare(table: TableDef, items: Iterable[Item], now_s: int) -> list[Item]:
    kept = [item for item in items if not _expired(table, item, now_s)]
    if table.id == CONTROL.id:  # no lease holder survives a restart: expire leases, keep their term
        for item in kept:
            if item.get("pk", {}).get("S", "").startswith("lease#"):
                item["expires_at"] = {"N": "0"}
    return kept


def restore(
    dynamodb: Any, table_names: dict[str, str], saved: dict[str, list[Item]], *, now_ms: int
) -> dict[str, list[Item]]:
    """Load saved items into the (empty) tables; ``table_names`` maps table id -> physical name.

    Returns the items restored per table id: expired items (TTL) are left out, leases marked expired.
    """
    restored: dict[str, list[Item]] = {}
    for table in TABLES:
        items = _prepare(table, saved.get(table.id, []), now_ms // 1000)
        name = table_names[table.id]
        for start in range(0, len(items), 25):
            request: dict[str, Any] = {name: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]}
            while request:
                request = dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
        restored[table.id] = items
    return restored


def scan_all(dynamodb: Any, table_name: str) -> list[Item]:
    """Every item of a table (low-level form), following pages."""
    items: list[Item] = []
    kwargs: dict[str, Any] = {"TableName": table_name}
    while True:
        page = dynamodb.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def streams_client(session: Any, region: str) -> Any:
    """A DynamoDB Streams client; account-id endpoints off (moto serves the regional endpoint only)."""
    return session.client(
        "dynamodbstreams", region_name=region, config=Config(account_id_endpoint_mode="disabled")
    )


@dataclass
class _Shard:
    table: TableDef
    iterator: str | None


class TableMirror:
    """An in-memory copy of the tables, kept current from their DynamoDB streams.

    ``enable_streams`` turns streams on (NEW_AND_OLD_IMAGES) and starts reading at LATEST, so call it after
    ``restore`` and ``load`` the restored items. ``poll()`` applies new records and reports them to the
    listeners; ``dirty`` tells whether anything changed since the last ``take_snapshot``.
    """

    def __init__(self, dynamodb: Any, streams: Any, table_names: dict[str, str]) -> None:
        self.dynamodb = dynamodb
        self.streams = streams
        self.table_names = table_names
        self.items: dict[str, dict[str, Item]] = {t.id: {} for t in TABLES}
        self.listeners: list[StreamListener] = []
        self._shards: list[_Shard] = []
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._dirty = False

    def enable_streams(self) -> None:
        """Turn on a stream for every table and open an iterator at its latest record."""
        for table in TABLES:
            name = self.table_names[table.id]
            described = self.dynamodb.describe_table(TableName=name)["Table"]
            arn = described.get("LatestStreamArn")
            if not described.get("StreamSpecification", {}).get("StreamEnabled"):
                arn = self.dynamodb.update_table(
                    TableName=name,
                    StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
                )["TableDescription"]["LatestStreamArn"]
            for shard in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
                iterator = self.streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
                )["ShardIterator"]
                self._shards.append(_Shard(table, iterator))

    def load(self, table_id: str, items: Iterable[Item]) -> None:
        """Seed the copy of one table (e.g. with the restored items)."""
        table = next(t for t in TABLES if t.id == table_id)
        with self._lock:
            for item in items:
                self.items[table_id][_key_of(table, item)] = item

    def poll(self) -> int:
        """Apply every new stream record; returns how many were applied (thread-safe)."""
        with self._poll_lock:
            return self._poll()

    def _poll(self) -> int:
        applied = 0
        for shard in self._shards:
            records: list[dict[str, Any]] = []
            while shard.iterator:
                page = self.streams.get_records(ShardIterator=shard.iterator, Limit=1000)
                shard.iterator = page.get("NextShardIterator")
                if not page.get("Records"):
                    break
                records.extend(page["Records"])
            if not records:
                continue
            self._apply(shard.table, records)
            applied += len(records)
            for listener in self.listeners:
                try:
                    listener(shard.table.id, records)
                except Exception:  # a printer must never stop durability
                    logger.exception("stream listener failed", table=shard.table.id)
        return applied

    def _apply(self, table: TableDef, records: list[dict[str, Any]]) -> None:
        with self._lock:
            copy = self.items[table.id]
            for record in records:
                change = record["dynamodb"]
                key = _key_of(table, change["Keys"])
                if record["eventName"] == "REMOVE":
                    copy.pop(key, None)
                elif "NewImage" in change:
                    copy[key] = change["NewImage"]
            self._dirty = True

    @property
    def dirty(self) -> bool:
        return self._dirty

    def take_snapshot(self) -> dict[str, list[Item]]:
        """The items per table id, and the dirty flag cleared (under the lock, so no change is lost)."""
        with self._lock:
            self._dirty = False
            return {table_id: list(items.values()) for table_id, items in self.items.items()}

    def expired(self, now_ms: int) -> list[tuple[str, Item]]:
        """``(physical table name, key)`` of items whose TTL passed: moto never expires items, so local mode
        deletes them itself, as DynamoDB's TTL would."""
        found: list[tuple[str, Item]] = []
        with self._lock:
            for table in TABLES:
                names = [table.partition.name] + ([table.sort.name] if table.sort else [])
                for item in self.items[table.id].values():
                    if _expired(table, item, now_ms // 1000):
                        found.append((self.table_names[table.id], {n: item[n] for n in names}))
        return found


class Snapshotter:
    """Writes the mirror to ``path`` every ``interval_s`` when it changed; ``final()`` saves a full scan."""

    def __init__(
        self, mirror: TableMirror, path: Path, *, interval_s: float = 2.0, clock: Clock = system_clock
    ) -> None:
        self.mirror = mirror
        self.path = path
        self.interval_s = interval_s
        self.clock = clock
        self.writes = 0
        self._lock = threading.Lock()

    def save_if_changed(self) -> bool:
        """Poll the streams, then write the snapshot if anything changed. Returns True when it wrote."""
        with self._lock:
            self.mirror.poll()
            if not self.mirror.dirty:
                return False
            write_state(self.path, self.mirror.take_snapshot(), self.clock())
            self.writes += 1
            return True

    def final(self) -> None:
        """The snapshot at a graceful stop: every table scanned, written atomically."""
        with self._lock:
            self.mirror.poll()
            tables = {t.id: scan_all(self.mirror.dynamodb, self.mirror.table_names[t.id]) for t in TABLES}
            write_state(self.path, tables, self.clock())
            self.writes += 1

    def reap_expired(self, now_ms: int) -> int:
        """Delete items whose TTL passed (DynamoDB TTL, which moto lacks). Returns how many."""
        expired = self.mirror.expired(now_ms)
        for table_name, key in expired:
            self.mirror.dynamodb.delete_item(TableName=table_name, Key=key)
        return len(expired)

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set: save when changed every ``interval_s``; reap expired items each minute."""
        last_reap = 0.0
        while not stop.wait(self.interval_s):
            try:
                now = self.clock()
                if now - last_reap >= 60_000:
                    last_reap = now
                    self.reap_expired(now)
                self.save_if_changed()
            except Exception:
                logger.exception("local snapshot failed; retrying", path=str(self.path))
