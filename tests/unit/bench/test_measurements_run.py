"""Every measurement of ``make bench`` still runs against the code it measures.

The measurements import jobsched's modules inside their functions (so that each runs in a fresh interpreter
with its own environment), so a moved or renamed module, or a changed store signature, breaks ``make bench``
without breaking an import at collection time. These tests import every bench module and run the cheap
measurements at tiny sizes on moto (no timing is asserted: speed targets live in ``make bench``), checking
they return the ``bench/results.json`` keys ``bench/report.py`` reads.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterator

import pytest

import bench


@pytest.fixture(autouse=True)
def _restored_environment() -> Iterator[None]:
    """The measurements set fake AWS credentials and moto flags in ``os.environ``: undo it after each test."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_every_bench_module_imports() -> None:
    names = [info.name for info in pkgutil.iter_modules(bench.__path__) if info.name != "__main__"]
    assert {"client_cpu", "rush", "paths", "idle", "steady", "scale_sim", "cold_start"} <= set(names)
    for name in names:
        importlib.import_module(f"bench.{name}")


def test_client_cpu_measures_each_step_of_the_scheduler() -> None:
    from bench.client_cpu import measure_client_cpu

    out = measure_client_cpu(repeat=2)

    assert set(out) == {"plan_ms", "put_ms", "move_ms", "send_batch_ms", "per_run_ms", "runs_per_vcpu_s"}
    assert all(value > 0 for value in out.values())
    assert out["per_run_ms"] == pytest.approx(out["plan_ms"] + out["move_ms"] + out["send_batch_ms"] / 10)


def test_a_tiny_rush_enqueues_every_run_and_measures_the_raw_rates() -> None:
    from bench.rush import measure_rush

    out = measure_rush(6, jitter_s=2, raw_batches=5)

    assert out["enqueued"] == 6 and out["complete"] is True
    assert out["jittered"] == 3
    assert out["missing"] == {"count": 0}
    assert out["tick_errors"] == 0 and out["aborted_ticks"] == 0
    for key in (
        "efficiency_vs_raw",
        "efficiency_vs_backend_bound",
        "efficiency_vs_backend_bound_writes_only",
        "raw_due_entries_read_per_s",
        "raw_states_read_per_s",
        "raw_conditional_puts_per_s",
        "raw_job_moves_per_s",
        "raw_send_batches_per_s",
    ):
        assert out[key] > 0, key
    assert out["lateness_ms"]["p50"] >= 0
