"""The midnight rush: N jobs due in the same second, half of them jittered over ``jitter_s``.

Set-up: ``jobs`` daily jobs (``0 0 * * *``) whose next fire is midnight ``T``; every other one has
``jitter_s`` (300 s), so its run is dispatched at ``T + offset`` with the job's fixed offset in
``[0, jitter_s)``. Only their scheduling items are written (the scheduler never reads a spec).

The scheduler is the production loop (``Components.scheduler_loop``: lease, 16 threads, ``TickLimits``
defaults) on a clock that is wall time plus an offset, so ``due == now`` happens for real: the loop's sleep
between ticks is a real sleep from one second before ``T`` until every non-jittered run is enqueued (the
rush, measured in wall time), and a jump of the offset before and after it (nothing is waited for
while idle, but each tick still takes its real time). A drainer thread keeps the run queue empty, as
Lambda's pollers would (see :class:`Drainer` for why it purges on moto). The raw puts run with the drainer
running too, so both measurements share the process with it.

Measured: when each run message was sent (a hook on the scheduler's SQS client, by the same clock), hence
the time until the non-jittered half and until all runs are enqueued, dispatch lateness (send time minus
``scheduled_for + offset``, the scheduler's own definition), the enqueue throughput during the rush (wall
clock), the scheduler's requests during it, its peak memory (``ru_maxrss``: moto's tables live in the
same process, so this is an upper bound), and, in the same process and backend right after, the raw rate
of ``jobs`` conditional puts of run rows through ``RunStore.put_new`` on as many threads as the scheduler
uses (``efficiency_vs_raw`` = throughput / raw rate).
"""

from __future__ import annotations

import functools
import os
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

from bench.counting import RequestLog, counting_aws
from bench.harness import T0, make_job, moto_backend, quantiles, sched_of, write_items


class ShiftedClock:
    """Wall time (epoch ms) plus an offset that only grows: ``jump(ms)`` moves it forward."""

    def __init__(self, start_ms: int) -> None:
        self.offset = start_ms - time.time_ns() // 1_000_000

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset

    def jump(self, ms: int) -> None:
        self.offset += ms


class Pacer:
    """The loop's ``sleep``: real while ``real()`` says so, otherwise a jump of the clock."""

    def __init__(self, clock: ShiftedClock, real: Any) -> None:
        self.clock = clock
        self.real = real
        self.slept_real_s = 0.0

    def __call__(self, seconds: float) -> None:
        if self.real(self.clock() + int(seconds * 1000)):
            self.slept_real_s += seconds
            time.sleep(seconds)
        else:
            self.clock.jump(int(seconds * 1000))


class Drainer(threading.Thread):
    """Empties the run queue until stopped; stands in for Lambda's pollers, which in AWS run elsewhere.

    ``mode="purge"``: ``PurgeQueue`` every 50 ms. ``mode="receive"``: ``ReceiveMessage`` 10 and
    ``DeleteMessageBatch`` them, as Lambda's event source does. On moto both calls cost O(queue depth) per
    message in this very process (measured: 18 ms per send + receive + delete of 10 at depth 0, 390 ms at
    depth 500), so receive-and-delete drainers fall behind a 1,000-message tick, the queue deepens, and the
    rush measures moto's SQS instead of the scheduler: hence purge by default. moto's SQS is not
    thread-safe under concurrent receives; such an error is counted in ``errors`` and the drainer goes on.
    """

    def __init__(self, sqs: Any, url: str, mode: str = "purge") -> None:
        super().__init__(name="drainer", daemon=True)
        if mode not in ("purge", "receive"):
            raise ValueError(f"unknown drain mode {mode!r}")
        self.sqs, self.url, self.mode = sqs, url, mode
        self.stop = threading.Event()
        self.drained = 0
        self.purges = 0
        self.errors = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if self.mode == "purge":
                    self.sqs.purge_queue(QueueUrl=self.url)
                    self.purges += 1
                    self.stop.wait(0.05)
                    continue
                got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10).get("Messages", [])
                if not got:
                    self.stop.wait(0.1)
                    continue
                self.sqs.delete_message_batch(
                    QueueUrl=self.url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
                )
                self.drained += len(got)
            except Exception:
                self.errors += 1
                self.stop.wait(0.05)


