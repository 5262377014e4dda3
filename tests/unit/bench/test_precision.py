"""bench.precision's figures from run rows and send times (pure; the run itself is ``make bench``'s)."""

from __future__ import annotations

from bench.precision import summarize
from bench.report import TARGETS, assemble


def test_dispatch_start_and_early_figures_count_from_the_dispatch_instant() -> None:
    rows = [
        # sent 300 ms early (a bug: counted), started 4 ms after its instant
        {
            "job_id": "a",
            "scheduled_for": 10_400,
            "dispatch_at": 10_400,
            "status": "succeeded",
            "started_at": 10_404,
        },
        # sent 120 ms late (found by the tick after its instant), started 150 ms late
        {
            "job_id": "b",
            "scheduled_for": 11_000,
            "dispatch_at": 11_000,
            "status": "succeeded",
            "started_at": 11_150,
        },
        # started before its instant: an early start
        {
            "job_id": "c",
            "scheduled_for": 12_500,
            "dispatch_at": 12_500,
            "status": "running",
            "started_at": 12_499,
        },
        # never started by the read: late by the read time so far; its send was never seen
        {"job_id": "d", "scheduled_for": 13_000, "status": "queued"},
    ]
    accepted = {("a", 10_400): 10_100, ("b", 11_000): 11_120, ("c", 12_500): 12_000}
    out = summarize(rows, accepted, read_at=15_000)
    assert out["runs"] == 4 and out["early_starts"] == 1 and out["not_started"] == 1
    assert out["not_seen_sent"] == 1 and out["sent_early"] == 2
    assert out["dispatch_lateness_ms"] == {"p50": -300.0, "p99": 120.0, "max": 120.0}
    assert out["start_lateness_ms"]["max"] == 2_000.0 and out["start_lateness_ms"]["p50"] == 4.0
    assert out["statuses"] == {"succeeded": 2, "running": 1, "queued": 1}


def test_the_precision_targets_are_checked_in_the_results() -> None:
    figure = {
        "dispatch_lateness_ms": {"p50": 0.0, "p99": 80.0, "max": 90.0},
        "start_lateness_ms": {"p50": 5.0, "p99": 320.0, "max": 400.0},
        "early_starts": 0,
    }
    results = assemble({"precision": figure}, {})
    checked = {t["key"]: t["pass"] for t in results["targets"] if t["key"].startswith("precision.")}
    assert checked == {
        "precision.dispatch_lateness_ms.p99": True,
        "precision.start_lateness_ms.p99": False,
        "precision.early_starts": True,
    }
    assert {t.key for t in TARGETS} >= set(checked)
