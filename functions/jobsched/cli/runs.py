"""``jobsched runs JOB``: a job's run history, newest first (``--status`` filters, ``--json`` for scripts);
``jobsched runs --all``: the caller's runs across all their jobs (``GET /runs``), e.g. ``--status dead --since 24h``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from jobsched.cli.archive import archived_runs
from jobsched.cli.jobs import resolve_job
from jobsched.cli.options import Connection, JsonOption, option_groups
from jobsched.cli.output import seconds, show, table, when
from jobsched.client import ApiError
from jobsched.exits import USAGE_ERROR, fail
from jobsched.local.archive import ArchiveQueryError
from jobsched.models import RunKind, RunStatus

__all__ = ["runs_command"]

HISTORY_GONE = "beyond_retention"
"""The API's error code for a window before the retention on a deployment without an archive (410)."""


def _runs_table(runs: list[dict[str, Any]], *, with_job: bool = False) -> Table:
    """Runs (API JSON) as rows; a summary row of skipped fires shows its count (``skipped x12``); ``with_job``:
    a first column with each run's job id."""
    rows = []
    for run in runs:
        status = run.get("status", "")
        if run.get("skipped_count"):
            status += f" x{run['skipped_count']}"
        rows.append(
            (
                *((run.get("job_id", ""),) if with_job else ()),
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
    return table((("JOB",) if with_job else ()) + columns, rows)


_AGO = re.compile(r"^(\d+)\s*([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def ago(text: str, now: datetime) -> datetime | None:
    """``now`` minus the duration ``text`` (``90s``, ``30m``, ``24h``, ``7d``; a space may stand before the unit),
    or None when ``text`` is not a duration. Raises ValueError when the duration reaches before year 1."""
    found = _AGO.match(text.strip())
    if found is None:
        return None
    try:
        return now - timedelta(seconds=int(found[1]) * _UNIT_S[found[2]])
    except OverflowError:
        raise ValueError(f"{text!r} reaches before year 1") from None


def iso_instant(text: str) -> datetime | None:
    """``text`` as an ISO 8601 instant with its offset (``2026-12-01T00:00:00Z``), or None when it is not one
    (malformed, or without an offset)."""
    try:
        instant = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return instant if instant.tzinfo is not None else None


def moment(text: str, now: datetime) -> datetime:
    """``text`` as an instant: a duration back from ``now`` (``90s``, ``30m``, ``24h``, ``7d``: ``ago``) or an ISO
    8601 instant with its offset (any form ``iso_instant`` reads, such as the basic ``20261201T000000Z``). Raises
    ValueError saying what is accepted, or that a duration reaches before year 1."""
    found = ago(text, now)
    if found is None:
        found = iso_instant(text)
        if found is None:
            raise ValueError(
                f"{text!r} is neither a duration (90s, 30m, 24h, 7d) nor an ISO 8601 instant with its offset"
            )
    return found


def moment_option(text: str | None, option: str, now: datetime | None = None) -> datetime | None:
    """The value ``text`` of the option ``option`` as an instant (``moment``, from ``now``: default the present),
    None when not given. Exits 2 naming ``option`` for anything else."""
    if text is None:
        return None
    try:
        return moment(text, now or datetime.now(UTC))
    except ValueError as error:
        fail(str(error), USAGE_ERROR, field=option)


def instant_option(text: str | None, option: str, now: datetime | None = None) -> str | None:
    """``text`` (``moment_option``) written as the API's ``since`` and ``until`` take it (RFC 3339, UTC as ``Z``),
    None when not given. Exits 2 naming ``option`` for anything else."""
    found = moment_option(text, option, now)
    return found.isoformat().replace("+00:00", "Z") if found is not None else None


def one_of(option: str, value: str | None, choices: type[StrEnum]) -> None:
    """Exit 2 naming ``option`` when ``value`` is given and is not one of the values of ``choices``."""
    if value is not None and value not in {choice.value for choice in choices}:
        allowed = " ".join(choice.value for choice in choices)
        fail(f"{value!r} is not one of: {allowed}", USAGE_ERROR, field=option)


@option_groups
def runs_command(
    job: Annotated[str | None, typer.Argument(help="The job's id or name (not with --all).")] = None,
    every_job: Annotated[bool, typer.Option("--all", help="Runs of all your jobs (GET /runs).")] = False,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status: queued running retrying succeeded dead skipped."
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Scheduled at or after: 24h, 30m, 7d ago, or ISO 8601.")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Scheduled before: as --since.")] = None,
    kind: Annotated[
        str | None, typer.Option("--kind", help="Only runs of this kind: scheduled manual backfill.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many, newest first.")] = 20,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Also read JOB's runs past their retention from local mode's archive (<data dir>/archive).",
        ),
    ] = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """A job's runs, newest first (GET /jobs/{id}/runs), or with --all every job's (GET /runs); with --data-dir
    also JOB's runs that local mode moved to its archive (past the retention)."""
    if every_job == (job is not None):
        fail("give a JOB, or --all for the runs of all your jobs", USAGE_ERROR)
    one_of("--status", status, RunStatus)
    one_of("--kind", kind, RunKind)
    filters = {
        "status": status,
        "kind": kind,
        "since": instant_option(since, "--since"),
        "until": instant_option(until, "--until"),
    }
    page_size = min(max(limit, 1), 100)
    job_id = None
    with conn.client() as client:
        if job is not None:
            job_id = resolve_job(client, job)
        try:
            runs = _listed(client, job_id, status, page_size, limit, filters)
        except ApiError as error:
            if error.code != HISTORY_GONE or data_dir is None or job_id is None:
                raise
            # no archive behind the API: its runs table answers from the retention on, the data dir the rest (all
            # of a window with no start that ends before the retention: the API refused it for that)
            recent = {**filters, "since": None}
            runs = (
                [] if filters["since"] is None else _listed(client, job_id, status, page_size, limit, recent)
            )
    if data_dir is not None and job_id is not None:
        runs = across_retention(runs, data_dir, job_id, filters, limit)
    if runs or as_json:
        show(runs, as_json, lambda found: _runs_table(found, with_job=job is None))
    else:
        typer.echo("no runs yet", err=True)


