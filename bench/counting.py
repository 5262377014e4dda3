"""Counting AWS requests and DynamoDB capacity units with botocore event hooks.

Every client a component uses is built by an ``Aws`` from :func:`counting_aws` (a ``jobsched.aws.Aws`` whose
``event_hooks``, its public hook argument, are this module's), tagged with the *path* it belongs to
(``scheduler``, ``worker``, ``event_source``). The hooks:

- ``before-call.*.*`` counts one request per API call (a batch call counts once; botocore retries would be
  below this event, and moto never throttles), keyed ``(path, service, operation)``;
- for DynamoDB writes, when capacity accounting is on, reads each written item *before* the call and *after*
  it with a separate, uncounted client (consistent ``GetItem``), and prices the write with the size rules of
  ``bench.capacity`` (table + every global secondary index of ``jobsched.resources``); reads are priced from
  the items in the response. This is the method, since moto does not report consumed capacity faithfully.
- ``after-call.*.*`` hands each finished call to the observers (the rush records when each run message was
  sent) and marks ``ReceiveMessage`` calls that returned nothing (Lambda's idle polling: a fixed cost, not a
  per-run one).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3

from bench.capacity import IndexShape, Item, item_size, item_write_cost, read_units
from jobsched.aws.clients import Aws, EventHook
from jobsched.resources import TableDef

Observer = Callable[[str, str, dict[str, Any], dict[str, Any]], None]
"""``observer(path, operation, request body, response body)`` after each call (bodies as parsed JSON)."""

_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
_READS = ("GetItem", "Query", "Scan", "BatchGetItem")


def index_shapes(table: TableDef) -> tuple[IndexShape, ...]:
    """The cost-rule view of a table's global secondary indexes."""
    table_keys = (table.partition.name, *((table.sort.name,) if table.sort else ()))
    return tuple(
        IndexShape(
            name=index.name,
            keys=(index.partition.name, *((index.sort.name,) if index.sort else ())),
            table_keys=table_keys,
            projection=index.projection,
            non_key=index.non_key,
        )
        for index in table.indexes
    )


@dataclass(frozen=True)
class _Write:
    table: str
    key: dict[str, Any]
    transactional: bool


