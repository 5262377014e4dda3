"""``jobsched runs JOB``: a job's run history, newest first (``--status`` filters, ``--json`` for scripts)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from jobsched.cli.jobs import resolve_job
from jobsched.cli.options import Connection, JobArgument, JsonOption, option_groups
from jobsched.cli.output import seconds, show, table, when

__all__ = ["runs_command"]


def _runs_table(runs: list[dict[str, Any]]) -> Table:
    """Runs (API JSON) as rows; a summary row of skipped fires shows its count (``skipped x12``)."""
    rows = []
    for run in runs:
        status = run.get("status", "")
        if run.get("skipped_count"):
            status += f" x{run['skipped_count']}"
        rows.append(
            (
                when(run.get("scheduled_for")),
                status,
                str(run.get("attempt", 0)),
                seconds(run.get("lateness_ms")),
                when(run.get("started_at")),
                when(run.get("finished_at")),
                run.get("kind", ""),
                (run.get("error") or "")[:80],
            )
        )
    columns = ("SCHEDULED FOR", "STATUS", "TRY", "LATENESS", "STARTED", "FINISHED", "KIND", "ERROR")
    return table(columns, rows)


@option_groups
def runs_command(
    job: JobArgument,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status: queued running retrying succeeded dead skipped."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many, newest first.")] = 20,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """A job's runs, newest first (GET /jobs/{id}/runs)."""
    with conn.client() as client:
        job_id = resolve_job(client, job)
        runs: list[dict[str, Any]] = []
        for run in client.iter_runs(job_id, status=status, page_size=min(max(limit, 1), 100)):
            runs.append(run)
            if len(runs) >= limit:
                break
    if runs or as_json:
        show(runs, as_json, _runs_table)
    else:
        typer.echo("no runs yet", err=True)
