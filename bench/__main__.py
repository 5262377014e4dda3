"""``python -m bench`` (``make bench``): run every measurement, print the table, write ``bench/results.json``.

Each measurement runs in a fresh interpreter (``python -m bench --child NAME``): its own moto, its own
environment (local mode sets process-wide state) and a clean peak-memory figure. The idle poll and the client
CPU measurement (thread CPU time) run side by side, as do the two simulations (``scale_sim``, ``rush_fair``:
simulated time, deterministic); everything else runs alone: the rush and the local-mode runs
are timed, and each steady-load pass (1 KiB and 32 KiB input) measures the worker's own CPU time, which prices
its Lambda duration (beside three other passes on 2 cores it was 58 ms a batch in the session-7 sample, 28 ms
alone).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.report import assemble, table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results.json"


def _measurements(args: argparse.Namespace) -> dict[str, Callable[[], dict[str, Any]]]:
    from bench.archive import measure_archive
    from bench.client_cpu import measure_client_cpu
    from bench.cold_start import measure_cold_start
    from bench.idle import measure_idle, measure_local_tick
    from bench.paths import measure_paths
    from bench.precision import measure_precision
    from bench.rush import measure_rush
    from bench.rush_fair import measure_rush_fair
    from bench.scale_sim import measure_scale_sim
    from bench.steady import measure_steady

    quick = args.quick
    return {
        "paths_1KiB": lambda: measure_paths(1024, seconds=3 if quick else 12),
        "paths_32KiB": lambda: measure_paths(32 * 1024, seconds=3 if quick else 12),
        "idle": lambda: measure_idle((200, 2_000) if quick else (1_000, 20_000), ticks=10 if quick else None),
        "client_cpu": lambda: measure_client_cpu(100 if quick else 1000),
        "rush": lambda: measure_rush(args.rush_jobs, jitter_s=30 if quick else 300),
        "steady": lambda: measure_steady(seconds=10 if quick else 60),
        "local_tick": lambda: measure_local_tick(
            (200, 2_000) if quick else (1_000, 20_000),
            (0, 5_000) if quick else (0, 100_000),
            ticks=10 if quick else None,
        ),
        "cold_start": lambda: measure_cold_start(repeats=3 if quick else 5),
        "scale_sim": lambda: measure_scale_sim(quick=quick),
        "rush_fair": lambda: measure_rush_fair(quick=quick),
        "precision": lambda: measure_precision(seconds=10 if quick else 60),
        "archive": lambda: measure_archive(days=31 if quick else 90),
    }


GROUPS = (
    ("paths_1KiB",),
    ("paths_32KiB",),
    ("idle", "client_cpu"),
    ("rush",),
    ("steady",),
    ("local_tick",),
    ("cold_start",),
    ("scale_sim", "rush_fair"),
    ("precision",),
    ("archive",),
)


def _child(name: str, out: Path, args: argparse.Namespace) -> None:
    """Run one measurement in this process and write its result as JSON to ``out``."""
    from bench.harness import quiet_environment

    quiet_environment()
    measure = _measurements(args)[name]
    with contextlib.redirect_stdout(io.StringIO()):  # EMF metric lines of the handlers
        result = measure()
    out.write_text(json.dumps(result))


def _spawn(name: str, out: Path, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-W", "ignore", "-m", "bench", "--child", name, "--json-out", str(out)]
    command += ["--rush-jobs", str(args.rush_jobs)] + (["--quick"] if args.quick else [])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)


def _deployment() -> dict[str, Any]:
    """Memory sizes, batch size and provisioned-capacity settings of the CDK app's defaults, and the
    scheduler invocation's billed time."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    with contextlib.redirect_stdout(io.StringIO()):  # jsii's banners, if any
        from infra.config import InfraOptions
        from infra.functions import SCHEDULER_TIMEOUT_S
    from jobsched.runtime.scheduler import STOP_BEFORE_MS

    options = InfraOptions()
    return {
        "worker_memory_mb": options.worker_memory_mb,
        "worker_batch_size": options.worker_batch_size,
        "scheduler_memory_mb": options.scheduler_memory_mb,
        "scheduler_invocation_s": SCHEDULER_TIMEOUT_S - STOP_BEFORE_MS / 1000,
        "capacity_target_utilization": options.capacity_target_utilization,
        "capacity_min_read": options.capacity_min_read,
        "capacity_min_write": options.capacity_min_write,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--rush-jobs",
        type=int,
        default=None,
        help="jobs due in the same second (default 10000; 1000 with --quick)",
    )
    parser.add_argument("--only", nargs="+", choices=[n for g in GROUPS for n in g], help="run only these")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not the benchmark")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results file (default {RESULTS})")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--json-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rush_jobs is None:
        args.rush_jobs = 1_000 if args.quick else 10_000
    if args.rush_jobs < 10:
        parser.error("--rush-jobs must be at least 10")
    if args.child:
        _child(args.child, args.json_out, args)
        return 0

    wanted = set(args.only or [n for g in GROUPS for n in g])
    measured: dict[str, Any] = {}
    failed: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jobsched-bench-") as tmp:
        for group in GROUPS:
            names = [n for n in group if n in wanted]
            if not names:
                continue
            print(
                f"[{time.monotonic() - started:6.0f} s] running {', '.join(names)} ...",
                file=sys.stderr,
                flush=True,
            )
            processes = {n: _spawn(n, Path(tmp) / f"{n}.json", args) for n in names}
            for name, process in processes.items():
                code = process.wait()
                path = Path(tmp) / f"{name}.json"
                if code != 0 or not path.exists():
                    failed.append(name)
                    print(f"  {name} FAILED (exit {code}); see its traceback above", file=sys.stderr)
                    continue
                measured[name] = json.loads(path.read_text())
    elapsed = time.monotonic() - started
    results = assemble(measured, _deployment())
    results["meta"] = {
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(elapsed, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_end": list(os.getloadavg()),
        "backend": "moto (in-process mock_aws) "
        + _version("moto")
        + ", base-table Queries scoped to their partition key (bench.harness.partition_scoped_queries)",
        "rush_jobs": args.rush_jobs,
        "quick": args.quick,
        "failed": failed,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"\nwrote {args.out} in {elapsed:.0f} s", file=sys.stderr)
    return 1 if failed else 0


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    sys.exit(main())