class _Ticks:
    """Tick metrics sink: keeps each tick's result with the wall time it ended (and publishes the results
    as production does)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.results: list[tuple[Any, float]] = []

    def record(self, result: Any) -> None:
        self.results.append((result, time.perf_counter()))
        self.inner.record(result)


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure_rush(
    jobs: int = 10_000,
    *,
    jitter_s: int = 300,
    limit_s: int | None = None,
    drain: str = "purge",
    drainer_threads: int | None = None,
    raw_batches: int = 200,
) -> dict[str, Any]:
    """Run the rush (see the module docstring). ``limit_s``: simulated seconds after ``T`` to give up
    (default ``jitter_s + 300``); ``raw_batches``: batch sends of 10 timed after the rush. Returns the figures as a dict; raises RuntimeError when runs are missing."""
    from jobsched.aws.clients import Aws
    from jobsched.aws.metrics import PowertoolsTickMetrics
    from jobsched.domain.planning import TickLimits
    from jobsched.domain.runs import new_run
    from jobsched.ports.run_messages import RunMessage
    from jobsched.runtime.wiring import Components
    from jobsched.schedule.engine import jitter_offset_ms

    # moto refuses a second PurgeQueue within 60 s (as SQS does) unless told otherwise; the drainer purges often.
    os.environ["MOTO_SQS_ENFORCE_STRICT_QUEUE_PURGE_BEHAVIOUR"] = "false"
    midnight = T0 + 86_400_000
    limit_ms = (limit_s if limit_s is not None else jitter_s + 300) * 1000
    with moto_backend() as backend:
        settings = backend.settings
        setup = Aws()
        # --- jobs: every other one jittered -------------------------------------------------------
        dispatch_at: dict[str, int] = {}
        plain_ids: set[str] = set()
        items = []
        for i in range(jobs):
            jittered = i % 2 == 1
            job = make_job(
                i, "0 0 * * *", created_at_ms=T0, jitter_s=jitter_s if jittered else 0, prefix="j_rush"
            )
            items += sched_of(job, settings, now_ms=midnight - 60_000, next_run_at_ms=midnight)
            dispatch_at[job.id] = midnight + jitter_offset_ms(job.id, job.jitter_s)
            if not jittered:
                plain_ids.add(job.id)
        write_items(setup.table(settings.jobs_table), items)
        del items

        # --- the scheduler, its clock and the observers ---------------------------------------------
        clock = ShiftedClock(midnight - 10_000)
        sent: dict[str, tuple[int, float]] = {}  # job_id -> (clock ms, wall s) when its message was sent
        plain_left = {"n": len(plain_ids)}
        lock = threading.Lock()

        def on_call(path: str, operation: str, request: dict[str, Any], response: dict[str, Any]) -> None:
            if operation != "SendMessageBatch":
                return
            import json

            now, wall = clock(), time.perf_counter()
            failed = {f.get("Id") for f in response.get("Failed", [])}
            with lock:
                for entry in request.get("Entries", []):
                    if entry.get("Id") in failed:
                        continue
                    job_id = json.loads(entry["MessageBody"])["job_id"]
                    if job_id not in sent:
                        sent[job_id] = (now, wall)
                        if job_id in plain_ids:
                            plain_left["n"] -= 1

        log = RequestLog(backend.tables)
        log.observers.append(on_call)
        log.enabled = False
        ticks = _Ticks(PowertoolsTickMetrics())
        # Real sleeps from one second before midnight until the last non-jittered run is out; jumps otherwise.
        pacer = Pacer(clock, lambda wake_at: wake_at >= midnight - 1000 and plain_left["n"] > 0)
        scheduler_aws = counting_aws(log, "scheduler")
        loop = Components(settings, scheduler_aws, clock=clock, sleep=pacer).scheduler_loop(
            0, holder="bench-rush", tick_metrics=ticks
        )
        threads = TickLimits().threads
        drainer_threads = drainer_threads or (1 if drain == "purge" else 4)
        drainers = [Drainer(Aws().sqs, settings.run_queue_url, drain) for _ in range(drainer_threads)]
        for drainer in drainers:
            drainer.start()
        wall_at_midnight: dict[str, float] = {}
        rss_before = 0.0

        def keep_going() -> bool:
            nonlocal rss_before
            now = clock()
            if now >= midnight - 1000 and not log.enabled:
                # Count from the idle tick one second before midnight: a rush tick may start a few ms after
                # a check made just before midnight (sleeps and the wall clock disagree by that much).
                rss_before = _maxrss_mb()
                log.enabled = True
            if now >= midnight and "t" not in wall_at_midnight:
                wall_at_midnight["t"] = time.perf_counter() - (now - midnight) / 1000  # wall time of midnight
            return len(sent) < jobs and now < midnight + limit_ms

        started_wall = time.perf_counter()
        try:
            loop.run(keep_going)  # releases the lease and closes the scheduler at the end
        finally:
            log.enabled = False
        scheduler_wall_s = time.perf_counter() - started_wall
        rss_peak = _maxrss_mb()
        missing = _missing(setup, settings, sorted(set(dispatch_at) - sent.keys()))

        # --- the raw rate of the same backend: conditional puts of run rows, same thread count ----------
        raw = Components(settings, counting_aws(RequestLog(), "raw"))
        raw_store = raw.runs()
        now_ms = clock()
        raw_items = [
            new_run(f"j_raw{i:08d}", midnight, now_ms=now_ms, retention_days=settings.retention_days)
            for i in range(jobs)
        ]
        raw_started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            created = sum(1 for previous in pool.map(raw_store.put_new, raw_items) if previous is None)
        raw_s = time.perf_counter() - raw_started
        # For the analysis: the same backend's rates of the tick's other requests, on the same threads: the two
        # reads every run needs (the due index, by full pages; the job's scheduling state, consistently, 100 a
        # request), the fenced move of a job (a sample of the non-jittered jobs, now due tomorrow), a batch send.
        due_read_rate, state_read_rate = _read_rates(
            raw.jobs(), sorted(plain_ids), midnight, settings, threads
        )
        moves = _moves(raw.jobs(), sorted(plain_ids)[:2000], midnight, settings)
        move_started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(lambda call: call(), moves))
        move_rate = len(moves) / (time.perf_counter() - move_started)
        queue = raw.run_queue()
        batches = [[RunMessage(f"j_raw{b:04d}{i}", midnight) for i in range(10)] for b in range(raw_batches)]
        send_started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(queue.send, batches))
        send_rate = len(batches) / (time.perf_counter() - send_started)
        for drainer in drainers:
            drainer.stop.set()
            drainer.join(timeout=10)

    if not sent or not (plain_ids & sent.keys()):
        raise RuntimeError("no run was enqueued: the scheduler is not working")
    if created != jobs:
        raise RuntimeError(f"raw puts: {created} of {jobs} created")
    t_mid = wall_at_midnight["t"]
    plain_done_wall = max(sent[j][1] for j in plain_ids if j in sent) - t_mid
    in_rush = [j for j, (_, wall) in sent.items() if wall - t_mid <= plain_done_wall]
    throughput = len(in_rush) / plain_done_wall
    raw_rate = jobs / raw_s
    writes_bound = 1 / (1 / move_rate + 0.1 / send_rate)
    backend_bound = 1 / (1 / move_rate + 0.1 / send_rate + 1 / due_read_rate + 1 / state_read_rate)
    lateness = [sent[j][0] - dispatch_at[j] for j in sent]
    lateness_plain = [sent[j][0] - dispatch_at[j] for j in plain_ids if j in sent]
    lateness_jittered = [sent[j][0] - dispatch_at[j] for j in sent if j not in plain_ids]
    rush_ticks = [r for r, _ in ticks.results if r.now >= midnight]
    phases = _phases(
        ticks.results,
        [wall for _, wall in sent.values()],
        clock_to_wall=lambda ms: t_mid + (ms - midnight) / 1000,
        until=t_mid + plain_done_wall,
    )
    return {
        "jobs": jobs,
        "jittered": jobs - len(plain_ids),
        "jitter_s": jitter_s,
        "enqueued": len(sent),
        "complete": len(sent) == jobs,
        "non_jittered_enqueued_s": (max(sent[j][0] for j in plain_ids if j in sent) - midnight) / 1000,
        "all_enqueued_s": (max(at for at, _ in sent.values()) - midnight) / 1000,
        "runs_enqueued_during_rush": len(in_rush),
        "throughput_runs_per_s": throughput,
        "raw_conditional_puts_per_s": raw_rate,
        "efficiency_vs_raw": throughput / raw_rate,
        "raw_job_moves_per_s": move_rate,
        "raw_send_batches_per_s": send_rate,
        "raw_due_entries_read_per_s": due_read_rate,
        "raw_states_read_per_s": state_read_rate,
        # The best any tick could do on this backend with, per run, 1 move + 1/10 send (no run row: the worker's
        # claim creates it) + reading its due-index entry (full pages) and its scheduling state (consistently,
        # 100 a request); the bound before the two reads were counted is kept as ``..._writes_only``:
        "backend_bound_runs_per_s": backend_bound,
        "efficiency_vs_backend_bound": throughput / backend_bound,
        "backend_bound_runs_per_s_writes_only": writes_bound,
        "efficiency_vs_backend_bound_writes_only": throughput / writes_bound,
        "threads": threads,
        "lateness_ms": quantiles(lateness),
        "lateness_ms_non_jittered": quantiles(lateness_plain),
        "lateness_ms_jittered": quantiles(lateness_jittered),
        "scheduler_lag_ms_max": max((r.lag_ms for r in rush_ticks), default=0),
        "ticks": len(rush_ticks),
        "tick_errors": sum(r.errors for r in rush_ticks),
        "aborted_ticks": sum(1 for r in rush_ticks if r.aborted),
        "reenqueued": sum(r.reenqueued for r in rush_ticks),
        "move_conflicts": sum(r.conflicts for r in rush_ticks),
        "rush_phases_s": phases,
        "max_runs_per_tick": max((r.enqueued for r in rush_ticks), default=0),
        "requests_per_run": log.request_count("scheduler") / max(1, len(sent)),
        "operations": log.operations("scheduler"),
        "ms_per_call": log.timings_ms("scheduler"),
        "peak_rss_mb": rss_peak,
        "rss_growth_mb": rss_peak - rss_before,
        "scheduler_wall_s": scheduler_wall_s,
        "real_sleep_s": pacer.slept_real_s,
        "missing": missing,
        "drain": drain,
        "drainer_threads": drainer_threads,
        "purges": sum(d.purges for d in drainers),
        "drained": sum(d.drained for d in drainers),
        "drainer_errors": sum(d.errors for d in drainers),
    }


def _missing(aws: Any, settings: Any, job_ids: list[str]) -> dict[str, Any]:
    """What became of jobs whose run was never enqueued: how many, a sample of their scheduling items and
    run rows, and the partition's watermark (for the report; empty when none are missing)."""
    if not job_ids:
        return {"count": 0}
    from jobsched.runtime.wiring import Components

    components = Components(settings, aws)
    runs = components.runs()
    states = components.jobs().scheduling_states(job_ids[:5])
    sample = []
    for job_id in job_ids[:5]:
        state = states.get(job_id)
        rows, _ = runs.list_for_job(job_id, 5)
        sample.append(
            {"job_id": job_id, "sched": asdict(state) if state else None, "runs": [asdict(r) for r in rows]}
        )
    watermark = aws.table(settings.control_table).get_item(Key={"pk": "watermark#0"}).get("Item")
    return {"count": len(job_ids), "sample": sample, "watermark": str(watermark)}


