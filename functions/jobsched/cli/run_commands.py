"""``jobsched runs`` as a command group: ``list`` (``jobsched.cli.runs``, the default: ``jobsched runs JOB`` is
``jobsched runs list JOB``), one run with its tries, and re-runs of failed runs.

- ``jobsched runs JOB`` (or ``runs list JOB``): the job's runs, newest first (``--status`` filters, ``--json``);
- ``jobsched runs show RUN_ID``: one run with each try's start, finish, worker, error and output
  (``GET /jobs/{id}/runs/{run_id}``);
- ``jobsched runs cancel RUN_ID [--reason TEXT]``: a queued, retrying or running run ends ``cancelled``
  (``POST /jobs/{id}/runs/{run_id}/cancel``), saying what became of its try.
- ``jobsched runs retry RUN_ID``: a dead or skipped run queued again (``POST /jobs/{id}/runs/{run_id}/retry``);
  ``jobsched runs retry --status dead --since 24h [--job JOB]``: every such run of the caller's jobs (or of one
  job) whose ``scheduled_for`` is in the window, one call each, a line each and the count at the end.

A run id names its job (``<job id>@<scheduled_for epoch ms>``), so ``show``, ``cancel`` and ``retry`` take the id
alone. ``show``, ``cancel`` and ``retry`` are words of the command: a job named like one is listed with
``jobsched runs list show``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from typer.core import TyperGroup, _click

from jobsched.cli.jobs import resolve_job
from jobsched.cli.options import Connection, JsonOption, option_groups
from jobsched.cli.output import job_detail, print_json, print_table, say, show, when
from jobsched.cli.runs import moment_option, runs_command
from jobsched.client import ApiError
from jobsched.exits import FAILED, USAGE_ERROR, fail

__all__ = ["runs_app"]

RunIdArgument = Annotated[
    str | None,
    typer.Argument(
        help="The run's id: <job id>@<scheduled_for epoch ms>, as `jobsched runs JOB` shows it.",
        show_default=False,
    ),
]
RETRYABLE = ("dead", "skipped")


class _RunsGroup(TyperGroup):
    """``runs``' subcommands, with ``list`` the default: ``jobsched runs JOB`` is ``jobsched runs list JOB``, as
    it always was."""

    def parse_args(self, ctx: _click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["list", *args]
        return super().parse_args(ctx, args)


runs_app = typer.Typer(
    cls=_RunsGroup,
    help="A job's runs (`runs JOB`), one run with its tries (`runs show RUN_ID`), re-runs (`runs retry`), "
    "cancels (`runs cancel RUN_ID`).",
    no_args_is_help=True,
)
runs_app.command("list")(runs_command)


def _job_of(run_id: str) -> str:
    """The job id a run id names (``<job id>@<ms>``). Exits 2 for a string that is not a run id."""
    job_id, at, ms = run_id.partition("@")
    if not at or not job_id or not ms.isdigit():
        fail(f"{run_id!r} is not a run id (<job id>@<scheduled_for epoch ms>)", USAGE_ERROR, field="RUN_ID")
    return job_id


def _tries(title: str, attempts: list[dict[str, Any]]) -> None:
    if not attempts:
        return
    typer.echo(f"\n{title}")
    print_table(
        ("ROUND", "TRY", "STARTED", "FINISHED", "WORKER", "ERROR", "OUTPUT"),
        [
            (
                str(a.get("round", 0)),
                str(a.get("attempt", "")),
                when(a.get("started_at")),
                when(a.get("finished_at")),
                a.get("worker") or "-",
                a.get("error") or "",
                a.get("output") or "",
            )
            for a in attempts
        ],
    )


@runs_app.command("show")
@option_groups
def runs_show(
    run_id: RunIdArgument = None, conn: Connection = Connection(), as_json: JsonOption = False
) -> None:
    """One run with its tries and their output (GET /jobs/{id}/runs/{run_id})."""
    if not run_id:
        fail("give the RUN_ID to show", USAGE_ERROR, field="RUN_ID")
    with conn.client() as client:
        run = client.get_run(_job_of(run_id), run_id)
    if as_json:
        print_json(run)
        return
    attempts, previous = run.pop("attempts", []), run.pop("previous_attempts", [])
    show(run, False, job_detail)
    _tries("TRIES", attempts)
    _tries("EARLIER TRIES (before each re-run)", previous)


@runs_app.command("retry")
@option_groups
def runs_retry(
    run_id: RunIdArgument = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Re-run every run in this status (dead or skipped) instead of one RUN_ID."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="With --status: runs scheduled since then (24h, 30m, 7d, or ISO 8601)."),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option("--job", help="With --status: only this job's runs (id or name); default all."),
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="With RUN_ID: a repeat queues it once.")
    ] = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Run a dead or skipped run again with its run id (POST /jobs/{id}/runs/{run_id}/retry), or many with
    --status dead --since 24h: one call each, then the count."""
    if run_id and (status or since or job):
        fail("give a RUN_ID or --status/--since/--job, not both", USAGE_ERROR, field="RUN_ID")
    if run_id:
        with conn.client() as client:
            run = client.retry_run(_job_of(run_id), run_id, idempotency_key=idempotency_key)
        say(run, as_json, f"queued again: {run.get('id', '')} (re-run {run.get('reruns', '')})")
        return
    if status is None:
        fail(
            "give a RUN_ID, or --status dead|skipped (with --since) to re-run many",
            USAGE_ERROR,
            field="RUN_ID",
        )
    if status not in RETRYABLE:
        fail(f"only dead or skipped runs can be re-run, not {status!r}", USAGE_ERROR, field="--status")
    if idempotency_key:
        fail("--idempotency-key goes with one RUN_ID", USAGE_ERROR, field="--idempotency-key")
    _retry_many(conn, status, moment_option(since or None, "--since"), job, as_json)


