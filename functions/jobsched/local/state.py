"""Durability of local mode: the DynamoDB tables in a JSON snapshot file, kept current from a write journal.

moto keeps everything in memory, so local mode saves the four tables (jobs, runs, control, idempotency)
to ``<data dir>/state.json``:

- On start, :func:`restore` loads the file into the fresh moto tables (items whose TTL passed are dropped,
  as DynamoDB's TTL would have; scheduler leases are marked expired, since no holder survives a restart,
  keeping their fencing ``term``).
- While running, :class:`WriteJournal` records the after-image of every item each successful DynamoDB write
  touched (it sits in the DynamoDB request path, see ``embedded_aws``); :class:`TableMirror` applies those
  changes to an in-memory copy of the tables (O(changes), never a scan), and :class:`Snapshotter` appends
  them to a change log ``state.<generation>.changes`` (JSON lines, fsync) every ``interval_s`` (2 s). When
  the log outgrows the snapshot, the copy is written as the next generation of ``state.json`` (temp file,
  fsync, rename) and the old log deleted: saving costs O(changes), however long the history.
- At a graceful stop the final snapshot is taken from a full scan (the source of truth).

A SIGKILL therefore loses at most the writes of the last ``interval_s`` (plus the journal's drain period);
a log line cut short by the kill is ignored at the next start. The files hold the DynamoDB JSON of each item
(``{"S": ...}``, ``{"N": ...}``), so types round-trip exactly.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from jobsched.clock import Clock, system_clock
from jobsched.local.paths import open_private
from jobsched.observability import logger
from jobsched.resources import CONTROL, IDEMPOTENCY, TABLES, TableDef

FORMAT = "jobsched-local-state"
VERSION = 1
STATE_FILE = "state.json"

Item = dict[str, Any]
"""A DynamoDB item in the low-level (typed) JSON form: ``{"pk": {"S": "job#j_1"}, ...}``."""


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


def changes_path(path: Path, generation: int) -> Path:
    """The change log that goes with generation ``generation`` of the state file ``path``."""
    return path.with_name(f"{path.stem}.{generation}.changes")


def _read_base(path: Path) -> tuple[int, dict[str, list[Item]]]:
    if not path.exists():
        return 0, {}
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
    return int(document.get("generation", 0)), {str(k): list(v) for k, v in tables.items()}


def _replay(log: Path, tables: dict[str, list[Item]]) -> dict[str, list[Item]]:
    """Apply a change log (JSON lines ``{"t": table id, "k": key, "n": image or null}``) to ``tables``.

    A last line cut short (the write a SIGKILL interrupted) is ignored; a bad line before it is an error.
    """
    if not log.exists():
        return tables
    by_key: dict[str, dict[str, Item]] = {}
    for table in TABLES:
        by_key[table.id] = {_key_of(table, item): item for item in tables.get(table.id, [])}
    lines = log.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        try:
            change = json.loads(line)
            copy = by_key[change["t"]]
            if change["n"] is None:
                copy.pop(change["k"], None)
            else:
                copy[change["k"]] = change["n"]
        except (ValueError, KeyError, TypeError) as error:
            if number == len(lines):  # the torn last write
                break
            raise StateFileError(
                f"{log} line {number} is damaged ({error}); move it away to lose it"
            ) from error
    return {table_id: list(items.values()) for table_id, items in by_key.items()}


def read_state(path: Path) -> dict[str, list[Item]]:
    """The items per table id (``"Jobs"``, ``"Runs"``...) saved in ``path`` and its change log; empty when
    neither exists.

    Raises ``StateFileError`` for a file that is not a readable jobsched state file.
    """
    generation, tables = _read_base(path)
    return _replay(changes_path(path, generation), tables)


def state_generation(path: Path) -> int:
    """The generation of the state file (0 when absent)."""
    return _read_base(path)[0]


def write_state(path: Path, tables: dict[str, list[Item]], saved_at_ms: int, *, generation: int = 0) -> None:
    """Write the snapshot atomically: a temp file in the same folder, fsync, then rename over ``path``."""
    document = {
        "format": FORMAT,
        "version": VERSION,
        "generation": generation,
        "saved_at_ms": saved_at_ms,
        "tables": tables,
    }
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
    _fsync_folder(path.parent)


def append_changes(log: Path, changes: list[Change]) -> int:
    """Append changes to a change log (one JSON line each) and fsync. Returns the log's size in bytes."""
    text = "".join(
        json.dumps({"t": c.table_id, "k": c.key, "n": c.new}, separators=(",", ":")) + "\n" for c in changes
    )
    fd = open_private(log, os.O_WRONLY | os.O_APPEND)
    with os.fdopen(fd, "a", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
        return out.tell()


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _prepare(table: TableDef, items: Iterable[Item], now_s: int) -> list[Item]:
    kept = [item for item in items if not _expired(table, item, now_s)]
    if table.id == IDEMPOTENCY.id:  # no request survives a restart: a key left in progress is free again
        kept = [item for item in kept if item.get("status", {}).get("S") != "INPROGRESS"]
    if table.id == CONTROL.id:  # no lease holder survives a restart: expire leases, keep their term
        for item in kept:
            if item.get("pk", {}).get("S", "").startswith("lease#"):
                item["expires_at"] = {"N": "0"}
    return kept


def restore(
    dynamodb: Any, table_names: dict[str, str], saved: dict[str, list[Item]], *, now_ms: int
) -> dict[str, list[Item]]:
    """Load saved items into the (empty) tables; ``table_names`` maps table id -> physical name.

    Returns the items restored per table id: expired items (TTL) are left out, leases marked expired, and
    ``Idempotency-Key`` records left in progress (by a request cut by a kill, or whose completion came after the
    last save) left out, so a repeat runs again instead of answering 409 until the record expires.
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


WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


@dataclass(frozen=True)
class Change:
    """One item after a write: ``new`` is its whole image (low-level form), None when it no longer exists;
    ``old`` is the image the mirror held before (None for a new item)."""

    table_id: str
    key: str
    new: Item | None
    old: Item | None = None


def _touched(operation: str, body: dict[str, Any]) -> list[tuple[str, Item]]:
    """``(table name, item or key)`` of every item a write request names (conditions checks excluded)."""
    if operation in ("PutItem",):
        return [(body["TableName"], body["Item"])]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(body["TableName"], body["Key"])]
    if operation == "BatchWriteItem":
        return [
            (name, request.get("PutRequest", {}).get("Item") or request["DeleteRequest"]["Key"])
            for name, requests in body["RequestItems"].items()
            for request in requests
        ]
    if operation == "TransactWriteItems":
        touched = []
        for entry in body["TransactItems"]:
            for kind, part in entry.items():
                if kind in ("Put", "Update", "Delete"):
                    touched.append((part["TableName"], part.get("Item") or part["Key"]))
        return touched
    return []


class WriteJournal:
    """Local mode's change stream: the after-image of every item each successful DynamoDB write touched, in
    write order. ``record`` runs inside the DynamoDB lock (``embedded_aws.SerializedDynamoDB.observer``)
    right after the write, reading the touched items with one consistent ``BatchGetItem`` per 100 keys, so
    no intermediate state is missed; ``drain`` hands the changes over. Memory is bounded by the changes
    not yet drained (the change pump drains twice a second).

    ``client`` is a boto3 DynamoDB client used only by the journal; ``table_names`` maps table id -> name.
    A write the journal cannot read back sets ``lost``: the mirror then resynchronizes from a full scan.
    """

    def __init__(self, client: Any, table_names: dict[str, str]) -> None:
        self.client = client
        self._tables = {table_names[t.id]: t for t in TABLES if t.id in table_names}
        self._changes: deque[Change] = deque()
        self._lock = threading.Lock()
        self.lost = False

    def record(self, operation: str, body: bytes) -> None:
        """Journal the items written by one successful request (other operations are ignored)."""
        if operation not in WRITE_OPERATIONS:
            return
        try:
            keys: dict[tuple[str, str], Item] = {}
            for name, item in _touched(operation, json.loads(body)):
                table = self._tables.get(name)
                if table is not None:
                    key_item = _key_item(table, item)
                    keys[(name, _key_of(table, key_item))] = key_item
            images = self._read(keys)
        except Exception:
            logger.exception(
                "write journal could not read a write back; resynchronizing", operation=operation
            )
            self.lost = True
            return
        with self._lock:
            for name, key_text in keys:
                self._changes.append(Change(self._tables[name].id, key_text, images.get((name, key_text))))

    def _read(self, keys: dict[tuple[str, str], Item]) -> dict[tuple[str, str], Item]:
        found: dict[tuple[str, str], Item] = {}
        pending = list(keys.items())
        for start in range(0, len(pending), 100):
            request: dict[str, Any] = {}
            for (name, _), key in pending[start : start + 100]:
                request.setdefault(name, {"Keys": [], "ConsistentRead": True})["Keys"].append(key)
            while request:
                response = self.client.batch_get_item(RequestItems=request)
                for name, items in response.get("Responses", {}).items():
                    for item in items:
                        found[(name, _key_of(self._tables[name], item))] = item
                request = response.get("UnprocessedKeys") or {}
        return found

    def drain(self) -> list[Change]:
        """The changes recorded since the last drain, oldest first."""
        with self._lock:
            changes = list(self._changes)
            self._changes.clear()
        return changes


def _key_item(table: TableDef, item: Item) -> Item:
    names = [table.partition.name] + ([table.sort.name] if table.sort else [])
    return {n: item[n] for n in names}


ChangeListener = Callable[[list[Change]], None]
"""Called with each batch of applied changes (``old`` filled in), oldest first."""


class TableMirror:
    """An in-memory copy of the tables, kept current from the ``WriteJournal``.

    ``load`` the restored items first; ``poll()`` applies the journal's changes and reports them to the
    listeners; ``dirty`` tells whether anything changed since the last ``take_snapshot``. When the journal
    lost a write, ``poll`` reloads every table from a full scan (and reports nothing for that batch).
    """

    def __init__(self, journal: WriteJournal, dynamodb: Any, table_names: dict[str, str]) -> None:
        self.journal = journal
        self.dynamodb = dynamodb
        self.table_names = table_names
        self.items: dict[str, dict[str, Item]] = {t.id: {} for t in TABLES}
        self.listeners: list[ChangeListener] = []
        self.needs_base = False
        self._pending: list[Change] = []
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()

    def load(self, table_id: str, items: Iterable[Item]) -> None:
        """Seed the copy of one table (e.g. with the restored items)."""
        table = next(t for t in TABLES if t.id == table_id)
        with self._lock:
            for item in items:
                self.items[table_id][_key_of(table, item)] = item

    def poll(self) -> int:
        """Apply the journal's changes; returns how many (thread-safe)."""
        with self._poll_lock:
            if self.journal.lost:
                self.journal.lost = False
                self.journal.drain()
                self._resync()
                return 0
            changes = self.journal.drain()
            if not changes:
                return 0
            applied = self._apply(changes)
        for listener in self.listeners:
            try:
                listener(applied)
            except Exception:  # a printer must never stop durability
                logger.exception("change listener failed")
        return len(applied)

    def _apply(self, changes: list[Change]) -> list[Change]:
        applied: list[Change] = []
        with self._lock:
            for change in changes:
                copy = self.items[change.table_id]
                old = copy.get(change.key)
                if change.new is None:
                    copy.pop(change.key, None)
                else:
                    copy[change.key] = change.new
                applied.append(Change(change.table_id, change.key, change.new, old))
            self._pending.extend(applied)
        return applied

    def _resync(self) -> None:
        scanned = {t.id: scan_all(self.dynamodb, self.table_names[t.id]) for t in TABLES}
        with self._lock:
            for table in TABLES:
                self.items[table.id] = {_key_of(table, item): item for item in scanned[table.id]}
            self._pending.clear()
            self.needs_base = True

    @property
    def dirty(self) -> bool:
        """Changes not yet saved (or a full snapshot due)."""
        return bool(self._pending) or self.needs_base

    def take_changes(self) -> list[Change]:
        """The changes applied since the last ``take_changes``/``take_snapshot``, oldest first."""
        with self._lock:
            changes, self._pending = self._pending, []
            return changes

    def take_snapshot(self) -> dict[str, list[Item]]:
        """The items per table id; pending changes are cleared with it (under the lock: none is lost)."""
        with self._lock:
            self._pending = []
            self.needs_base = False
            return {table_id: list(items.values()) for table_id, items in self.items.items()}

    def expired(self, now_ms: int) -> list[tuple[str, Item]]:
        """``(physical table name, key)`` of items whose TTL passed: moto never expires items, so local mode
        deletes them itself, as DynamoDB's TTL would."""
        found: list[tuple[str, Item]] = []
        with self._lock:
            for table in TABLES:
                for item in self.items[table.id].values():
                    if _expired(table, item, now_ms // 1000):
                        found.append((self.table_names[table.id], _key_item(table, item)))
        return found


@dataclass(eq=False)
class Snapshotter:
    """Saves the mirror: changes are appended to the generation's change log every ``interval_s`` (fsync);
    when the log outgrows the snapshot (at least ``compact_bytes``), or after a resynchronization, a new
    snapshot generation is written and the old log deleted. Each save costs O(changes), not O(history).
    ``final()`` writes a snapshot from a full scan.
    """

    mirror: TableMirror
    path: Path
    _: KW_ONLY
    interval_s: float = 2.0
    clock: Clock = system_clock
    compact_bytes: int = 1024 * 1024
    generation: int = field(init=False)
    writes: int = field(default=0, init=False)
    compactions: int = field(default=0, init=False)
    _base_bytes: int = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.generation = state_generation(self.path)
        self._base_bytes = self.path.stat().st_size if self.path.exists() else 0

    def save_if_changed(self) -> bool:
        """Apply the journal, then save what changed. Returns True when it wrote."""
        with self._lock:
            self.mirror.poll()
            if self.mirror.needs_base:
                self._compact(self.mirror.take_snapshot())
                return True
            changes = self.mirror.take_changes()
            if not changes:
                return False
            size = append_changes(changes_path(self.path, self.generation), changes)
            self.writes += 1
            if size >= max(self.compact_bytes, self._base_bytes):
                self._compact(self.mirror.take_snapshot())
            return True

    def _compact(self, tables: dict[str, list[Item]]) -> None:
        """Write generation + 1 (everything so far), then drop the old change log."""
        old_log = changes_path(self.path, self.generation)
        write_state(self.path, tables, self.clock(), generation=self.generation + 1)
        self.generation += 1
        self._base_bytes = self.path.stat().st_size
        old_log.unlink(missing_ok=True)
        self.writes += 1
        self.compactions += 1

    def final(self) -> None:
        """The snapshot at a graceful stop: every table scanned, written as a new generation."""
        with self._lock:
            self.mirror.poll()
            self.mirror.take_snapshot()
            self._compact(
                {t.id: scan_all(self.mirror.dynamodb, self.mirror.table_names[t.id]) for t in TABLES}
            )

    def remove_stale_logs(self) -> None:
        """Delete change logs of other generations (left by a stop between a compaction and its cleanup)."""
        for log in self.path.parent.glob(f"{self.path.stem}.*.changes"):
            if log != changes_path(self.path, self.generation):
                log.unlink(missing_ok=True)

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