def _decode(body: Any) -> dict[str, Any]:
    """A JSON-protocol request or response body as a dict ({} when empty or not JSON)."""
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body.startswith("{"):
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class RequestLog:
    """Thread-safe tallies of requests and capacity units by path.

    ``tables`` maps table names to their ``jobsched.resources`` definitions (key attributes and indexes, for
    the capacity rules); ``probe`` is an uncounted low-level DynamoDB client used to read items before and
    after writes. Without ``probe`` only requests are counted. Set ``enabled`` False to ignore calls (e.g.
    during set-up or warm-up).
    """

    def __init__(self, tables: Mapping[str, TableDef] | None = None, probe: Any = None) -> None:
        self.tables = dict(tables or {})
        self.probe = probe
        self.enabled = True
        self.observers: list[Observer] = []
        self.requests: Counter[tuple[str, str, str]] = Counter()
        self.write_units: Counter[tuple[str, str, str]] = Counter()
        self.read_units: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.seconds: Counter[tuple[str, str, str]] = Counter()
        self.foreign_cpu_s: defaultdict[str, float] = defaultdict(float)
        self._lock = threading.Lock()
        self._local = threading.local()

    # --- wiring ---------------------------------------------------------------------------------

    def hooks(self, path: str) -> tuple[EventHook, ...]:
        """The botocore event hooks counting every call of a client under ``path`` (``Aws(event_hooks=...)``)."""
        return (
            ("before-call.*.*", self._charged(path, self._before(path))),
            ("before-send.*.*", self._sending(path)),
            ("response-received.*.*", self._received(path)),
            ("after-call.*.*", self._charged(path, self._after(path))),
        )

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.write_units.clear()
            self.read_units.clear()
            self.seconds.clear()
            self.foreign_cpu_s.clear()

    # --- reading the tallies --------------------------------------------------------------------

    def request_count(self, path: str, *, include_empty_receives: bool = False) -> int:
        """Requests of ``path`` (empty ``ReceiveMessage`` polls left out unless asked for)."""
        return sum(
            n
            for (p, _, op), n in self.requests.items()
            if p == path and (include_empty_receives or op != "ReceiveMessage(empty)")
        )

    def operations(self, path: str) -> dict[str, int]:
        """``{"dynamodb.PutItem": n, ...}`` of ``path``."""
        return {f"{svc}.{op}": n for (p, svc, op), n in sorted(self.requests.items()) if p == path}

    def timings_ms(self, path: str) -> dict[str, float]:
        """Mean wall milliseconds per call of each operation of ``path`` (from before-call to after-call:
        includes waiting for the GIL when threads compete)."""
        return {
            f"{svc}.{op}": self.seconds[(p, svc, op)] * 1000 / n
            for (p, svc, op), n in sorted(self.requests.items())
            if p == path and n and (p, svc, op) in self.seconds
        }

    def wcu(self, path: str) -> float:
        return float(sum(n for (p, _, _), n in self.write_units.items() if p == path))

    def wcu_detail(self, path: str) -> dict[str, int]:
        """``{"<table>": units, "<table>/<index>": units}`` of ``path``."""
        out: dict[str, int] = {}
        for (p, table, part), n in sorted(self.write_units.items()):
            if p == path:
                name = table if part == "table" else f"{table}/{part}"
                out[name] = out.get(name, 0) + n
        return out

    def rcu(self, path: str) -> float:
        return float(sum(n for (p, _), n in self.read_units.items() if p == path))

    def foreign_cpu_seconds(self, path: str) -> float:
        """CPU seconds ``path``'s callers spent on what costs them nothing on AWS: the in-process moto answering
        their requests (from the moment a request is sent to its response) and this log's own accounting (its
        hooks, the capacity probe's reads), each on the calling thread's CPU clock. A caller's process CPU time
        minus this is its own work."""
        return float(self.foreign_cpu_s[path])

    # --- hooks ----------------------------------------------------------------------------------

    def _sending(self, path: str) -> Callable[..., None]:
        def sending(**kwargs: Any) -> None:
            self._local.sent_at = time.thread_time() if self.enabled else None

        return sending

    def _received(self, path: str) -> Callable[..., None]:
        def received(**kwargs: Any) -> None:
            sent_at = getattr(self._local, "sent_at", None)
            if sent_at is not None and self.enabled:
                self._foreign(path, time.thread_time() - sent_at)
            self._local.sent_at = None

        return received

    def _foreign(self, path: str, cpu_s: float) -> None:
        with self._lock:
            self.foreign_cpu_s[path] += cpu_s

    def _charged(self, path: str, hook: Callable[..., None]) -> Callable[..., None]:
        """``hook``, its CPU time (on the calling thread's clock) charged to ``path``'s foreign CPU: the log's own
        accounting is no caller's work."""

        def charged(**kwargs: Any) -> None:
            started = time.thread_time()
            try:
                hook(**kwargs)
            finally:
                if self.enabled:
                    self._foreign(path, time.thread_time() - started)

        return charged

    def _before(self, path: str) -> Callable[..., None]:
        def before(event_name: str, params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
            if not self.enabled and not self.observers:
                return
            _, service, operation = event_name.split(".", 2)
            request = _decode(params.get("body"))
            context["bench.request"] = request
            context["bench.observed"] = True
            if not self.enabled:
                return
            context["bench.counted"] = True
            context["bench.started"] = time.perf_counter()
            with self._lock:
                self.requests[(path, service, operation)] += 1
            if service == "dynamodb" and self.probe is not None and operation in _WRITES:
                writes = self._writes(operation, request)
                context["bench.writes"] = [(w, self._read_item(w)) for w in writes]

        return before

    def _after(self, path: str) -> Callable[..., None]:
        def after(event_name: str, http_response: Any, context: dict[str, Any], **kwargs: Any) -> None:
            if not context.get("bench.observed"):
                return
            _, service, operation = event_name.split(".", 2)
            request = context.get("bench.request", {})
            response = _decode(getattr(http_response, "content", b""))
            ok = getattr(http_response, "status_code", 500) < 300
            # Observers see every call, counted or not (a call racing the moment counting starts included).
            for observer in self.observers:
                observer(path, operation, request, response)
            if not context.get("bench.counted"):
                return
            with self._lock:
                self.seconds[(path, service, operation)] += time.perf_counter() - context["bench.started"]
            if service == "sqs" and operation == "ReceiveMessage" and ok and not response.get("Messages"):
                with self._lock:
                    self.requests[(path, service, operation)] -= 1
                    self.requests[(path, service, "ReceiveMessage(empty)")] += 1
            if service == "dynamodb" and self.probe is not None:
                if operation in _WRITES:
                    self._price_writes(path, context.get("bench.writes", []), ok)
                elif operation in _READS and ok:
                    self._price_reads(path, operation, request, response)

        return after

    # --- capacity -------------------------------------------------------------------------------

    def _table(self, name: str) -> TableDef | None:
        return self.tables.get(name)

    def _key_of(self, table_name: str, item: Mapping[str, Any]) -> dict[str, Any] | None:
        table = self._table(table_name)
        if table is None:
            return None
        names = [table.partition.name, *([table.sort.name] if table.sort else [])]
        if any(n not in item for n in names):
            return None
        return {n: item[n] for n in names}

    def _writes(self, operation: str, request: dict[str, Any]) -> list[_Write]:
        """The items a write request touches: ``(table, key, transactional)``."""
        writes: list[_Write] = []

        def add(table: str | None, key: dict[str, Any] | None, transactional: bool) -> None:
            if table and key:
                writes.append(_Write(table, key, transactional))

        def add_one(kind: str, body: dict[str, Any], transactional: bool) -> None:
            """A Put (keyed by its item), Update or Delete (by its Key) of ``body["TableName"]``."""
            table = body.get("TableName")
            if kind == "Put":
                add(table, self._key_of(table or "", body.get("Item", {})), transactional)
            elif kind in ("Update", "Delete"):
                add(table, body.get("Key"), transactional)

        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            add_one(operation.removesuffix("Item"), request, False)
        elif operation == "TransactWriteItems":
            for entry in request.get("TransactItems", []):
                for kind, body in entry.items():
                    add_one(kind, body, True)
        elif operation == "BatchWriteItem":
            for table, entries in request.get("RequestItems", {}).items():
                for entry in entries:
                    if "PutRequest" in entry:
                        add(table, self._key_of(table, entry["PutRequest"].get("Item", {})), False)
                    elif "DeleteRequest" in entry:
                        add(table, entry["DeleteRequest"].get("Key"), False)
        return writes

    def probe_seconds(self) -> float:
        """Seconds this thread has spent in the probe's reads (to subtract them from timings)."""
        return float(getattr(self._local, "probe_s", 0.0))

    def _read_item(self, write: _Write) -> Item | None:
        started = time.perf_counter()
        item: Item | None = self.probe.get_item(
            TableName=write.table, Key=write.key, ConsistentRead=True
        ).get("Item")
        self._local.probe_s = self.probe_seconds() + time.perf_counter() - started
        return item

    def _price_writes(self, path: str, writes: list[tuple[_Write, Item | None]], ok: bool) -> None:
        for write, before in writes:
            table = self._table(write.table)
            after = self._read_item(write) if ok else None
            cost = item_write_cost(
                before,
                after,
                indexes=index_shapes(table) if table else (),
                succeeded=ok,
                transactional=write.transactional,
            )
            table_id = table.id if table else write.table
            with self._lock:
                self.write_units[(path, table_id, "table")] += cost.table
                for index, units in cost.indexes.items():
                    if units:
                        self.write_units[(path, table_id, index)] += units

    def _price_reads(
        self, path: str, operation: str, request: dict[str, Any], response: dict[str, Any]
    ) -> None:
        units: dict[str, float] = {}
        if operation == "GetItem":
            size = item_size(response.get("Item"))
            units[request.get("TableName", "")] = read_units(
                size, consistent=bool(request.get("ConsistentRead"))
            )
        elif operation in ("Query", "Scan"):
            items = response.get("Items", [])
            size = sum(item_size(i) for i in items)
            scanned, count = response.get("ScannedCount", len(items)), response.get("Count", len(items))
            if count and scanned > count:  # a filter dropped items it had read: scale by the average size
                size = size * scanned // count
            units[request.get("TableName", "")] = read_units(
                size, consistent=bool(request.get("ConsistentRead"))
            )
        elif operation == "BatchGetItem":
            for table, items in response.get("Responses", {}).items():
                consistent = bool(request.get("RequestItems", {}).get(table, {}).get("ConsistentRead"))
                units[table] = units.get(table, 0.0) + sum(
                    read_units(item_size(i), consistent=consistent) for i in items
                )
        with self._lock:
            for table_name, value in units.items():
                table = self._table(table_name)
                self.read_units[(path, table.id if table else table_name)] += value


def counting_aws(log: RequestLog, path: str) -> Aws:
    """A ``jobsched.aws.Aws`` (default region and bounds) whose every client reports its calls to ``log``
    under ``path``. Pass it wherever the components' wiring takes an ``Aws`` (``jobsched.runtime.wiring.Components``)."""
    return Aws(event_hooks=log.hooks(path))


def probe_client(region: str = "us-east-1", endpoint_url: str | None = None) -> Any:
    """An uncounted low-level DynamoDB client for reading items around writes."""
    return boto3.session.Session().client("dynamodb", region_name=region, endpoint_url=endpoint_url)
