"""The ``jobsched`` command line: one typer app (console script ``jobsched = jobsched.cli:main``).

Commands, by module:

| command | module |
|---|---|
| ``next`` (offline schedule preview) | ``schedule`` |
| ``jobs create/list/get/update/pause/resume/trigger/delete`` | ``jobs`` |
| ``runs`` (``runs JOB``: ``runs``), ``runs show/retry`` (the group: ``run_commands``) | ``runs``, ``run_commands`` |
| ``apply`` (jobs as code; the plan: ``jobsched.apply_plan``) | ``apply`` |
| ``import-crontab`` | ``import_crontab`` |
| ``smoke`` | ``smoke`` |
| ``limits`` (the caller's quotas and use) | ``limits`` |
| ``health`` (the scheduler's dispatch lateness per priority and top owner) | ``health`` |
| ``ui`` (the web console for a deployment) | ``ui`` |
| ``local`` | ``jobsched.local.command`` (shared with ``python -m jobsched.local``) |

Conventions, as ``aws``/``kubectl`` users expect: the connection options (``--api``, ``--token``,
``--sigv4-region``, with their environment variables) are declared once (``options.Connection``) and taken
by every API-facing command; tables for people, ``--json`` for scripts (the API's JSON, unchanged); errors
are ONE line on stderr (``error: <status> <code>: <message> (field: <field>)``) and a non-zero exit: 1 for a
failed call or rejected input, 2 for a usage error (``jobsched.exits``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup, _click

from jobsched.cli.apply import apply_command
from jobsched.cli.archive import archive_app
from jobsched.cli.health import health_command
from jobsched.cli.import_crontab import import_crontab_command
from jobsched.cli.jobs import jobs_app
from jobsched.cli.limits import limits_command
from jobsched.cli.run_commands import runs_app
from jobsched.cli.schedule import next_command
from jobsched.cli.smoke import smoke_command
from jobsched.cli.ui import ui_command
from jobsched.exits import USAGE_ERROR, fail
from jobsched.local.command import local_command

__all__ = ["app", "main", "register"]


class _OneLineUsageErrors(TyperGroup):
    """The root group: a usage error click finds while parsing (a flag value of the wrong type or out of range,
    an unknown option, a missing argument), at any depth of subcommands, is the CLI's one error line and exit 2
    (``jobsched.exits.fail``), not click's usage block and typer's boxed panel. Asking for help (a group run
    without a subcommand) still prints the help."""

    def make_context(self, *args: Any, **kwargs: Any) -> _click.Context:
        with _one_line_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: _click.Context) -> Any:
        with _one_line_usage_errors():
            return super().invoke(ctx)


@contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """A click ``UsageError`` raised inside, other than a request for help, becomes ``fail(..., USAGE_ERROR)``."""
    try:
        yield
    except _click.exceptions.NoArgsIsHelpError:
        raise
    except _click.exceptions.UsageError as error:
        where = f"{error.ctx.command_path}: " if error.ctx is not None else ""
        fail(f"{where}{error.format_message()}", USAGE_ERROR)


app = typer.Typer(
    cls=_OneLineUsageErrors,
    name="jobsched",
    help="jobsched: a serverless distributed job scheduler.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """jobsched: a serverless distributed job scheduler."""


app.command("next")(next_command)


def register(target: typer.Typer) -> None:
    """Add the API-facing commands (``jobs``, ``runs``, ``apply``, ``import-crontab``, ``smoke``, ``limits``,
    ``health``, ``ui``), ``archive`` and ``local``
    to the typer app ``target`` (``app`` has them; tests register them on an app of their own)."""
    target.add_typer(jobs_app, name="jobs")
    target.add_typer(runs_app, name="runs")
    target.command("apply")(apply_command)
    target.add_typer(archive_app, name="archive")
    target.command("import-crontab")(import_crontab_command)
    target.command("smoke")(smoke_command)
    target.command("limits")(limits_command)
    target.command("health")(health_command)
    target.command("ui")(ui_command)
    target.command("local")(local_command)


register(app)


def main() -> None:
    """Console-script entry point (``jobsched = jobsched.cli:main``)."""
    app()
