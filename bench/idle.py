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
    from jobsched.aws.clients import Aws

    settings = backend.settings
    items = []
    for i in range(start, start + count):
        job = make_job(i, "0 3 * * *", created_at_ms=now_ms, prefix="j_idle")
        next_run = now_ms + 3_600_000 + (i * 7919 * 1000) % DAY_MS  # 1 h to 25 h ahead, spread
        items += sched_of(job, settings, now_ms=now_ms, next_run_at_ms=next_run)
    write_items(Aws().table(settings.jobs_table), items)


def measure_idle(
    job_counts: tuple[int, ...] = (1_000, 20_000), *, ticks: int | None = None
) -> dict[str, Any]:
    """Requests (and units) per idle tick for each job count (ascending), and the growth ratio of the last
    to the first. Returns ``{"jobs_<n>": {"jobs", "ticks", "requests_per_tick", "operations", "rcu_per_tick",
    "wcu_per_tick", "wall_ms_per_tick"}, ..., "growth_ratio"}``. Raises RuntimeError if a tick found work."""
    from jobsched.clock import FakeClock
    from jobsched.runtime.wiring import Components

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


def measure_local_tick(
    job_counts: tuple[int, int] = (1_000, 20_000),
    history_rows: tuple[int, int] = (0, 100_000),
    *,
    ticks: int | None = None,
    busy_jobs: int = 50,
    busy_ticks: int = 60,
) -> dict[str, Any]:
    """Wall time of local mode's scheduler tick on its SQLite backend (``jobsched.local.components.SqliteComponents``:
    the SQLite job, run and CONTROL stores, the run queue on ``SqliteSqsQueue``), in this process, each
    deployment on a FakeClock (one tick per simulated second, timed in real seconds). Two pairs of
    deployments, each on a database of its own, whose ticks alternate (A, B, A, B...) so that the machine's
    other load falls on both sides of a ratio alike:

    - idle ticks (the jobs' next fires 1 to 25 hours ahead) with ``job_counts[0]`` and ``job_counts[1]`` jobs,
      ``ticks`` each (one bucket width by default, as :func:`measure_idle`);
    - busy ticks (``busy_jobs`` jobs ``every 1 second``, each tick saving, sending and moving that many runs,
      as ``steady``) with ``history_rows[0]`` and ``history_rows[1]`` finished runs already in the history (of
      those jobs and of 5,000 others), ``busy_ticks`` each.

    Returns ``{"jobs_<n>": {"jobs", "ticks", "wall_ms_per_tick" (mean), "wall_ms_p50", "wall_ms_max"}, ...,
    "history_<n>": {"history_rows", "ticks", "runs_per_tick", "wall_ms_..."}, ..., "growth_ratio_jobs",
    "growth_ratio_history"}`` (the second's median tick time over the first's). Raises RuntimeError if an idle
    tick found work or a busy one did not save its runs."""
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    from bench.harness import state_of
    from jobsched.aws.clients import Aws
    from jobsched.clock import FakeClock
    from jobsched.domain.runs import new_run
    from jobsched.local.components import SqliteComponents
    from jobsched.models import RunStatus
    from jobsched.sqlite.database import SqliteDatabase

    out: dict[str, Any] = {}
    with moto_backend() as backend, tempfile.TemporaryDirectory(prefix="jobsched-local-tick-") as folder:
        settings = backend.settings
        bucket_ms = settings.due_bucket_s * 1000
        opened: list[Any] = []

        class Deployment:
            def __init__(self, name: str) -> None:
                self.database = SqliteDatabase(Path(folder) / f"{name}.sqlite3")
                self.clock = FakeClock(T0)
                components = SqliteComponents(
                    settings, Aws(), clock=self.clock, sleep=self.clock.sleep, database=self.database
                )
                self.jobs, self.runs = components.jobs(), components.runs()
                self.loop = components.scheduler_loop(0, holder=f"bench-{name}", tick_metrics=NoTickMetrics())
                opened.append(self)

            def tick(self, *, idle: bool) -> tuple[float, int]:
                self.clock.now_ms = (self.clock.now_ms // 1000 + 1) * 1000
                started = time.perf_counter()
                result = self.loop.step()
                wall = (time.perf_counter() - started) * 1000
                if result is None or (idle and result.due):
                    raise RuntimeError(f"a local tick was not what it should be: {result}")
                return wall, result.due

        def alternate(pair: list[Deployment], count: int, *, idle: bool) -> list[tuple[list[float], int]]:
            walls: list[list[float]] = [[], []]
            saved = [0, 0]
            for _ in range(count):
                for side, deployment in enumerate(pair):
                    wall, due = deployment.tick(idle=idle)
                    walls[side].append(wall)
                    saved[side] += due
            return [(walls[side], saved[side]) for side in (0, 1)]

        def figures(walls: list[float]) -> dict[str, Any]:
            ordered = sorted(walls)
            return {
                "wall_ms_per_tick": sum(walls) / len(walls),
                "wall_ms_p50": ordered[len(ordered) // 2],
                "wall_ms_max": ordered[-1],
            }

        try:
            idle_pair = [Deployment(f"jobs-{count}") for count in job_counts]
            for deployment, count in zip(idle_pair, job_counts, strict=True):
                now = deployment.clock()
                for i in range(count):
                    job = make_job(i, "0 3 * * *", created_at_ms=now, prefix="j_idle")
                    next_run = now + 3_600_000 + (i * 7919 * 1000) % DAY_MS
                    deployment.jobs.create(job, state_of(job, settings, now_ms=now, next_run_at_ms=next_run))
                deployment.clock.now_ms = (now // bucket_ms + 1) * bucket_ms
            alternate(idle_pair, 2, idle=True)  # lease, watermark bootstrap
            n = ticks or settings.due_bucket_s
            for count, (walls, _) in zip(job_counts, alternate(idle_pair, n, idle=True), strict=True):
                out[f"jobs_{count}"] = {"jobs": count, "ticks": n, **figures(walls)}

            busy_pair = [Deployment(f"history-{rows}") for rows in history_rows]
            for deployment, rows in zip(busy_pair, history_rows, strict=True):
                now = deployment.clock()
                busy = [
                    make_job(i, "every 1 second", created_at_ms=now, prefix="j_busy")
                    for i in range(busy_jobs)
                ]
                for job in busy:
                    deployment.jobs.create(
                        job, state_of(job, settings, now_ms=now, next_run_at_ms=now + 1000)
                    )
                old = now - 86_400_000  # a day ago and before: finished runs, out of the sweep index
                filler = []
                for k in range(rows):
                    job_id = busy[k % busy_jobs].id if k % 2 else f"j_past{k % 5_000:08d}"
                    row = new_run(job_id, old - k * 1000, now_ms=old - k * 1000, retention_days=90)
                    filler.append(
                        replace(
                            row,
                            status=RunStatus.SUCCEEDED,
                            attempt=1,
                            finished_at=row.enqueued_at,
                            sweep_at=None,
                        )
                    )
                deployment.runs.put_many(filler)
            alternate(busy_pair, 3, idle=False)  # lease, bootstrap, warm
            for rows, (walls, saved) in zip(
                history_rows, alternate(busy_pair, busy_ticks, idle=False), strict=True
            ):
                if saved < busy_jobs * busy_ticks * 0.9:
                    raise RuntimeError(
                        f"busy ticks saved {saved} runs, expected about {busy_jobs * busy_ticks}"
                    )
                out[f"history_{rows}"] = {
                    "history_rows": rows,
                    "ticks": busy_ticks,
                    "runs_per_tick": saved / busy_ticks,
                    **figures(walls),
                }
        finally:
            for deployment in opened:
                deployment.loop.scheduler.close()
                deployment.database.close()
    # medians: the machine's other load shows in single ticks' times, not in what a tick costs
    first, last = job_counts
    out["growth_ratio_jobs"] = out[f"jobs_{last}"]["wall_ms_p50"] / out[f"jobs_{first}"]["wall_ms_p50"]
    first, last = history_rows
    out["growth_ratio_history"] = (
        out[f"history_{last}"]["wall_ms_p50"] / out[f"history_{first}"]["wall_ms_p50"]
    )
    out["backend"] = "sqlite"
    return out
