"""``jobsched health``: the scheduler's dispatch lateness per priority and for the top owners by backlog
(``GET /health``, from the partitions' lateness summaries: the metrics' figures, design §8)."""

from __future__ import annotations

from typing import Any

from jobsched.aws.clients import Aws
from jobsched.aws.lateness import JsonLateness
from jobsched.dynamodb.control import ControlStore
from jobsched.ports.lateness import OTHER_OWNERS, LatenessFigures, LatenessLabels, LatenessSummary
from jobsched.settings import Settings

T0 = 1_767_578_400_000


def test_with_no_summary_health_says_nothing_was_dispatched(cli: Any) -> None:
    shown = cli("health")

    assert shown.exit_code == 0, shown.output
    assert shown.stdout.strip() == "no runs dispatched yet"
    assert cli.json("health")["reporting"] == 0


def test_health_shows_every_owner_then_the_top_owners_then_the_others(
    cli: Any, deployment: tuple[Aws, Settings]
) -> None:
    # Given a saved summary where another team had the largest backlog
    aws, settings = deployment
    figures = LatenessFigures(runs=4, p50_ms=1_500, p99_ms=9_000, max_ms=9_500)
    summary = LatenessSummary(
        partition=0,
        since_ms=T0,
        at_ms=T0 + 60_000,
        term=1,
        groups=(
            (LatenessLabels("high", "big-team"), figures),
            (LatenessLabels("normal", "big-team"), figures),
            (LatenessLabels("normal", OTHER_OWNERS), figures),
        ),
        priorities=(("high", figures), ("normal", LatenessFigures(8, 1_500, 9_000, 9_500))),
        backlog=(("big-team", 90_000),),
    )
    ControlStore(aws.dynamodb, settings.control_table).save_lateness(
        0, JsonLateness().encode(summary), term=1
    )

    shown = cli("health")

    # Then the window, every owner per priority, the other team unnamed with its backlog, and the rest
    assert shown.exit_code == 0, shown.output
    lines = [line.split() for line in shown.stdout.splitlines() if line.strip()]
    assert lines[0][:2] == ["window", "2026-01-05"]
    assert ["all", "owners", "-", "high", "4", "1.50s", "9.00s", "9.50s"] in lines
    assert ["normal", "8", "1.50s", "9.00s", "9.50s"] in lines
    assert ["#1", "another", "owner", "90000", "high", "4", "1.50s", "9.00s", "9.50s"] in lines
    assert ["other", "owners", "-", "normal", "4", "1.50s", "9.00s", "9.50s"] in lines
    assert "big-team" not in shown.stdout


def test_a_top_owner_with_no_run_dispatched_in_the_window_keeps_its_row() -> None:
    """An owner whose whole backlog was skipped or held (no run dispatched in the window) is still a top owner: the
    table shows its rank and backlog with no figures, instead of leaving the rank out."""
    from jobsched.cli.health import health_rows

    line = {"priority": "normal", "runs": 3, "p50_ms": 1_000, "p99_ms": 2_000, "max_ms": 2_000}
    health = {
        "by_priority": [line],
        "top_owners": [
            {"rank": 1, "owner": "team-a", "you": True, "backlog": 500, "by_priority": []},
            {"rank": 2, "owner": None, "you": False, "backlog": 300, "by_priority": [line]},
        ],
        "other": [],
    }

    rows = health_rows(health)

    assert ("#1 you (team-a)", "500", "-", "0", "-", "-", "-") in rows
    assert [row[0] for row in rows if row[0]] == ["all owners", "#1 you (team-a)", "#2 another owner"]
