"""A usage error the command line's parser finds itself (a flag value of the wrong type or out of range, an
unknown option, a missing argument) is ONE line on stderr and exit 2, like the usage errors the commands find
(``jobsched.exits``): no multi-line usage block or boxed panel. No API call is made, so none is needed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from jobsched.cli import app

NO_ENV: dict[str, str | None] = {"JOBSCHED_API": None, "JOBSCHED_TOKEN": None, "JOBSCHED_SIGV4_REGION": None}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["jobs", "list", "--limit", "0"], "--limit"),
        (["jobs", "list", "--limit", "abc"], "--limit"),
        (["runs", "--all", "--limit", "-3"], "--limit"),
        (["jobs", "events", "ledger", "--limit", "0"], "--limit"),
        (["jobs", "list", "--colour"], "--colour"),
        (["jobs", "get"], "job"),
        (["next", "0 2 * * *", "--count", "many"], "--count"),
    ],
    ids=["limit 0", "limit abc", "runs limit -3", "events limit 0", "unknown option", "missing JOB", "count"],
)
def test_a_usage_error_found_by_the_parser_is_one_line_and_exit_2(args: list[str], named: str) -> None:
    result = CliRunner().invoke(app, args, env=NO_ENV)

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and named in lines[0], lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--since", "5x"), "--since"),
        (("--since", "yesterday"), "--since"),
        (("--until", "2026-03-02T10:00:00"), "--until"),  # no offset
        (("--status", "exploded"), "--status"),
        (("--kind", "sometimes"), "--kind"),
    ],
)
@pytest.mark.parametrize("which", [("--all",), ("ledger",)], ids=["runs --all", "runs JOB"])
def test_a_bad_runs_filter_is_a_usage_error_naming_the_option(cli, which, args, option) -> None:
    # As `runs retry --status dead --since yesterday` is (exit 2 naming --since), before any call; not the API's
    # 400 about `since` and exit 1
    cli("jobs", "create", "--name", "ledger", "--schedule", "0 2 * * *", "--command", "echo")

    result = cli("runs", *which, *args)

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"error: {option}"), result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    "instant",
    ["20261201T000000Z", "2026-W49-2T00:00:00Z", "2026-12-01T00Z", " 2026-12-01T00:00:00Z"],
    ids=["basic format", "week date", "hour only", "leading space"],
)
@pytest.mark.parametrize("option", ["--since", "--until"])
def test_an_instant_the_runs_filter_takes_is_one_the_api_takes(cli, option, instant) -> None:
    # The CLI checks --since/--until itself and lets through what reads as an ISO 8601 instant with its offset
    # (Python's datetime.fromisoformat); the API's since/until take RFC 3339 text only. So an instant the CLI
    # lets through must reach the API in a form it takes: expected exit 0 (no run yet), not the API's 400
    # about since/until and exit 1 for an option the CLI itself accepted.
    cli("jobs", "create", "--name", "ledger", "--schedule", "0 2 * * *", "--command", "echo")

    result = cli("runs", "--all", option, instant, "--json")

    assert result.exit_code == 0, (result.exit_code, result.stderr)
    assert json.loads(result.stdout) == []
