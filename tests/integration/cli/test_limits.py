"""A ``--limit`` below 1 is a usage error naming the option (exit 2), not an empty table that reads as "no
events" or "no runs"."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "args",
    [("jobs", "events", "ledger"), ("runs", "ledger"), ("runs", "--all"), ("jobs", "list")],
    ids=["jobs events", "runs", "runs --all", "jobs list"],
)
@pytest.mark.parametrize("limit", ["0", "-3"])
def test_a_limit_below_one_is_refused_naming_the_option(cli, args, limit) -> None:
    cli("jobs", "create", "--name", "ledger", "--schedule", "0 2 * * *", "--command", "echo")

    result = cli(*args, "--limit", limit)

    assert result.exit_code == 2, result.stdout
    assert "--limit" in result.stderr and result.stdout == ""