def _listed(
    client: Any, job_id: str | None, status: str | None, page_size: int, limit: int, filters: dict[str, Any]
) -> list[dict[str, Any]]:
    """At most ``limit`` runs the API lists for ``job_id`` (None: every job) and ``filters``, newest first."""
    if job_id is None:
        found = client.iter_all_runs(page_size=page_size, **filters)
    elif all(filters[name] is None for name in ("since", "until", "kind")):
        found = client.iter_runs(job_id, status=status, page_size=page_size)
    else:
        found = client.iter_all_runs(job_id=job_id, page_size=page_size, **filters)
    runs: list[dict[str, Any]] = []
    for run in found:
        runs.append(run)
        if len(runs) >= limit:
            break
    return runs


def across_retention(
    runs: list[dict[str, Any]], data_dir: Path, job_id: str, filters: dict[str, Any], limit: int
) -> list[dict[str, Any]]:
    """``runs`` (the API's, newest first) with the archived runs of ``job_id`` under ``data_dir`` that match
    ``filters`` (``status``, ``kind``, ``since``, ``until``) and the API did not answer, newest first, at most
    ``limit``. Exits 1 when the archive cannot be read (DuckDB missing)."""
    try:
        archived = archived_runs(data_dir, job_id, limit=limit, **filters)
    except ArchiveQueryError as error:
        fail(str(error), field="--data-dir")
    seen = {run.get("id") for run in runs}
    merged = runs + [run for run in archived if run["id"] not in seen]
    merged.sort(
        key=lambda run: datetime.fromisoformat(str(run["scheduled_for"]).replace("Z", "+00:00")), reverse=True
    )
    return merged[:limit]