def _read_rates(
    store: Any, job_ids: list[str], midnight: int, settings: Any, threads: int
) -> tuple[float, float]:
    """The backend's raw rates of the two reads the tick makes per run, on ``threads`` threads, as
    ``(due-index entries read per s, scheduling states read per s)``: every due-index page (``TickLimits``'
    ``page_size``, each (partition, shard) of the bucket where the rush moved the non-jittered ``job_ids``,
    due tomorrow at midnight, read to its end, shards in parallel), then the consistent reads of ``job_ids``'
    scheduling states, 100 a request (``DueIndex.scheduling_states``). Raises RuntimeError when the pages do
    not hold every one of ``job_ids``."""
    from jobsched.domain.planning import TickLimits
    from jobsched.ports.jobs import DueQuery

    day = 86_400_000
    bucket = (midnight + day) // (settings.due_bucket_s * 1000)
    page_size = TickLimits().page_size

    def read_shard(key: tuple[int, int]) -> int:
        partition, shard = key
        count, after = 0, None
        while True:
            items, after = store.query_due(
                DueQuery(partition, bucket, shard, midnight + day, page_size, after)
            )
            count += len(items)
            if not after:
                return count

    keys = [(p, s) for p in range(settings.scheduler_partitions) for s in range(settings.due_shards)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        entries = sum(pool.map(read_shard, keys))
    due_rate = entries / (time.perf_counter() - started)
    if entries < len(job_ids):
        raise RuntimeError(f"due-index read: {entries} entries of {len(job_ids)} jobs")
    batches = [job_ids[i : i + 100] for i in range(0, len(job_ids), 100)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        states = sum(len(found) for found in pool.map(store.scheduling_states, batches))
    return due_rate, states / (time.perf_counter() - started)


def _moves(store: Any, job_ids: list[str], midnight: int, settings: Any) -> list[Any]:
    """Calls moving each of ``job_ids`` (daily jobs the rush moved to the next midnight, not jittered) one more
    day, as the scheduler's tick does (conditional on the stored fire and version, fenced by a term above any
    stored one, in the partition the job is homed in). ``store``: a ``DueIndex``."""
    from jobsched.domain.registration import due_entry
    from jobsched.ports.jobs import Move

    day = 86_400_000
    states = store.scheduling_states(job_ids)
    calls = []
    for job_id in job_ids:
        state = states.get(job_id)
        partition = getattr(state, "partition", 0)
        due = due_entry(
            job_id,
            midnight + 2 * day,
            partition=partition,
            shards=settings.due_shards,
            bucket_ms=settings.due_bucket_s * 1000,
            now_ms=midnight + day,
            version=getattr(state, "version", None),
        )
        calls.append(
            functools.partial(
                store.move,
                Move(
                    job_id,
                    expected_next_run_at=midnight + day,
                    expected_version=getattr(state, "version", None),
                    partition=partition,
                    term=2**62,
                    next_run_at=midnight + 2 * day,
                    due=due,
                ),
            )
        )
    return calls


def _phases(
    ticks: list[tuple[Any, float]], send_walls: list[float], *, clock_to_wall: Any, until: float
) -> dict[str, float]:
    """Wall seconds the rush's ticks spent before their first send (read the due index, plan, save the runs),
    between their first and last send (enqueue) and after it (move the jobs, watermark), summed over the
    ticks that started by ``until`` (the last non-jittered run's send)."""
    out = {"read_plan_save": 0.0, "enqueue": 0.0, "move": 0.0}
    for result, ended in ticks:
        started = clock_to_wall(result.now)
        if started > until or ended < started:
            continue
        mine = [w for w in send_walls if started <= w <= ended]
        if not mine:
            continue
        out["read_plan_save"] += min(mine) - started
        out["enqueue"] += max(mine) - min(mine)
        out["move"] += ended - max(mine)
    return out
