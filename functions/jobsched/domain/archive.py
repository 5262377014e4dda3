"""The run archive's rules (design §11): which row a run becomes, where it is kept and
how a batch of rows is written, pure (no S3, no DynamoDB).

- **Row** (:func:`archive_row`): a run row without its bookkeeping (sweep, lease and notification fields, TTL),
  as one flat JSON object: the key ``job_id`` + ``scheduled_for``, the outcome, the epoch-ms
  instants and the tries. ``ARCHIVE_COLUMNS`` names every column with its Athena type (the Glue table and the
  local reader are built from it).
- **Layout** (:func:`partition_prefix`): ``runs/owner=<owner>/month=<YYYY-MM>/``, the owner percent-encoded
  (``owner_partition``) and the UTC month of ``scheduled_for``; so "one job's runs in one month" reads one owner's
  month, "an owner's dead runs last quarter" three, and an owner's query never reads another owner's objects. A
  month, not a day: a stream batch then writes one object per owner instead of one per owner and day (fewer,
  larger objects: design §11 has the numbers).
- **Objects** (:func:`archive_objects`): the rows of one batch, grouped by partition, each group one gzip JSON
  Lines object sorted by time, named by a digest of its rows' keys and byte for byte deterministic (gzip
  ``mtime`` 0): a retried batch writes the same objects at the same names. A batch split by a retry (the stream's
  bisection) can put a row in two objects: readers keep one row per ``(job_id, scheduled_for)``
  (:data:`DEDUPE_KEY`, ``docs/deploy.md``'s queries).
- **Audit events** (:func:`audit_objects`): a job's audit event (``ports.jobs.AuditEvent``) that TTL deletes from
  the jobs table becomes one row of ``AUDIT_COLUMNS`` (:func:`audit_row`) under ``audit/month=<YYYY-MM>/`` (the UTC
  month of ``at``; an event names no owner, so there is no owner partition: the audit archive is for operators),
  written the same way as runs: one object per month a batch touches, named by a digest of its events' keys
  (:data:`AUDIT_DEDUPE_KEY`).
- **Quarantine** (:func:`quarantine_object`): the stream records of a batch whose image is no run row, kept whole
  in one object under ``quarantine/`` (outside ``runs/``: no table reads it), named by a digest of its bytes, so
  such a record is neither lost nor able to fail its batch.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from jobsched.archived_rows import TRY_FIELDS
from jobsched.models import RunStatus
from jobsched.ports.archive import ArchiveObject, ArchiveObjects, ArchiveSpill, ArchiveUnavailable
from jobsched.ports.jobs import AuditEvent
from jobsched.ports.runs import RunRow

_Item = TypeVar("_Item")

RUNS_PREFIX = "runs/"
"""Key prefix of the run archive in its bucket (or under local mode's archive directory)."""
AUDIT_PREFIX = "audit/"
"""Key prefix of the audit archive (:func:`audit_objects`), beside ``runs/``."""
QUARANTINE_PREFIX = "quarantine/"
"""Key prefix of the stream records kept whole because their image is no run row (:func:`quarantine_object`)."""
NO_OWNER = "_none"
"""The owner partition of a row that names no owner (rows written before owners were recorded)."""
OBJECT_SUFFIX = ".json.gz"
DEDUPE_KEY = ("job_id", "scheduled_for")
"""A run's identity: a reader keeps one archived row per pair."""

ARCHIVE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("job_id", "string"),
    ("scheduled_for", "bigint"),
    ("status", "string"),
    ("kind", "string"),
    ("attempt", "int"),
    ("enqueued_at", "bigint"),
    ("dispatch_at", "bigint"),
    ("started_at", "bigint"),
    ("finished_at", "bigint"),
    ("lateness_ms", "bigint"),
    ("worker", "string"),
    ("error", "string"),
    ("skipped_count", "int"),
    ("skipped_through", "bigint"),
    ("reruns", "int"),
    (
        "tries",
        "array<struct<attempt:int,started_at:bigint,finished_at:bigint,worker:string,error:string,"
        "output:string,round:int>>",
    ),
    ("cancelled_by", "string"),
    ("cancel_reason", "string"),
    ("cancelled_from", "string"),
    ("upstream_run_id", "string"),
)
"""Every column of an archived run, in order, with its Athena (Hive DDL) type; instants are epoch ms (UTC). No
``run_id``: it is ``<job_id>@<scheduled_for>`` (``ports.runs.run_id``), and storing it costs a tenth of the bytes.
The columns after ``tries`` (who cancelled a run, why and from which status; a chained run's upstream run) are
absent from objects written before them: readers see NULL."""
AUDIT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("job_id", "string"),
    ("at", "bigint"),
    ("key", "string"),
    ("kind", "string"),
    ("actor", "string"),
    ("detail", "string"),
)
"""Every column of an archived audit event, in order, with its Athena type: ``at`` epoch ms (UTC), ``kind`` a
``JobEventKind`` value, ``detail`` the event's JSON facts as one JSON text (``json_extract`` reads it)."""
AUDIT_DEDUPE_KEY = ("job_id", "at", "key")
"""An audit event's identity (``ports.jobs.AuditEvent``: ``key`` tells apart one job's events of one millisecond): a
reader keeps one archived row per triple."""
AUDIT_PARTITION_COLUMNS: tuple[tuple[str, str], ...] = (("month", "string"),)
"""The partition column of the audit layout: ``month`` (``YYYY-MM``, UTC, of ``at``)."""
PARTITION_COLUMNS: tuple[tuple[str, str], ...] = (("owner", "string"), ("month", "string"))
"""The partition columns of the layout: ``owner`` (percent-encoded, :func:`owner_partition`) and ``month``
(``YYYY-MM``, UTC)."""


