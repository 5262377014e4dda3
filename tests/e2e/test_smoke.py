"""``jobsched smoke`` against ``jobsched local --demo`` (what ``make run`` starts), over HTTP with the dev
token local mode saved: every step passes and the smoke job is gone afterwards."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from typer.testing import CliRunner

from jobsched.cli import app
from tests.e2e.support import LocalProcess

pytestmark = pytest.mark.e2e


def test_smoke_passes_against_local_mode_and_cleans_up(local: Callable[..., LocalProcess]) -> None:
    process = local("--demo")

    result = CliRunner().invoke(app, ["smoke", "--api", process.url, "--token", process.token, "--lead", "2"])

    assert result.exit_code == 0, result.stdout + result.stderr
    steps = [line.split()[0] for line in result.stdout.splitlines()]
    assert steps == ["smoke", "created", "replayed", "enqueued", "started", "succeeded", "cleaned", "passed"]
    assert "dispatch lateness" in result.stdout and "start lateness" in result.stdout
    names = [job["name"] for job in process.http.get("/jobs", params={"limit": "100"}).json()["items"]]
    assert names and not [name for name in names if name.startswith("smoke-")]  # the demo jobs stay
