"""``jobsched import-crontab FILE``: a Vixie/cronie crontab (user or system) becomes one job per entry.

Parsing is ``jobsched.crontab`` (pure); this module reads the file, calls the API and reports. Names are
deterministic, so importing the same file again changes nothing.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from jobsched.cli.options import Connection, JsonOption, option_groups
from jobsched.cli.output import print_json, print_table
from jobsched.client import ApiError
from jobsched.crontab import CRON_JOB_DEFAULTS, Crontab, parse_crontab
from jobsched.exits import FAILED, USAGE_ERROR, fail

__all__ = ["import_crontab_command", "system_zone_name"]


def system_zone_name() -> str:
    """The machine's IANA zone (what cron schedules in): ``/etc/timezone`` or the ``/etc/localtime`` link;
    ``UTC`` when neither names one."""
    try:
        name = Path("/etc/timezone").read_text().strip()
        if name:
            return name
    except OSError:
        pass
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        return "UTC"
    marker = "/zoneinfo/"
    if marker in target:
        name = target.split(marker, 1)[1]
        return name.removeprefix("posix/").removeprefix("right/")
    return "UTC"


def _read_crontab(file: Path) -> tuple[str, str, str]:
    """``(text, label, stem)`` of ``file`` (``-`` = stdin): its text, its resolved path for the job's
    description, and the stem job names start with. Exits 2 when the file cannot be read as text."""
    if str(file) == "-":
        return sys.stdin.read(), "<stdin>", "stdin"
    try:
        text = file.read_text()
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror or error}", USAGE_ERROR)
    except UnicodeDecodeError:
        fail(f"{file} is not a text file", USAGE_ERROR)
    return text, str(file.resolve()), file.stem or file.name


@option_groups
def import_crontab_command(
    file: Annotated[Path, typer.Argument(help="Crontab file, or '-' for stdin (e.g. `crontab -l | ...`).")],
    system: Annotated[
        bool,
        typer.Option(
            "--system", help="System crontab (/etc/crontab, /etc/cron.d/*): a user before each command."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the jobs it would create; call nothing.")
    ] = False,
    tz: Annotated[
        str | None,
        typer.Option("--tz", help="Zone of entries before any CRON_TZ/TZ line (default: this machine's)."),
    ] = None,
    retries: Annotated[int, typer.Option("--retries", help="Tries per run (cron: 1).")] = 1,
    catch_up: Annotated[
        bool, typer.Option("--catch-up", help="Run fires missed during downtime (cron skips them).")
    ] = False,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Import a Vixie/cronie crontab: one job with a shell target per entry. Re-importing changes nothing.

    Rejected lines are reported with their line number and make the exit status 1; the rest still import.
    """
    text, label, stem = _read_crontab(file)
    if not system and (label == "/etc/crontab" or label.startswith("/etc/cron.d/")):
        typer.echo(f"hint: {file} is a system crontab; pass --system to read its user field", err=True)
    defaults = {**CRON_JOB_DEFAULTS, "retry": {"max_attempts": retries}}
    if catch_up:
        defaults["missed"] = "catch_up"
    parsed = parse_crontab(
        text,
        stem=stem,
        source=label,
        system=system,
        default_timezone=tz or system_zone_name(),
        now=datetime.now(UTC),
        job_defaults=defaults,
    )
    results = _dry_run(parsed) if dry_run else _import_entries(parsed, conn)
    display = str(file)
    for notice in parsed.notices:
        kind = "error" if notice.rejected else "note"
        typer.echo(f"{display}:{notice.line}: {kind}: {notice.message}", err=True)
    for row in results:
        if row["status"] == "rejected":
            typer.echo(f"{display}:{row['line']}: error: {row['error']}", err=True)
    if as_json:
        print_json(
            {
                "jobs": results,
                "notices": [
                    {"line": n.line, "rejected": n.rejected, "message": n.message} for n in parsed.notices
                ],
            }
        )
    else:
        _print_import(results, dry_run)
    rejected = len(parsed.rejected) + sum(1 for r in results if r["status"] == "rejected")
    if rejected:
        typer.echo(f"{rejected} line(s) rejected", err=True)
        raise typer.Exit(FAILED)


def _dry_run(parsed: Crontab) -> list[dict[str, Any]]:
    """The jobs the entries would create (status ``would create``), with every field; calls nothing."""
    return [
        {
            "line": entry.line,
            "status": "would create",
            **entry.job.model_dump(mode="json", exclude_defaults=False),
        }
        for entry in parsed.entries
    ]


def _import_entries(parsed: Crontab, conn: Connection) -> list[dict[str, Any]]:
    """Create each entry's job: ``created``, ``unchanged`` (same name and spec) or ``rejected`` by the API.

    An unreachable API ends the import (exit 1): every other entry would fail the same way."""
    results: list[dict[str, Any]] = []
    if not parsed.entries:
        return results
    with conn.client() as client:
        for entry in parsed.entries:
            body = entry.job.model_dump(mode="json", exclude_unset=True)
            row: dict[str, Any] = {"line": entry.line, "name": entry.job.name}
            try:
                job, created = client.create_job(body)
            except ApiError as error:
                if error.status == 0:
                    raise
                row.update(status="rejected", error=str(error))
            else:
                row.update(status="created" if created else "unchanged", id=job.get("id"), job=job)
            results.append(row)
    return results


def _print_import(results: list[dict[str, Any]], dry_run: bool) -> None:
    if not results:
        typer.echo("no entries to import", err=True)
    elif dry_run:
        print_table(
            ("LINE", "NAME", "SCHEDULE", "TZ", "COMMAND"),
            [
                (str(r["line"]), r["name"], r["schedule"], r["timezone"], r["target"]["command"])
                for r in results
            ],
        )
    else:
        print_table(
            ("LINE", "NAME", "ID", "RESULT"),
            [(str(r["line"]), r["name"], r.get("id") or "-", r["status"]) for r in results],
        )
