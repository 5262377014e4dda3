"""Dispatch precision in local mode: 200 jobs with random sub-second anchors and periods of 1-10 s, for 60 s.

The whole local runtime (``jobsched.local.runtime.LocalRuntime``, as ``bench.steady`` starts it) runs in this
process. The jobs (``every <p> seconds``, ``p`` drawn from 1-10, anchored on a random millisecond a few seconds
ahead, a no-op ``echo`` command) are written as the API would write their items, all at once
(``bench.harness``): through the API, 200 registrations take longer than the anchors are ahead while the first
jobs already fire, and the load they make is not what is measured.
Every message the run queue accepts is timed (a wrapper around ``RunQueue.send``, the adapter every sender
uses); after the window the runs whose ``scheduled_for`` falls in it are read back from the runs table. Per
run, with ``D`` its dispatch instant (``dispatch_at``: ``scheduled_for`` plus the jitter offset, 0 here):

- dispatch lateness: ``accepted - D``, ``accepted`` the first time SQS accepted a message of the run;
- start lateness: ``started_at - D`` (the claim, just before the target starts); a run not started when the
  settle time ends counts with its lateness so far (a lower bound; ``not_started`` says how many);
- early starts: runs with ``started_at < D`` (must be 0); ``sent_early``: runs whose message was accepted
  before ``D`` (0: the scheduler sends a run at its instant, never before).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench.harness import make_job, quantiles, state_of
from bench.steady import _window_rows, local_runtime

JOBS = 200
PERIODS_S = range(1, 11)


def measure_precision(
    jobs: int = JOBS,
    *,
    seconds: int = 60,
    warmup_s: int = 5,
    workers: int = 4,
    lookahead_ms: int | None = None,
    settle_timeout_s: float = 20.0,
    seed: int = 20261201,
) -> dict[str, Any]:
    """Run the load and return ``{"jobs", "seconds", "workers", "lookahead_ms", "runs", "expected_runs",
    "runs_per_s", "dispatch_lateness_ms": {"p50", "p99", "max"...}, "start_lateness_ms": {...},
    "early_starts", "sent_early", "not_started", "statuses"}``.

    ``lookahead_ms``: the deployment's ``dispatch_lookahead_ms`` (None: its default). Raises RuntimeError if
    the window holds no runs.
    """
    from jobsched.aws.queue import RunQueue

    rng = random.Random(seed)
    accepted: dict[tuple[str, int], int] = {}
    lock = threading.Lock()
    send = RunQueue.send

    def timed_send(queue: RunQueue, messages: Sequence[Any]) -> None:
        send(queue, messages)  # raises on refusal: refused messages are sent again later, and timed then
        at = time.time_ns() // 1_000_000
        with lock:
            for message in messages:
                accepted.setdefault((message.job_id, message.scheduled_for), at)

    extra = {} if lookahead_ms is None else {"dispatch_lookahead_ms": lookahead_ms}
    lines: list[str] = []
    RunQueue.send = timed_send  # type: ignore[method-assign,assignment]
    try:
        with local_runtime(workers=workers, emit=lines.append, settings=extra) as runtime:
            components = runtime.components
            assert components is not None  # set by start()
            settings = components.settings
            store = components.jobs()
            base = (time.time_ns() // 1_000_000 // 1000 + 3) * 1000
            for i in range(jobs):
                anchor = base + rng.randrange(1, 1000)  # rates fire from created_at: never on a whole second
                job = make_job(
                    i, f"every {rng.choice(PERIODS_S)} seconds", created_at_ms=anchor, prefix="j_prec"
                )
                # through the job store local mode schedules from (its SQLite database by default)
                store.create(job, state_of(job, settings, now_ms=anchor - 1))
            window_start = base + warmup_s * 1000
            window_end = window_start + seconds * 1000
            time.sleep(max(0.0, window_end / 1000 - time.time()))
            rows = _window_rows(runtime, window_start, window_end)
            deadline = time.monotonic() + settle_timeout_s
            while any(r.get("started_at") is None for r in rows) and time.monotonic() < deadline:
                time.sleep(1.0)
                rows = _window_rows(runtime, window_start, window_end)
            read_at = time.time_ns() // 1_000_000
    finally:
        RunQueue.send = send  # type: ignore[method-assign]
    if not rows:
        raise RuntimeError("no runs in the measuring window: local mode did not schedule the jobs")
    return summarize(rows, accepted, read_at=read_at) | {
        "jobs": jobs,
        "seconds": seconds,
        "runs_per_s": len(rows) / seconds,
        "workers": workers,
        "lookahead_ms": settings.dispatch_lookahead_ms,
        "expected_runs": round(sum(seconds / p for p in PERIODS_S) * jobs / len(PERIODS_S)),
    }


def summarize(
    rows: Sequence[dict[str, Any]], accepted: dict[tuple[str, int], int], *, read_at: int
) -> dict[str, Any]:
    """The figures of the module docstring from the window's run rows (plain values) and the first time
    SQS accepted a message of each run (``(job_id, scheduled_for) -> epoch ms``)."""
    dispatch: list[int] = []
    start: list[int] = []
    early = sent_early = not_started = unsent = 0
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        instant = int(row.get("dispatch_at", row["scheduled_for"]))
        sent = accepted.get((row["job_id"], int(row["scheduled_for"])))
        if sent is None:
            unsent += 1
        else:
            dispatch.append(sent - instant)
            sent_early += sent < instant
        if row.get("started_at") is None:
            not_started += 1
            start.append(read_at - instant)
            continue
        started = int(row["started_at"])
        start.append(started - instant)
        early += started < instant
    return {
        "runs": len(rows),
        "dispatch_lateness_ms": quantiles(dispatch),
        "start_lateness_ms": quantiles(start),
        "early_starts": early,
        "sent_early": sent_early,
        "not_started": not_started,
        "not_seen_sent": unsent,
        "statuses": statuses,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.precision``: one precision run with its knobs, printed as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.precision", description=__doc__)
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"jobs (default {JOBS})")
    parser.add_argument("--seconds", type=int, default=60, help="measuring window, s (default 60)")
    parser.add_argument("--workers", type=int, default=4, help="local worker pollers (default 4)")
    parser.add_argument("--lookahead-ms", type=int, help="dispatch_lookahead_ms (default: the setting's)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.seconds < 1 or args.workers < 1:
        parser.error("--jobs, --seconds and --workers must be at least 1")
    if args.lookahead_ms is not None and not 0 <= args.lookahead_ms <= 1000:
        parser.error("--lookahead-ms must be 0-1000")
    from bench.harness import quiet_environment

    quiet_environment()
    with contextlib.redirect_stdout(io.StringIO()):  # EMF metric lines of the handlers
        out = measure_precision(
            args.jobs, seconds=args.seconds, workers=args.workers, lookahead_ms=args.lookahead_ms
        )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
