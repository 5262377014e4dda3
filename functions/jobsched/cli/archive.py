"""``jobsched archive query SQL``: SQL over local mode's run archive (``<data dir>/archive``, design §11), read with
DuckDB (the ``local`` extra). The view ``runs`` holds every archived run once, with ``owner`` and ``month``.
A deployment's archive is queried with Athena (docs/deploy.md, History beyond retention)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from jobsched.archived_rows import archived_run
from jobsched.cli.options import JsonOption
from jobsched.cli.output import show, table
from jobsched.clock import to_ms
from jobsched.exits import fail
from jobsched.local.archive import ArchiveQueryError, LocalArchive, archive_dir
from jobsched.local.paths import DEFAULT_DATA_DIR

archive_app = typer.Typer(no_args_is_help=True, help="Query the run archive (runs past their retention).")

DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Local mode's data directory (its archive is <data dir>/archive).")
]


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


@archive_app.command("query")
def query_command(
    sql: Annotated[
        str,
        typer.Argument(help='SQL over the view runs, e.g. "SELECT status, count(*) FROM runs GROUP BY 1"'),
    ],
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    as_json: JsonOption = False,
) -> None:
    """Run SQL over the local archive's view ``runs``; prints a table (``--json``: a list of objects). Exits 1 with
    the engine's message on bad SQL, or when DuckDB is not installed."""
    try:
        names, rows = LocalArchive(archive_dir(data_dir)).query(sql)
    except ArchiveQueryError as error:
        fail(str(error), field="sql")
    records = [dict(zip(names, row, strict=True)) for row in rows]
    show(
        records,
        as_json,
        lambda value: table(tuple(names), [[_cell(r[name]) for name in names] for r in value]),
    )


def archived_runs(
    data_dir: Path,
    job_id: str,
    *,
    since: str | None,
    until: str | None,
    status: str | None,
    kind: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """The runs of ``job_id`` in local mode's archive under ``data_dir``, newest first, at most ``limit``, shaped as
    the API's runs (``id``, instants as ISO 8601 UTC, ``"archived": true``): ``since`` <= ``scheduled_for`` < ``until``
    (RFC 3339, either None), only ``status`` / ``kind`` when given. None archived: an empty list. Raises
    ``ArchiveQueryError`` (DuckDB missing)."""
    archive = LocalArchive(archive_dir(data_dir))
    if not archive.has_objects():
        return []
    where: list[str] = ["job_id = ?"]
    parameters: list[Any] = [job_id]  # values only ever as parameters
    for column, value in (("status", status), ("kind", kind)):
        if value is not None:
            where.append(f"{column} = ?")
            parameters.append(value)
    for op, value in ((">=", since), ("<", until)):
        if value is not None:
            where.append(f"scheduled_for {op} ?")
            parameters.append(to_ms(datetime.fromisoformat(value.replace("Z", "+00:00"))))
    sql = (
        f"SELECT * EXCLUDE (owner, month) FROM runs WHERE {' AND '.join(where)} "
        f"ORDER BY scheduled_for DESC LIMIT {int(limit)}"
    )
    names, rows = archive.query(sql, parameters)
    return [archived_run(dict(zip(names, row, strict=True))) for row in rows]
