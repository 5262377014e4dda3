"""Requests, capacity units and worker duration per run, on a steady load (in-process moto, FakeClock).

Set-up: ``jobs`` jobs ``every 1 second`` (a no-op ``echo`` command target, an ``input`` of ``input_bytes``),
their creation instants spread over a second, so each tick finds ``jobs`` runs due: 100 by default, close
to the design §10's average of 116 runs a second. The components are the production ones, wired the
production way: ``Components.scheduler_loop`` and ``Components.worker`` on a :func:`~bench.counting.counting_aws`
each; the run queue is drained after every tick through the worker Lambda handler by
``jobsched.local.event_source.SqsEventSource`` (receive 10, call the handler with the SQS event, delete the
successes), which is what Lambda's event source mapping does.

Counted after ``warmup`` ticks (the first holds the lease acquisition and the watermark bootstrap, costs of
an invocation, not of a run) over ``seconds`` ticks: requests by path, write and read units (capacity rules
of ``bench.capacity``), and the wall time of each worker invocation minus the time spent reading items for
the capacity accounting.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.counting import RequestLog, counting_aws, probe_client
from bench.harness import T0, NoTickMetrics, make_job, moto_backend, sched_of, write_items

SCHEDULER, WORKER, EVENT_SOURCE = "scheduler", "worker", "event_source"


@dataclass
class _TimedHandler:
    """Wraps the worker Lambda handler: counts invocations and records, and times them: wall seconds (minus the
    capacity probe's reads in this thread) and the worker's own CPU seconds (the process's CPU time during the
    invocation, the bench's other parts being idle then, minus ``RequestLog.foreign_cpu_seconds``: moto's and
    the log's work)."""

    handler: Callable[[dict[str, Any], Any], Any]
    log: RequestLog
    invocations: int = 0
    records: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    durations_ms: list[float] = field(default_factory=list)

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        probe_before = self.log.probe_seconds()
        foreign_before = self.log.foreign_cpu_seconds(WORKER)
        started, cpu_started = time.perf_counter(), time.process_time()
        try:
            return self.handler(event, context)
        finally:
            elapsed = time.perf_counter() - started - (self.log.probe_seconds() - probe_before)
            cpu = time.process_time() - cpu_started - (self.log.foreign_cpu_seconds(WORKER) - foreign_before)
            if self.log.enabled:
                self.invocations += 1
                self.records += len(event.get("Records", []))
                self.seconds += elapsed
                self.cpu_seconds += max(0.0, cpu)
                self.durations_ms.append(elapsed * 1000)


def measure_paths(
    input_bytes: int, *, jobs: int = 100, seconds: int = 12, warmup: int = 2, capacity: bool = True
) -> dict[str, Any]:
    """Run the steady load and return the per-run figures (see the module docstring).

    Returns ``{"runs", "worker_records", "ticks", "runs_per_tick", "requests_per_run": {"scheduler",
    "worker", "worker_handler", "event_source"}, "operations": {path: {op: n}}, "wcu_per_run": {...},
    "rcu_per_run": {...}, "wcu_detail": {...}, "worker": {"invocations", "records_per_invocation",
    "duration_ms_avg", "cpu_ms_avg"}, "statuses": {...}}``. Raises RuntimeError if the runs did not all succeed.
    """
    from jobsched.clock import FakeClock
    from jobsched.dynamodb import layout
    from jobsched.handlers import worker as worker_handler
    from jobsched.local.event_source import SqsEventSource
    from jobsched.runtime.wiring import Components
    from jobsched.runtime.worker import Batches

    with moto_backend() as backend:
        settings = backend.settings
        log = RequestLog(backend.tables, probe_client() if capacity else None)
        log.enabled = False
        clock = FakeClock(T0 - 2000)

        from jobsched.aws.clients import Aws

        setup = Aws()
        items: list[dict[str, Any]] = []
        for i in range(jobs):
            job = make_job(
                i, "every 1 second", created_at_ms=T0 - 60_000 + (i * 1000) // jobs, input_bytes=input_bytes
            )
            items += [layout.spec_item(job), *sched_of(job, settings, now_ms=clock())]
        write_items(setup.table(settings.jobs_table), items)

        loop = Components(
            settings, counting_aws(log, SCHEDULER), clock=clock, sleep=clock.sleep
        ).scheduler_loop(0, holder="bench-scheduler", tick_metrics=NoTickMetrics())
        worker = Components(settings, counting_aws(log, WORKER), clock=clock).worker()
        batches = Batches(lambda: worker)
        timed = _TimedHandler(functools.partial(worker_handler.handler, batches=batches), log)
        source = SqsEventSource(
            counting_aws(log, EVENT_SOURCE).sqs,
            settings.run_queue_url,
            timed,
            function_name="jobsched-worker-bench",
            wait_s=0,
        )
        _ = source.queue_arn  # resolved once, before counting
        runs = 0
        try:
            for second in range(warmup + seconds):
                clock.now_ms = T0 - 1000 + second * 1000
                if second == warmup:
                    log.reset()
                    log.enabled = True
                result = loop.step()
                if result is not None and log.enabled:
                    runs += result.created
                while source.poll_once()[0]:
                    pass
        finally:
            log.enabled = False
            loop.scheduler.close()
        statuses = _statuses(setup.table(settings.runs_table))

    if runs == 0 or timed.records == 0:
        raise RuntimeError("the steady load produced no runs: the scheduler or the worker is not working")
    if set(statuses) != {"succeeded"}:
        raise RuntimeError(f"runs did not all succeed: {statuses}")
    worker_requests = log.request_count(WORKER) + log.request_count(EVENT_SOURCE)
    return {
        "input_bytes": input_bytes,
        "jobs": jobs,
        "ticks": seconds,
        "runs": runs,
        "worker_records": timed.records,
        "runs_per_tick": runs / seconds,
        "requests_per_run": {
            SCHEDULER: log.request_count(SCHEDULER) / runs,
            WORKER: worker_requests / timed.records,
            "worker_handler": log.request_count(WORKER) / timed.records,
            EVENT_SOURCE: log.request_count(EVENT_SOURCE) / timed.records,
        },
        "operations": {path: log.operations(path) for path in (SCHEDULER, WORKER, EVENT_SOURCE)},
        "wcu_per_run": {
            SCHEDULER: log.wcu(SCHEDULER) / runs,
            WORKER: log.wcu(WORKER) / timed.records,
            "total": log.wcu(SCHEDULER) / runs + log.wcu(WORKER) / timed.records,
        },
        "wcu_detail_per_run": {
            path: {
                k: v / (runs if path == SCHEDULER else timed.records) for k, v in log.wcu_detail(path).items()
            }
            for path in (SCHEDULER, WORKER)
        },
        "rcu_per_run": {
            SCHEDULER: log.rcu(SCHEDULER) / runs,
            WORKER: log.rcu(WORKER) / timed.records,
            "total": log.rcu(SCHEDULER) / runs + log.rcu(WORKER) / timed.records,
        },
        "sqs_requests_per_run": {
            path: sum(
                n for op, n in log.operations(path).items() if op.startswith("sqs.") and "(empty)" not in op
            )
            / (runs if path == SCHEDULER else timed.records)
            for path in (SCHEDULER, WORKER, EVENT_SOURCE)
        },
        "worker": {
            "invocations": timed.invocations,
            "records_per_invocation": timed.records / max(1, timed.invocations),
            "duration_ms_avg": timed.seconds * 1000 / max(1, timed.invocations),
            # the worker's own CPU in an invocation (not moto's, not the bench's accounting)
            "cpu_ms_avg": timed.cpu_seconds * 1000 / max(1, timed.invocations),
        },
        "statuses": statuses,
    }


def _statuses(table: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    kwargs: dict[str, Any] = {"ProjectionExpression": "#s", "ExpressionAttributeNames": {"#s": "status"}}
    while True:
        page = table.scan(**kwargs)
        for item in page["Items"]:
            counts[item["status"]] = counts.get(item["status"], 0) + 1
        if "LastEvaluatedKey" not in page:
            return counts
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
