"""The archive's bench on a few days of runs: what it reports hangs together."""

from __future__ import annotations

import json

from bench.archive import ARCHIVE_PRICES, measure_archive, stream_batches, stream_record, synthetic_runs
from jobsched.dynamodb.layout import run_item


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


def test_a_stream_batch_stops_at_the_invocation_payload_or_the_batch_size() -> None:
    records = [stream_record(run_item(row)) for row in synthetic_runs(1)[:300]]
    sizes = [len(json.dumps(record, separators=(",", ":"))) + 1 for record in records]
    whole = stream_batches(records, 10_000)
    assert whole == [records]  # 300 records of about 1.3 KB are far below 6 MB
    assert [len(b) for b in stream_batches(records, 100)] == [100, 100, 100]
    per_record = max(sizes)
    limit = 40 * per_record + len('{"Records":[]}')
    cut = stream_batches(records, 10_000, limit)
    assert [r for batch in cut for r in batch] == records
    assert all(
        len('{"Records":[]}') + sum(len(json.dumps(r, separators=(",", ":"))) + 1 for r in batch) <= limit
        for batch in cut
    )
    assert len(cut) > 1 and all(len(batch) >= 40 for batch in cut[:-1])
