"""The idle poll: what a tick costs when nothing is due, with few and with many jobs.

Jobs are scheduling items (``sched_item``) whose next fire is between 1 and 25 hours ahead, spread over the
day, so every tick finds nothing due but the due index holds every job. The scheduler loop is the production
one (``Components.scheduler_loop``) on a FakeClock; after two warm-up ticks (lease acquisition, watermark
bootstrap: per invocation, not per tick), both starting at the same phase of a bucket, it ticks once a
simulated second for ``ticks`` seconds (one bucket width by default, so the once-a-bucket watermark write is
counted once and the ticks that still read the previous bucket are counted in their true proportion) and the requests and read/write
units are divided by the ticks. Then more jobs are added and the same loop is measured again: the SPEC says
an idle poll costs the same with 1,000 or 10,000,000 jobs, so ``growth_ratio`` should be 1.
"""

from __future__ import annotations

import time
from typing import Any

from bench.counting import RequestLog, counting_aws, probe_client
from bench.harness import T0, NoTickMetrics, make_job, moto_backend, sched_of, write_items

DAY_MS = 86_400_000


def _seed(backend: Any, start: int, count: int, now_ms: int) -> None:
    from jobsched.aws import Aws

    settings = backend.settings
    items = []
    for i in range(start, start + count):
        job = make_job(i, "0 3 * * *", created_at_ms=now_ms, prefix="j_idle")
        next_run = now_ms + 3_600_000 + (i * 7919 * 1000) % DAY_MS  # 1 h to 25 h ahead, spread
        items.append(sched_of(job, settings, now_ms=now_ms, next_run_at_ms=next_run))
    write_items(Aws().table(settings.jobs_table), items)


def measure_idle(
    job_counts: tuple[int, ...] = (1_000, 20_000), *, ticks: int | None = None
) -> dict[str, Any]:
    """Requests (and units) per idle tick for each job count (ascending), and the growth ratio of the last
    to the first. Returns ``{"jobs_<n>": {"jobs", "ticks", "requests_per_tick", "operations", "rcu_per_tick",
    "wcu_per_tick", "wall_ms_per_tick"}, ..., "growth_ratio"}``. Raises RuntimeError if a tick found work."""
    from jobsched.clock import FakeClock
    from jobsched.wiring import Components

    out: dict[str, Any] = {}
    with moto_backend() as backend:
        settings = backend.settings
        ticks = ticks or settings.due_bucket_s
        clock = FakeClock(T0)
        log = RequestLog(backend.tables, probe_client())
        log.enabled = False
        loop = Components(
            settings, counting_aws(log, "scheduler"), clock=clock, sleep=clock.sleep
        ).scheduler_loop(0, holder="bench-idle", tick_metrics=NoTickMetrics())
        seeded = 0
        try:
            for count in sorted(job_counts):
                _seed(backend, seeded, count - seeded, clock())
                seeded = count
                # Start each measurement at the same phase of a bucket (the previous bucket is read until it is
                # drained, so the phase decides how many queries a tick makes): jump to the next bucket
                # boundary, then two warm-up ticks (lease, watermark bootstrap or catch-up).
                bucket_ms = settings.due_bucket_s * 1000
                clock.now_ms = (clock.now_ms // bucket_ms + 1) * bucket_ms
                for _ in range(2):
                    clock.now_ms += 1000
                    loop.step()
                log.reset()
                log.enabled = True
                wall = 0.0
                for _ in range(ticks):
                    clock.now_ms = (clock.now_ms // 1000 + 1) * 1000
                    started = time.perf_counter()
                    result = loop.step()
                    wall += time.perf_counter() - started
                    if result is None or result.due:
                        raise RuntimeError(f"an idle tick was not idle: {result}")
                log.enabled = False
                out[f"jobs_{count}"] = {
                    "jobs": count,
                    "ticks": ticks,
                    "requests_per_tick": log.request_count("scheduler") / ticks,
                    "operations": log.operations("scheduler"),
                    "rcu_per_tick": log.rcu("scheduler") / ticks,
                    "wcu_per_tick": log.wcu("scheduler") / ticks,
                    "wall_ms_per_tick": wall * 1000 / ticks,
                }
        finally:
            loop.scheduler.close()
    first, last = out[f"jobs_{min(job_counts)}"], out[f"jobs_{max(job_counts)}"]
    out["growth_ratio"] = last["requests_per_tick"] / first["requests_per_tick"]
    out["rcu_growth_ratio"] = last["rcu_per_tick"] / first["rcu_per_tick"] if first["rcu_per_tick"] else None
    return out
