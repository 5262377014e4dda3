"""`jobsched next`: fire instants one per line; bad input exits 2 with one line on stderr."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from jobsched.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, list[str], list[str]]:
    result = runner.invoke(app, ["next", *args])
    return result.exit_code, result.stdout.splitlines(), result.stderr.splitlines()


def test_issue_example_berlin_fall_back() -> None:
    code, out, err = run(
        "0 2 * * *", "--tz", "Europe/Berlin", "--after", "2023-10-28T02:00:00+02:00", "--count", "3"
    )
    assert (code, err) == (0, [])
    assert out == ["2023-10-29T02:00:00+02:00", "2023-10-30T02:00:00+01:00", "2023-10-31T02:00:00+01:00"]


def test_default_count_is_five_in_utc() -> None:
    code, out, _ = run("*/7 * * * *", "--after", "2024-01-01T10:50:00Z")
    assert code == 0
    assert out == [
        "2024-01-01T10:56:00+00:00",
        "2024-01-01T11:00:00+00:00",
        "2024-01-01T11:07:00+00:00",
        "2024-01-01T11:14:00+00:00",
        "2024-01-01T11:21:00+00:00",
    ]


def test_naive_after_is_in_the_given_zone() -> None:
    code, out, _ = run(
        "0 * * * *", "--tz", "America/Los_Angeles", "--after", "2026-11-01T00:30:00", "--count", "3"
    )
    assert code == 0
    assert out == ["2026-11-01T01:00:00-07:00", "2026-11-01T01:00:00-08:00", "2026-11-01T02:00:00-08:00"]


def test_rate_is_anchored_at_after() -> None:
    code, out, _ = run("rate(90 minutes)", "--after", "2024-01-01T00:00:00Z", "--count", "2")
    assert code == 0
    assert out == ["2024-01-01T01:30:00+00:00", "2024-01-01T03:00:00+00:00"]


def test_one_off_prints_one_line() -> None:
    code, out, _ = run("at 2030-01-01T09:00:00", "--tz", "Asia/Kolkata", "--after", "2029-12-31T00:00:00Z")
    assert code == 0
    assert out == ["2030-01-01T09:00:00+05:30"]


def test_after_defaults_to_now() -> None:
    before = datetime.now(UTC)
    code, out, _ = run("* * * * * *", "--count", "2")
    assert code == 0
    fires = [datetime.fromisoformat(line) for line in out]
    assert len(fires) == 2
    assert before < fires[0] < fires[1]


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        (["0 2 * *"], "error: schedule: "),
        (["@reboot"], "error: schedule: "),
        (["0 0 30 2 *"], "error: schedule: "),
        (["0 2 * * *", "--tz", "PST"], "error: timezone: "),
        (["0 2 * * *", "--tz", "Pacific Standard Time"], "error: timezone: "),
        (["0 2 * * *", "--tz", ""], "error: timezone: "),
        (["0 2 * * *", "--after", "yesterday"], "error: after: "),
        (["0 2 * * *", "--count", "0"], "error: count: "),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], prefix: str) -> None:
    code, out, err = run(*args)
    assert code == 2
    assert out == []
    assert len(err) == 1 and err[0].startswith(prefix)


def test_app_keeps_next_as_a_subcommand() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "next" in result.stdout


def test_a_sub_millisecond_after_keeps_the_fire_right_after_it() -> None:
    # With instants in whole milliseconds (design §1): --after is a bound, not a fire, so it is not rounded
    # up (rounding it would lose the last second of year 9999)
    code, out, err = run(
        "* * * * * *", "--tz", "UTC", "--after", "9999-12-31T23:59:58.999999Z", "--count", "3"
    )
    assert (code, out, err) == (0, ["9999-12-31T23:59:59+00:00"], [])
    code, out, _ = run("at 2026-03-02T10:00:30.0004Z", "--after", "2026-03-02T10:00:00Z")
    assert (code, out) == (0, ["2026-03-02T10:00:30.001000+00:00"])
