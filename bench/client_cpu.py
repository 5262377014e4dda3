"""The scheduler's own CPU per run, without any backend: what a scheduler Lambda's vCPU must pay for.

moto runs in the benchmark's own process, so its timings mix the scheduler's work with the backend's. Here
the scheduler's per-run code runs against canned HTTP 200 responses (a botocore ``before-send`` hook answers
every request, so nothing is sent anywhere): planning a due job's fires (``plan_fires``, the cron arithmetic included),
the fenced ``move`` of its scheduling state and a tenth of a ``RunQueue.send`` of 10, each through boto3 exactly
as in production (serialization, SigV4 signing, parsing). Measured as the calling thread's CPU time
(``time.thread_time``), so the machine's load does not inflate it. The result projects what one scheduler
partition sustains per vCPU (README).

The scheduler writes no run row (the worker's claim creates it, design §4.2), so ``per_run_ms`` is
plan + move + a tenth of a send. ``put_ms`` is still measured (building a run row and its conditional
``put_new``, the write a backfill or a manual trigger makes per run) for comparison with earlier results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.harness import T0, make_job, quiet_environment, state_of

_BODIES = {
    "PutItem": b"{}",
    "UpdateItem": b"{}",
    "SendMessageBatch": b'{"Successful": [], "Failed": []}',
}


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


def _answer(**kwargs: Any) -> Any:
    from botocore.awsrequest import AWSResponse

    operation = kwargs["event_name"].rsplit(".", 1)[-1]
    return AWSResponse(
        kwargs["request"].url, 200, {"x-amzn-requestid": "bench"}, _Raw(_BODIES.get(operation, b"{}"))
    )


def _cpu_ms(call: Callable[[], Any], repeat: int) -> float:
    call()  # warm (lazy imports, client creation)
    started = time.thread_time()
    for _ in range(repeat):
        call()
    return (time.thread_time() - started) * 1000 / repeat


def measure_client_cpu(repeat: int = 500) -> dict[str, Any]:
    """CPU milliseconds per call of each step (``repeat`` calls each, after one warm-up call), and the
    scheduler's sum per run. Returns ``{"plan_ms", "put_ms", "move_ms", "send_batch_ms", "per_run_ms",
    "runs_per_vcpu_s"}`` (``per_run_ms`` = plan + move + send_batch / 10: see the module docstring)."""
    quiet_environment()
    from jobsched.aws.clients import Aws
    from jobsched.domain.planning import DueJob, TickLimits, plan_fires
    from jobsched.domain.registration import due_entry
    from jobsched.domain.runs import new_run
    from jobsched.ports.jobs import Move
    from jobsched.ports.run_messages import RunMessage
    from jobsched.runtime.wiring import Components
    from jobsched.settings import Settings

    settings = Settings.model_validate(
        {
            "jobs_table": "jobs",
            "runs_table": "runs",
            "control_table": "control",
            "idempotency_table": "idem",
            "run_queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/runs",
            "dead_run_queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/dead",
            "alerts_topic_arn": "arn:aws:sns:us-east-1:123456789012:alerts",
        }
    )
    aws = Aws()
    for client in (aws.dynamodb_resource.meta.client, aws.sqs):
        client.meta.events.register("before-send", _answer)
    components = Components(settings, aws)
    runs, jobs, queue = components.runs(), components.jobs(), components.run_queue()
    midnight = T0 + 86_400_000
    job = make_job(1, "0 0 * * *", created_at_ms=T0)
    state = state_of(job, settings, now_ms=midnight - 60_000, next_run_at_ms=midnight)
    due = DueJob.from_state(state)
    limits = TickLimits()
    batch = [
        RunMessage(f"j_bench{i:08d}", midnight, dispatch_at=midnight, enqueued_at=midnight + 5, term=7)
        for i in range(10)
    ]

    def plan() -> Any:
        return plan_fires(due, midnight + 5, limits)

    def put() -> Any:
        return runs.put_new(
            new_run(job.id, midnight, now_ms=midnight + 5, retention_days=90, dispatch_at_ms=midnight, term=7)
        )

    def move() -> Any:
        nxt = midnight + 86_400_000
        entry = due_entry(
            job.id,
            nxt,
            partition=state.partition,
            shards=settings.due_shards,
            bucket_ms=settings.due_bucket_s * 1000,
            now_ms=midnight,
            version=state.version,
        )
        return jobs.move(
            Move(
                job.id,
                expected_next_run_at=midnight,
                expected_version=state.version,
                partition=state.partition,
                term=7,
                next_run_at=nxt,
                due=entry,
            )
        )

    out = {
        "plan_ms": _cpu_ms(plan, repeat),
        "put_ms": _cpu_ms(put, repeat),
        "move_ms": _cpu_ms(move, repeat),
        "send_batch_ms": _cpu_ms(lambda: queue.send(batch), max(1, repeat // 5)),
    }
    per_run = out["plan_ms"] + out["move_ms"] + out["send_batch_ms"] / 10
    return {**out, "per_run_ms": per_run, "runs_per_vcpu_s": 1000 / per_run}
