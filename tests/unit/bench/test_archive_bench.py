"""The archive's bench on a few days of runs: what it reports hangs together."""

from __future__ import annotations

from bench.archive import ARCHIVE_PRICES, measure_archive


def test_the_archive_bench_reports_bytes_cost_and_scans_that_hang_together() -> None:
    figures = measure_archive(days=3, batch_size=400, memory_mb=256)
    assert figures["runs"] == 3 * 48 * 30
    assert 0 < figures["bytes_per_run"] < figures["dynamodb_item_bytes"]
    assert figures["objects"] * figures["rows_per_object"] == figures["runs"]
    items = figures["usd_items"]
    assert abs(items["total"] - sum(v for k, v in items.items() if k != "total")) < 1e-12
    assert figures["usd_per_million_runs_per_year"] == items["total"]
    # a year of a million items of this size in DynamoDB Standard, each with its 100 bytes of overhead
    gib = (figures["dynamodb_item_bytes"] + 100) * 1_000_000 / 1024**3
    assert (
        abs(
            figures["dynamodb_usd_per_million_runs_per_year"]
            - gib * ARCHIVE_PRICES.dynamodb_standard_gb_month * 12
        )
        < 1e-9
    )
    # three days are in one month: the month's scan and the quarter's read the same objects of one owner
    assert 0 < figures["scan_bytes_one_job_month"] == figures["scan_bytes_dead_runs_owner_quarter"]
    assert figures["scan_bytes_one_job_month"] < figures["bytes_per_run"] * figures["runs"]
