"""Queries over the run archive for one owner (design §11), pure: which windows need the archive, and the SQL that
reads them.

- **When** (:func:`reaches_archive`): a window whose start is before ``now - retention_days``, or that has no start
  and ends before it, asks for runs the runs table's TTL may have deleted: the archive answers it.
- **What** (:func:`runs_query`): SQL over the Glue table ``runs`` (the same name and columns as local mode's DuckDB
  view) with ``?`` placeholders only. The owner is always a predicate on the ``owner`` partition (the caller's
  owner, percent-encoded as the layout writes it: ``domain.archive.owner_partition``) and the window is a
  predicate on the ``month`` partition too, so a query reads only the caller's objects of those months. Rows are
  deduplicated by ``DEDUPE_KEY``; newest ``scheduled_for`` first.
- **Which window** (:func:`window_of`): the inverse of :func:`runs_query`, from a query's text and values as the
  engine keeps them, so a poll knows whose window it answers; None for any query ``runs_query`` did not build.
- **Rows** (:func:`rows_of_strings`): Athena answers every value as text; the columns' types make them ints again.
- **Both stores** (:func:`merged_rows`): a window before the retention can still hold rows of the runs table (a
  backfill of an old fire is kept from when it was saved; TTL deletes hours to days after expiry): the answer is
  the archive's rows and the table's, one per ``DEDUPE_KEY`` (the table's copy first), each marked ``archived``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from jobsched.archived_rows import TRY_FIELDS
from jobsched.domain.archive import (
    ARCHIVE_COLUMNS,
    DEDUPE_KEY,
    archive_row,
    month_of,
    owner_of_partition,
    owner_partition,
)
from jobsched.ports.archive_queries import ArchiveQuery, RunsWindow
from jobsched.ports.runs import RunRow

DAY_MS = 86_400_000
MAX_ROWS = 1000
"""The most rows one archive query answers."""
JOB_ID = re.compile(r"j_[0-9a-f]{20}")
"""A job id (``api.schemas``' pattern): the only job ids a query takes."""
WIRE_VALUE = re.compile(r"[a-z_]{1,32}")
"""A status or kind wire value (``models.RunStatus``, ``models.RunKind``)."""
RUNS_QUERY_PREFIX = "SELECT /* jobsched runs_query */ "
"""How every query :func:`runs_query` builds begins: a query that begins otherwise was not built by it, and its
first parameter is no owner binding."""
OPTIONAL_FILTERS = ("job_id", "status", "kind")
"""The optional filters of a window, in the order :func:`runs_query` adds their predicates and values."""
_FIXED_VALUES = 5
"""How many values every :func:`runs_query` has before the optional filters': owner, two months, since, until."""
_LIMIT = re.compile(r" LIMIT ([0-9]{1,4})$")
_SCALAR_COLUMNS = [name for name, _ in ARCHIVE_COLUMNS if name != "tries"]
_INTEGERS = {name for name, kind in ARCHIVE_COLUMNS if kind in ("int", "bigint")}


class ArchiveWindowError(ValueError):
    """A window the archive cannot be asked for; ``field`` names the request field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def retention_floor(now_ms: int, retention_days: int) -> int:
    """``now_ms - retention_days`` days (epoch ms): runs scheduled before it may be in the archive only."""
    return now_ms - retention_days * DAY_MS


ARCHIVE_START_MS = 0
"""Where the archive's answer to a window without a start begins (epoch ms): 1970-01-01, the first ``month``
partition the archive has (a backfill takes fires from 1970 on)."""


def reaches_archive(
    since_ms: int | None, now_ms: int, retention_days: int, until_ms: int | None = None
) -> bool:
    """True when the archive answers a window ``[since_ms, until_ms)`` (epoch ms; None: no start, no end): its
    start is before the retention floor, or it has no start and ends at or before the floor (the runs table can
    hold none of its runs: the archive answers it from ``ARCHIVE_START_MS``). Any other window without a start
    lists the runs table only (its newest runs first)."""
    floor = retention_floor(now_ms, retention_days)
    if since_ms is None:
        return until_ms is not None and until_ms <= floor
    return since_ms < floor


def months(since_ms: int, until_ms: int) -> tuple[str, str]:
    """The first and last ``month`` partition (``YYYY-MM``, UTC) of ``[since_ms, until_ms)``."""
    return month_of(since_ms), month_of(max(since_ms, until_ms - 1))


def runs_query(window: RunsWindow) -> ArchiveQuery:
    """The query that answers ``window`` (see the module docstring). The owner and every value are parameters
    (``?``); the SQL text depends only on which optional filters are set. Raises :class:`ArchiveWindowError`
    naming the field for an empty owner, a malformed ``job_id``, ``status`` or ``kind``, ``until`` not after
    ``since`` and a ``limit`` outside 1..``MAX_ROWS``."""
    if not window.owner:
        raise ArchiveWindowError("owner", "an archive query needs the caller's owner")
    if window.until_ms <= window.since_ms:
        raise ArchiveWindowError("until", "until must be after since")
    if not 1 <= window.limit <= MAX_ROWS:
        raise ArchiveWindowError("limit", f"limit must be between 1 and {MAX_ROWS}")
    if window.job_id is not None and not JOB_ID.fullmatch(window.job_id):
        raise ArchiveWindowError("job_id", "job_id must look like j_ and 20 hex digits")
    for name in ("status", "kind"):
        value = getattr(window, name)
        if value is not None and not WIRE_VALUE.fullmatch(value):
            raise ArchiveWindowError(name, f"{name} is not one of its values")
    first, last = months(window.since_ms, window.until_ms)
    where = ["owner = ?", "month BETWEEN ? AND ?", "scheduled_for >= ?", "scheduled_for < ?"]
    parameters: list[str | int] = [
        owner_partition(window.owner),
        first,
        last,
        window.since_ms,
        window.until_ms,
    ]
    for name in OPTIONAL_FILTERS:
        value = getattr(window, name)
        if value is not None:
            where.append(f"{name} = ?")
            parameters.append(value)
    key = ", ".join(DEDUPE_KEY)
    columns = ", ".join(_SCALAR_COLUMNS)
    sql = (
        f"{RUNS_QUERY_PREFIX}{columns}, CAST(tries AS JSON) AS tries FROM (SELECT *, row_number() OVER (PARTITION BY {key} "
        f"ORDER BY finished_at DESC) AS copy_rank FROM runs WHERE {' AND '.join(where)}) WHERE copy_rank = 1 "
        f"ORDER BY scheduled_for DESC, job_id LIMIT {int(window.limit)}"
    )
    return ArchiveQuery(sql, tuple(parameters), window)


def window_of(sql: str, parameters: Sequence[str | int]) -> RunsWindow | None:
    """The window a query of :func:`runs_query` answers, from its ``sql`` and its ``parameters`` (typed values, in
    order); None when :func:`runs_query` of that window would not build exactly this query (any other SQL, values
    of another shape, or an owner partition naming no owner)."""
    found = _LIMIT.search(sql)
    if not sql.startswith(RUNS_QUERY_PREFIX) or found is None or len(parameters) < _FIXED_VALUES:
        return None
    owner, _, _, since_ms, until_ms = parameters[:_FIXED_VALUES]
    names = [name for name in OPTIONAL_FILTERS if f" AND {name} = ?" in sql]
    values = parameters[_FIXED_VALUES:]
    if not isinstance(owner, str) or not isinstance(since_ms, int) or not isinstance(until_ms, int):
        return None
    if len(values) != len(names) or not all(isinstance(value, str) for value in values):
        return None
    filters = {name: str(value) for name, value in zip(names, values, strict=True)}
    window = RunsWindow(owner_of_partition(owner) or "", since_ms, until_ms, limit=int(found[1]), **filters)
    try:
        rebuilt = runs_query(window)
    except ArchiveWindowError:
        return None
    same = rebuilt.sql == sql and rebuilt.parameters == tuple(parameters)
    return window if same else None


def merged_rows(
    archived: Sequence[dict[str, Any]], recent: Sequence[RunRow], limit: int
) -> list[dict[str, Any]]:
    """The answer to a window from both stores: ``recent`` (the runs table's rows of the window, as
    ``domain.archive.archive_row`` gives them, ``"archived": false``) and ``archived`` (the archive's rows,
    ``"archived": true``), one per ``DEDUPE_KEY`` (the table's copy kept: it is the live one), newest
    ``scheduled_for`` first (then ``job_id``), at most ``limit``."""
    kept: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in recent:
        kept.setdefault((row.job_id, row.scheduled_for), {**archive_row(row), "archived": False})
    for found in archived:
        kept.setdefault(tuple(found[name] for name in DEDUPE_KEY), {**found, "archived": True})
    ordered = sorted(kept.values(), key=lambda row: (-row["scheduled_for"], row["job_id"]))
    return ordered[:limit]


def rows_of_strings(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows an engine answered as text (Athena's ``VarCharValue``; None for NULL; typed values pass) in the shape of
    ``domain.archive.archive_row``: integer columns ints, ``tries`` a list of objects (from its JSON, an array of
    objects or of arrays in ``TRY_FIELDS`` order), NULLs left out. Raises ``ValueError`` for a malformed value."""
    out = []
    for values in rows:
        row: dict[str, Any] = {}
        for name, value in zip(columns, values, strict=True):
            if value is None:
                continue
            if name in _INTEGERS:
                row[name] = int(value)
            elif name == "tries":
                entries = json.loads(value) if isinstance(value, str) else value
                row[name] = [_try_of(entry) for entry in entries or []]
            else:
                row[name] = value
        out.append(row)
    return out


def _try_of(entry: Any) -> dict[str, Any]:
    fields = entry if isinstance(entry, dict) else dict(zip(TRY_FIELDS, entry, strict=False))
    return {name: fields[name] for name in TRY_FIELDS if fields.get(name) is not None}