@runs_app.command("cancel")
@option_groups
def runs_cancel(
    run_id: RunIdArgument = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why; kept on the cancelled run (cancel_reason).")
    ] = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Cancel a queued, retrying or running run (POST /jobs/{id}/runs/{run_id}/cancel): no try of it starts, a
    running shell/command try is terminated, an http request aborted; a lambda or sqs target may still finish.
    Cancelling a cancelled run again answers as the first time; a finished run is refused (409)."""
    if not run_id:
        fail("give the RUN_ID to cancel", USAGE_ERROR, field="RUN_ID")
    with conn.client() as client:
        run = client.cancel_run(_job_of(run_id), run_id, reason=reason)
    say(run, as_json, f"cancelled: {run.get('id', '')} ({run.get('stop', '')}): {run.get('note', '')}")


def _retry_many(
    conn: Connection, status: str, start: datetime | None, job: str | None, as_json: bool
) -> None:
    """Re-run each run of ``status`` scheduled at or after ``start`` of ``job`` (or of every job of the caller),
    as ``GET /runs`` lists them: one call each (each with its own Idempotency-Key), a line each, then the count.
    Exit 1 if any failed."""
    done: list[dict[str, Any]] = []
    failed = 0
    with conn.client() as client:
        job_id = resolve_job(client, job) if job else None
        live = (
            {job_id} if job_id else {j["id"] for j in client.iter_jobs()}
        )  # a deleted job's runs stay listed
        since = start.astimezone(UTC).isoformat().replace("+00:00", "Z") if start else None
        listed = client.iter_all_runs(status=status, since=since, job_id=job_id)
        for run in [r for r in listed if r["job_id"] in live]:  # listed first: a re-run leaves the listing
            try:
                again = client.retry_run(run["job_id"], run["id"], idempotency_key=f"cli-{uuid.uuid4()}")
            except ApiError as error:
                failed += 1
                typer.echo(f"error: {run['id']}: {error}", err=True)
                continue
            done.append(again)
            if not as_json:
                typer.echo(f"queued again: {again.get('id', '')} (re-run {again.get('reruns', '')})")
    if as_json:
        print_json(done)
    typer.echo(f"{len(done)} run(s) queued again" + (f", {failed} refused" if failed else ""), err=as_json)
    if failed:
        raise typer.Exit(FAILED)
