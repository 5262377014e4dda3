"""``jobsched limits``: the caller's quotas and use (``GET /limits``), and a create over a quota as the CLI's one
error line naming the quota."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.domain.quotas import QuotaTable


@pytest.fixture
def cli_settings() -> dict[str, Any]:
    return {"quotas": QuotaTable.model_validate({"default": {"jobs": 1, "triggers_per_minute": 30}})}


def test_limits_shows_each_quota_with_its_limit_and_use(cli: Any) -> None:
    cli.json("jobs", "create", "--name", "fast", "--schedule", "every 30 seconds", "--command", "echo")

    table = cli("limits")
    shown = cli.json("limits")

    assert table.exit_code == 0, table.output
    rows = {line.split()[0]: line.split()[1:] for line in table.stdout.splitlines() if line.strip()}
    assert rows["jobs"] == ["1", "1"]
    assert rows["fires_per_minute"] == ["none", "2"]
    assert rows["triggers_per_minute"] == ["30", "0"]
    assert shown["jobs"] == {"limit": 1, "use": 1} and shown["runs_in_flight"] is None


def test_a_create_over_the_jobs_quota_is_one_error_line_naming_it(cli: Any) -> None:
    cli.json("jobs", "create", "--name", "one", "--schedule", "0 2 * * *", "--command", "echo")

    refused = cli("jobs", "create", "--name", "two", "--schedule", "0 2 * * *", "--command", "echo")

    assert refused.exit_code == 1
    assert refused.stderr.strip().startswith("error: 429 quota_exceeded:")
    assert "(field: jobs)" in refused.stderr and "limit 1, in use 1" in refused.stderr
