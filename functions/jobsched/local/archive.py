"""The run archive in a directory (design §11): local mode's archive (``<data dir>/archive``), written in the
layout and format of the archive bucket, and read with DuckDB, the optional embedded engine (the ``local``
extra: ``pip install 'jobsched[local]'``; the Lambda asset does not carry it).

``LocalArchive.put`` is ``ports.archive.ArchiveObjects`` on files; ``LocalArchive.query`` runs SQL over the view
``runs``: every archived row, one per ``(job_id, scheduled_for)``, with the partition columns ``owner``
(the owner as written) and ``month`` (``YYYY-MM``). The same reader reads a copy of the bucket's objects.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobsched.domain.archive import ARCHIVE_COLUMNS, DEDUPE_KEY, NO_OWNER, OBJECT_SUFFIX, RUNS_PREFIX
from jobsched.ports.archive import ArchiveObject, ArchiveUnavailable
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.runs import archive_expired

DUCKDB_MISSING = (
    "reading the archive needs DuckDB, which is not installed: pip install 'jobsched[local]' (or duckdb)"
)
_SCALARS = {"string": "VARCHAR", "bigint": "BIGINT", "int": "INTEGER"}


class ArchiveQueryError(ValueError):
    """A query over the archive failed (bad SQL, or DuckDB is missing); the message says why."""


def duckdb_type(hive: str) -> str:
    """The DuckDB type of a Hive DDL type of ``ARCHIVE_COLUMNS`` (``array<struct<a:int>>`` ->
    ``STRUCT("a" INTEGER)[]``). Raises ``ValueError`` for a type it does not know."""
    if hive in _SCALARS:
        return _SCALARS[hive]
    array = re.fullmatch(r"array<(.*)>", hive)
    if array:
        return f"{duckdb_type(array.group(1))}[]"
    struct = re.fullmatch(r"struct<(.*)>", hive)
    if struct:
        fields = [part.split(":", 1) for part in struct.group(1).split(",")]
        return "STRUCT(" + ", ".join(f'"{name}" {duckdb_type(kind)}' for name, kind in fields) + ")"
    raise ValueError(f"no DuckDB type for {hive!r}")


def runs_view_sql(root: Path) -> str:
    """The ``CREATE VIEW runs`` over the objects under ``root`` (a directory holding ``runs/``): deduplicated by
    ``DEDUPE_KEY`` (the copy with the latest ``finished_at`` kept); ``owner`` decoded from its partition (DuckDB's
    hive partitioning decodes it), NULL for the rows of the partition ``NO_OWNER`` (which an owner spelled
    ``_none``, partition ``%5Fnone``, decodes to as well)."""
    columns = ", ".join(f"'{name}': '{duckdb_type(kind)}'" for name, kind in ARCHIVE_COLUMNS)
    pattern = str(root / RUNS_PREFIX / "*" / "*" / f"*{OBJECT_SUFFIX}").replace("'", "''")
    key = ", ".join(DEDUPE_KEY)
    source = (
        f"read_json('{pattern}', format = 'newline_delimited', compression = 'gzip', columns = {{{columns}}}, "
        "hive_partitioning = true, hive_types = {'owner': 'VARCHAR', 'month': 'VARCHAR'}, filename = true)"
    )
    no_owner = f"regexp_matches(filename, '[/\\\\]owner={NO_OWNER}[/\\\\][^/\\\\]+[/\\\\][^/\\\\]+$')"
    return (
        "CREATE OR REPLACE VIEW runs AS SELECT * EXCLUDE (copy_rank, filename, owner), "
        f"CASE WHEN {no_owner} THEN NULL ELSE owner END AS owner FROM (SELECT *, row_number() OVER "
        f"(PARTITION BY {key} ORDER BY finished_at DESC NULLS LAST) AS copy_rank FROM {source}) WHERE copy_rank = 1"
    )


def _empty_runs_sql() -> str:
    columns = ", ".join(f'"{name}" {duckdb_type(kind)}' for name, kind in ARCHIVE_COLUMNS)
    return f"CREATE OR REPLACE TABLE runs ({columns}, owner VARCHAR, month VARCHAR)"


@dataclass(frozen=True)
class LocalArchive:
    """The archive under directory ``root`` (objects at ``root/<key>``)."""

    root: Path

    def put(self, item: ArchiveObject) -> None:
        """Write ``item`` at ``root/<key>`` atomically (a temporary file renamed over it). Raises
        ``ArchiveUnavailable`` when the file cannot be written."""
        path = self.root / item.key
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as handle:
                handle.write(item.body)
            os.replace(handle.name, path)
        except OSError as error:
            raise ArchiveUnavailable(f"{path}: {error}") from error

    def has_objects(self) -> bool:
        """True when at least one archived object is under ``root``."""
        return any((self.root / RUNS_PREFIX).glob(f"*/*/*{OBJECT_SUFFIX}"))

    def query(self, sql: str, parameters: list[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run ``sql`` (with ``?`` ``parameters``) over the view ``runs``; returns ``(column names, rows)``.
        Raises ``ArchiveQueryError`` for bad SQL or when DuckDB is not installed."""
        try:
            import duckdb
        except ImportError as error:
            raise ArchiveQueryError(DUCKDB_MISSING) from error
        with duckdb.connect() as connection:
            try:
                connection.execute(runs_view_sql(self.root) if self.has_objects() else _empty_runs_sql())
                cursor = connection.execute(sql, parameters or [])
                names = [column[0] for column in cursor.description or ()]
                return names, cursor.fetchall()
            except duckdb.Error as error:
                raise ArchiveQueryError(str(error)) from error


ARCHIVE_DIR = "archive"
"""Local mode's archive: ``<data dir>/archive/runs/owner=<o>/month=<yyyy-MM>/<digest>.json.gz``, and audit events under
``<data dir>/archive/audit/month=<yyyy-MM>/``."""


def archive_dir(data_dir: Path) -> Path:
    """The archive directory of local mode's data directory ``data_dir``."""
    return data_dir / ARCHIVE_DIR


def archive_then_reap(database: SqliteDatabase, root: Path) -> Callable[[int], int]:
    """The retention pass of local mode's sweep on ``database``: at ``now_ms``, expired runs and audit events move
    to the archive under ``root`` (``sqlite.runs.archive_expired``), then the other expired records are deleted
    (``SqliteDatabase.reap_expired``). Returns how many records went from the database."""
    archive = LocalArchive(root)

    def reap(now_ms: int) -> int:
        return archive_expired(database, archive, now_ms) + database.reap_expired(now_ms)

    return reap
