"""Steady lateness in local mode: 50 jobs ``every 1 second`` (50 runs a second) for 60 s.

The whole local runtime (``jobsched.local.runtime.LocalRuntime`` on its default SQLite backend: jobs, runs and
leases in SQLite, the queues on the embedded moto, the API on a free port,
the scheduler loop, the worker pool fed the way Lambda's SQS event source does, the sweeper, snapshots to a
temporary data dir) is started in this process; the jobs are registered over HTTP with the runtime's dev
token, as a team's script would. After a warm-up, the runs whose ``scheduled_for`` falls in the measuring
window are read back from the run store once they have finished: ``lateness_ms`` (the run row's own
field: start minus ``scheduled_for``) and the dispatch lateness (``enqueued_at`` minus the dispatch
instant).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.harness import quantiles

DISPATCH_GRACE_S = 2.0
"""The window's rows are first read this long after its end: a fire a few ms before the end is dispatched at
the next tick (up to a second later, as lateness says), and must not count as not created."""


@contextlib.contextmanager
def local_runtime(**config: Any) -> Iterator[Any]:
    """Local mode started on a fresh temporary data directory, on a free port, logging errors only, with
    ``config`` (``LocalConfig`` fields: ``workers``, ``emit``, ``backend``, ``settings``...); stopped on exit."""
    from jobsched.local.config import LocalConfig
    from jobsched.local.runtime import LocalRuntime

    with tempfile.TemporaryDirectory(prefix="jobsched-bench-") as data_dir:
        runtime = LocalRuntime(LocalConfig(port=0, data_dir=Path(data_dir), log_level="ERROR", **config))
        runtime.start()
        try:
            yield runtime
        finally:
            runtime.stop()


def measure_steady(
    jobs: int = 50,
    *,
    seconds: int = 60,
    warmup_s: int = 5,
    workers: int = 4,
    settle_timeout_s: float = 20.0,
    backend: str = "sqlite",
) -> dict[str, Any]:
    """Run the steady load on local mode's ``backend`` (``sqlite``, its default, or ``moto``) and return
    ``{"jobs", "seconds", "backend", "runs", "runs_per_s", "lateness_ms": {"p50", "p99", "max"},
    "dispatch_lateness_ms": {...}, "statuses", "not_started", ...}``.

    Runs of the window not started ``settle_timeout_s`` after it ended (the workers fell behind) count in
    ``lateness_ms`` with their lateness so far, a lower bound (``not_started`` says how many);
    ``lateness_ms_started`` is over the started runs only. Raises RuntimeError if the window holds no runs.
    """
    from jobsched.client import JobschedClient

    lines: list[str] = []
    with local_runtime(workers=workers, emit=lines.append, backend=backend) as runtime:
        registered = time.time()
        with JobschedClient(runtime.url, token=runtime.token) as client:
            for i in range(jobs):
                client.create_job({"name": f"steady-{i}", "schedule": "every 1 second", "command": "echo"})
        window_start = int((time.time() + warmup_s) * 1000)
        window_end = window_start + seconds * 1000
        # the window's last fires are dispatched at the next whole-second tick: read once it has run
        time.sleep(max(0.0, window_end / 1000 + DISPATCH_GRACE_S - time.time()))
        rows = _window_rows(runtime, window_start, window_end)
        deadline = time.monotonic() + settle_timeout_s
        while (
            any(r["status"] in ("queued", "running", "retrying") for r in rows)
            and time.monotonic() < deadline
        ):
            time.sleep(1.0)
            rows = _window_rows(runtime, window_start, window_end)
        read_at = int(time.time() * 1000)
        registration_s = window_start / 1000 - warmup_s - registered
    if not rows:
        raise RuntimeError("no runs in the measuring window: local mode did not schedule the jobs")
    started = [r for r in rows if r.get("lateness_ms") is not None]
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    lateness_started = [int(r["lateness_ms"]) for r in started]
    lateness = lateness_started + [
        read_at - int(r["scheduled_for"]) for r in rows if r.get("lateness_ms") is None
    ]
    dispatch = [int(r["enqueued_at"]) - int(r.get("dispatch_at", r["scheduled_for"])) for r in rows]
    return {
        "jobs": jobs,
        "seconds": seconds,
        "backend": backend,
        "workers": workers,
        "registration_s": registration_s,
        "runs": len(rows),
        "expected_runs": jobs * seconds,
        "runs_per_s": len(rows) / seconds,
        "lateness_ms": quantiles(lateness),
        "lateness_ms_started": quantiles(lateness_started),
        "not_started": len(rows) - len(started),
        "dispatch_lateness_ms": quantiles(dispatch),
        "statuses": statuses,
        "unfinished": sum(n for s, n in statuses.items() if s in ("queued", "running", "retrying")),
    }


def _window_rows(runtime: Any, start_ms: int, end_ms: int) -> list[dict[str, Any]]:
    """Run rows (plain values) with ``start_ms <= scheduled_for < end_ms``, read from the local ``runtime``'s
    run store: its SQLite database, or on the moto backend the runs table (on clients of this thread's own)."""
    if runtime.database is not None:
        from dataclasses import asdict

        stored = runtime.components.runs().scheduled_between(start_ms, end_ms)
        return [{**asdict(r), "status": r.status.value} for r in stored]
    from boto3.dynamodb.conditions import Attr

    from jobsched.dynamodb.layout import plain

    components = runtime.components.with_own_clients()
    table = components.aws.table(components.settings.runs_table)
    rows: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"FilterExpression": Attr("scheduled_for").between(start_ms, end_ms - 1)}
    while True:
        page = table.scan(**kwargs)
        rows.extend(plain(i) for i in page["Items"])
        if "LastEvaluatedKey" not in page:
            return rows
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