def owner_partition(owner: str | None) -> str:
    """The ``owner`` partition value of ``owner``: percent-encoded (letters, digits and ``-_.~`` stay as they
    are, so ``team-a`` is ``team-a``; ``/`` and ``:`` of an ARN are escaped); ``NO_OWNER`` when None or empty. An
    owner spelled ``NO_OWNER`` has its ``_`` escaped too (``%5Fnone``): no owner reads the rows that name none."""
    if not owner:
        return NO_OWNER
    encoded = quote(owner, safe="")
    return "%5F" + encoded[1:] if encoded == NO_OWNER else encoded


def owner_of_partition(value: str) -> str | None:
    """The owner an ``owner`` partition value names (the inverse of :func:`owner_partition`)."""
    return None if value == NO_OWNER else unquote(value)


def month_of(epoch_ms: int) -> str:
    """The UTC month (``YYYY-MM``) of ``epoch_ms``: the ``month`` partition of a run scheduled then."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m")


def partition_prefix(owner: str | None, month: str) -> str:
    """``runs/owner=<owner_partition(owner)>/month=<month>/``: where the runs of ``owner`` scheduled in ``month``
    (``YYYY-MM``) are."""
    return f"{RUNS_PREFIX}owner={owner_partition(owner)}/month={month}/"


def archive_row(row: RunRow) -> dict[str, Any]:
    """The archived form of ``row``: the ``ARCHIVE_COLUMNS`` that are set (None left out), ``tries`` as a list of
    objects with every try field (``round`` 0 included)."""
    values: dict[str, Any] = {
        "job_id": row.job_id,
        "scheduled_for": row.scheduled_for,
        "status": row.status.value,
        "kind": row.kind.value,
    }
    for name, _ in ARCHIVE_COLUMNS:
        if name in values or name == "tries":
            continue
        value = getattr(row, name)
        if value is not None:
            values[name] = value.value if isinstance(value, RunStatus) else value
    if row.tries:
        values["tries"] = [
            {field: getattr(record, field) for field in TRY_FIELDS if getattr(record, field) is not None}
            for record in row.tries
        ]
    return values


def encode_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """``rows`` as gzip JSON Lines: one compact JSON object a line, keys sorted, gzip level 9 with ``mtime`` 0
    (the same rows give the same bytes)."""
    text = "".join(json.dumps(row, separators=(",", ":"), sort_keys=True) + "\n" for row in rows)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def decode_rows(body: bytes) -> list[dict[str, Any]]:
    """The rows of an object written by :func:`encode_rows`. Raises ``OSError``/``ValueError`` when malformed."""
    return [json.loads(line) for line in gzip.decompress(body).decode().splitlines() if line]


def object_key(prefix: str, keys: Iterable[tuple[str | int, ...]]) -> str:
    """``<prefix><digest>.json.gz``: the digest (sha256, 32 hex digits) of the sorted identities ``keys`` (a run's
    ``(job_id, scheduled_for)``, an audit event's ``(job_id, at, key)``), so the same rows always land at the same
    name."""
    digest = hashlib.sha256()
    for key in sorted(keys):
        digest.update(("\0".join(str(part) for part in key) + "\n").encode())
    return f"{prefix}{digest.hexdigest()[:32]}{OBJECT_SUFFIX}"


def _partition_objects(
    entries: Iterable[tuple[str, tuple[str | int, ...], _Item]],
    *,
    order: Callable[[tuple[str | int, ...]], Hashable],
    row: Callable[[_Item], Mapping[str, Any]],
) -> list[ArchiveObject]:
    """One object per partition prefix of ``entries`` (``(prefix, identity, item)``; an identity given twice is
    written once), its items sorted by ``order`` of their identity and written as ``row`` of each, named by
    :func:`object_key`; ordered by key."""
    groups: dict[str, dict[tuple[str | int, ...], _Item]] = defaultdict(dict)
    for prefix, key, item in entries:
        groups[prefix][key] = item
    objects = []
    for prefix, keyed in groups.items():
        keys = sorted(keyed, key=order)  # type: ignore[arg-type]
        objects.append(
            ArchiveObject(object_key(prefix, keys), encode_rows(row(keyed[k]) for k in keys), len(keys))
        )
    return sorted(objects, key=lambda item: item.key)


def archive_objects(rows: Iterable[RunRow]) -> list[ArchiveObject]:
    """The objects that archive ``rows``: one per ``(owner, month)`` partition, its rows sorted by
    ``(scheduled_for, job_id)`` (a row given twice is written once), ordered by key. Empty when ``rows`` is.
    Time order puts the runs of one instant side by side, which share their instants and often their worker:
    gzip stores a third fewer bytes of the archive than in key order (design §11)."""
    return _partition_objects(
        (
            (partition_prefix(r.owner, month_of(r.scheduled_for)), (r.job_id, r.scheduled_for), r)
            for r in rows
        ),
        order=lambda key: (key[1], key[0]),
        row=archive_row,
    )


def audit_prefix(month: str) -> str:
    """``audit/month=<month>/``: where the audit events of ``month`` (``YYYY-MM``, UTC, of ``at``) are."""
    return f"{AUDIT_PREFIX}month={month}/"


def audit_row(event: AuditEvent) -> dict[str, Any]:
    """The archived form of ``event``: every ``AUDIT_COLUMNS`` value, ``detail`` as compact JSON text."""
    return {
        "job_id": event.job_id,
        "at": event.at,
        "key": event.key,
        "kind": event.kind.value,
        "actor": event.actor,
        "detail": json.dumps(event.detail, separators=(",", ":"), sort_keys=True),
    }


def audit_objects(events: Iterable[AuditEvent]) -> list[ArchiveObject]:
    """The objects that archive ``events``: one per month (of ``at``), its events sorted by ``(at, job_id, key)``
    (an event given twice is written once), named by a digest of their ``AUDIT_DEDUPE_KEY``; ordered by key."""
    return _partition_objects(
        ((audit_prefix(month_of(e.at)), (e.job_id, e.at, e.key), e) for e in events),
        order=lambda key: (key[1], key[0], key[2]),
        row=audit_row,
    )


def quarantine_object(records: Sequence[Mapping[str, Any]]) -> ArchiveObject:
    """The object that keeps ``records`` (stream records whose image is no run row) whole: one JSON line each, as
    :func:`encode_rows` writes rows, at ``quarantine/<sha256 of the body, 32 hex digits>.json.gz`` (the same
    records give the same object). Raises ``TypeError`` for a record that is not JSON (a stream record is)."""
    body = encode_rows(records)
    key = f"{QUARANTINE_PREFIX}{hashlib.sha256(body).hexdigest()[:32]}{OBJECT_SUFFIX}"
    return ArchiveObject(key, body, len(records))


def split_object(item: ArchiveObject, max_bytes: int) -> list[ArchiveObject]:
    """``item`` if its body is at most ``max_bytes``; else its rows in parts of at most ``max_bytes`` each (halved
    until they fit), named ``<digest>-<i>.json.gz`` (``i`` from 1; deterministic: the same object splits the
    same way). A part of one row is kept whatever its size. Readers dedupe a part against the whole object."""
    if len(item.body) <= max_bytes or item.rows <= 1:
        return [item]
    rows = decode_rows(item.body)
    stem = item.key.removesuffix(OBJECT_SUFFIX)
    parts: list[list[dict[str, Any]]] = [rows]
    while any(len(part) > 1 and len(encode_rows(part)) > max_bytes for part in parts):
        parts = [half for part in parts for half in _halves(part, max_bytes)]
    return [
        ArchiveObject(f"{stem}-{i}{OBJECT_SUFFIX}", encode_rows(part), len(part))
        for i, part in enumerate(parts, start=1)
    ]


def _halves(rows: list[dict[str, Any]], max_bytes: int) -> list[list[dict[str, Any]]]:
    if len(rows) <= 1 or len(encode_rows(rows)) <= max_bytes:
        return [rows]
    middle = len(rows) // 2
    return [rows[:middle], rows[middle:]]


@dataclass(frozen=True)
class ArchiveReport:
    """What one batch did: ``rows`` archived (distinct runs), ``events`` archived (distinct audit events),
    ``objects`` written, ``spilled`` objects kept in the spill instead (the store refused them), ``ignored`` records
    that were no TTL deletion of a run or an audit event, ``quarantined`` records whose image was neither (kept whole
    under ``quarantine/``)."""

    rows: int = 0
    objects: int = 0
    spilled: int = 0
    ignored: int = 0
    quarantined: int = 0
    events: int = 0

    def as_dict(self) -> dict[str, int]:
        """The report as ``{"rows", "events", "objects", "spilled", "ignored", "quarantined"}``, each a count."""
        return {
            "rows": self.rows,
            "events": self.events,
            "objects": self.objects,
            "spilled": self.spilled,
            "ignored": self.ignored,
            "quarantined": self.quarantined,
        }


def archive_batch(
    rows: Sequence[RunRow],
    store: ArchiveObjects,
    spill: ArchiveSpill,
    *,
    events: Sequence[AuditEvent] = (),
    ignored: int = 0,
    malformed: Sequence[Mapping[str, Any]] = (),
) -> ArchiveReport:
    """Archive ``rows`` (one stream batch's expired runs) and ``events`` (its expired audit events) and keep
    ``malformed`` (its records whose image is neither) whole: write each of :func:`archive_objects`,
    :func:`audit_objects` and the :func:`quarantine_object` to ``store``; from the first object ``store`` refuses
    (``ArchiveUnavailable``), keep that one and the rest in ``spill`` (an object written twice is the same bytes at
    the same name). Any other error, or one of ``spill``, propagates: the batch is retried whole and rewrites its
    objects in place. ``ignored`` is carried into the report."""
    runs = archive_objects(rows)
    audit = audit_objects(events)
    objects = runs + audit + ([quarantine_object(malformed)] if malformed else [])
    counts = {"rows": sum(o.rows for o in runs), "events": sum(o.rows for o in audit)}
    for written, item in enumerate(objects):
        try:
            store.put(item)
        except ArchiveUnavailable:
            left = objects[written:]
            spill.spill(left)
            return ArchiveReport(
                objects=written, spilled=len(left), ignored=ignored, quarantined=len(malformed), **counts
            )
    return ArchiveReport(objects=len(objects), ignored=ignored, quarantined=len(malformed), **counts)
