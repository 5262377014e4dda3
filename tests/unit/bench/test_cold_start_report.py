"""The cold-import measurement lands in the results document under ``cold_import_s`` and in the table."""

from __future__ import annotations

from bench.report import assemble, table

DEPLOYMENT = {
    "worker_memory_mb": 512,
    "worker_batch_size": 10,
    "scheduler_memory_mb": 512,
    "scheduler_invocation_s": 67,
}


def test_cold_import_figures_are_reported_per_handler() -> None:
    measured = {
        "cold_start": {
            "python": "3.12.1",
            "repeats": 5,
            "handlers": {"api": {"bytecode_s": 0.35, "source_s": 1.0, "speedup": 2.86}},
            "asset_pyc_files": 700,
        }
    }
    results = assemble(measured, DEPLOYMENT)
    assert results["cold_import_s"] == measured["cold_start"]
    printed = table(results)
    assert "cold import s, api handler (3.12, bytecode)  0.35" in printed
    assert "cold import s, api handler (3.12, source)    1" in printed
