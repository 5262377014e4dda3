"""`jobsched next` against what a job registered with the same schedule at the same instant runs."""

from __future__ import annotations

from datetime import UTC, datetime

from typer.testing import CliRunner

from jobsched.cli import app
from jobsched.schedule.engine import validate_schedule

runner = CliRunner()


def test_a_one_off_within_the_registration_grace_is_shown_as_the_scheduler_runs_it() -> None:
    """A one-off less than 60 s in the past is accepted and runs once, now; ``jobsched next`` shows that fire
    (exit 0 with nothing printed would say "no fire" for a job that runs)."""
    now = datetime(2026, 12, 4, 18, 0, 30, tzinfo=UTC)
    registered = validate_schedule("at 2026-12-04T18:00:00Z", "UTC", now=now).first_fire(now)
    assert registered is not None  # what a job created at `now` runs (registration's first fire)

    result = runner.invoke(app, ["next", "at 2026-12-04T18:00:00Z", "--after", now.isoformat()])

    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [registered.isoformat()]
