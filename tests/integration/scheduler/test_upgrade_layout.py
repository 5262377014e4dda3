"""A deployment upgraded mid-stream from the run layout of design's Upgrades in flight (scheduled runs saved
``queued`` by the scheduler, with sweep keys; succeeded rows already out of the sweep index) to runs created by
the worker's claim, out of the index, on moto: every fire runs exactly once through the upgrade.

That layout stays valid, so there is no migration: a ``queued`` row is claimable, and rows with sweep keys are
swept (a lost worker's ``running`` row, a ``queued`` one whose message was
lost). This test is the proof."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from jobsched.aws.metrics import PowertoolsRunMetrics
from jobsched.aws.queue import RunQueue
from jobsched.domain.runs import new_run
from jobsched.domain.sweeper import Sweeper
from jobsched.domain.worker import Worker
from jobsched.memory.queue import MemoryDeadRuns
from jobsched.models import CommandTarget, RetryPolicy, RunStatus
from jobsched.ports.run_messages import Delivery, RunMessage
from jobsched.ports.runs import ClaimRequest, Owned, RetryTransition, RunKey, run_id
from jobsched.ports.targets import TargetCall
from jobsched.targets import Targets
from jobsched.targets.commands import commands

MIN = 60_000
COMMAND = "upgrade-count"


@pytest.fixture
def executions() -> Iterator[Counter[str]]:
    """Registers the command ``upgrade-count``: counts each try it runs, by run id."""
    seen: Counter[str] = Counter()

    @commands.register(COMMAND, replace=True)
    def count(call: TargetCall) -> str:
        seen[call.run_id] += 1
        return "ok"

    yield seen
    commands.unregister(COMMAND)


def test_a_deployment_upgraded_mid_stream_runs_every_fire_exactly_once(
    harness: Any, executions: Counter[str]
) -> None:
    settings, clock, runs = harness.settings, harness.clock, harness.runs
    queue = RunQueue(harness.aws.sqs, settings.run_queue_url)
    target = CommandTarget(name=COMMAND)
    no_backoff = RetryPolicy(max_attempts=3, backoff_s=0)
    names = ("in_flight", "lost_message", "lost_worker", "succeeded", "retrying")
    jobs = {name: harness.add("every 1 minute", target=target, retry=no_backoff).id for name in names}
    t0 = harness.T0

    # Given the old scheduler handled the fires at T0: each job moved on to T0 + 1 min (a tick of the new
    # scheduler makes that move; its messages are thrown away and the old layout written in their place)
    scheduler = harness.contender("old")
    harness.run_seconds(scheduler, 1)
    assert {m.job_id for m in harness.drain()} == set(jobs.values())
    old_row = {
        name: new_run(job_id, t0, now_ms=t0 + 5, retention_days=90, sweep_after_ms=120_000, term=1)
        for name, job_id in jobs.items()
    }
    for row in old_row.values():
        assert row.sweep_at is not None  # the old layout: saved queued, in the sweep index
        assert runs.put_new(row) is None
    old_claim = {"worker": "old-worker", "stale_before_ms": 0, "retry_due_by_ms": t0 + 2_000}
    # in_flight: queued, its message (the old body: the key only) on the queue
    queue.send([RunMessage(jobs["in_flight"], t0)])
    # lost_message: queued, its message lost (the sweeper re-enqueues it once overdue)
    # lost_worker: claimed by an old worker that died at once (its message invisible for the queue's 90 min)
    assert runs.claim(ClaimRequest(RunKey(jobs["lost_worker"], t0), now_ms=t0 + 2_000, **old_claim)).claimed
    # succeeded: ran and finished under the old code (out of the sweep index)
    assert runs.claim(ClaimRequest(RunKey(jobs["succeeded"], t0), now_ms=t0 + 2_000, **old_claim)).claimed
    assert runs.succeed(Owned(jobs["succeeded"], t0, 1, "old-worker"), now_ms=t0 + 3_000)
    # retrying: its first try failed; the retry message is on the queue
    assert runs.claim(ClaimRequest(RunKey(jobs["retrying"], t0), now_ms=t0 + 2_000, **old_claim)).claimed
    assert runs.retry(
        Owned(jobs["retrying"], t0, 1, "old-worker"),
        RetryTransition(error="boom", retry_at_ms=t0 + 3_000, sweep_at_ms=t0 + 123_000),
    )
    queue.send([RunMessage(jobs["retrying"], t0)])
    executions.update({run_id(jobs["succeeded"], t0): 1, run_id(jobs["retrying"], t0): 1})

    # When the new scheduler, workers and sweeper run for ten minutes (the old scheduler's lease has run out)
    dead_runs = MemoryDeadRuns()
    worker = Worker(
        settings=settings,
        runs=runs,
        jobs=harness.jobs,
        queue=queue,
        dead_runs=dead_runs,
        targets=Targets(),
        clock=clock,
        metrics=PowertoolsRunMetrics(),
    )
    sweeper = Sweeper(
        settings=settings,
        runs=runs,
        jobs=harness.jobs,
        queue=queue,
        failures=worker.failures,  # a lost worker's try ends as the worker ends a failed one
        clock=clock,
        metrics=PowertoolsRunMetrics(),
    )
    new = harness.contender("new")
    outcomes: Counter[str] = Counter()

    def deliver_all() -> None:
        for message in harness.drain():
            outcomes[worker.handle(Delivery(message, worker="new-worker"))] += 1

    for second in range(10 * 60):
        harness.run_seconds(new, 1)
        deliver_all()
        if second % 60 == 59:
            sweeper.sweep()
            deliver_all()
    end = clock()

    # Then every fire from T0 to the end has exactly one run, succeeded, each of its tries run once
    for name, job_id in jobs.items():
        rows, _ = runs.list_for_job(job_id, 100)
        fires = sorted(row.scheduled_for for row in rows)
        assert fires == list(range(t0, end - MIN + 1, MIN)) or fires == list(range(t0, end + 1, MIN)), name
        for row in rows:
            assert row.status is RunStatus.SUCCEEDED, (name, row)
            # each try counted ran once (the old lost worker's try aside: it ran under the old code, unseen here)
            lost_try = int(name == "lost_worker" and row.scheduled_for == t0)
            assert executions[row.run_id] == row.attempt - lost_try, (name, row)
            assert row.attempt == 1 or row.scheduled_for == t0, (name, row)
            assert row.sweep_at is None, (name, row)  # every run has left (or never entered) the sweep index
            if row.scheduled_for > t0:
                assert row.term == new.lease.term and row.enqueued_at is not None  # the new layout
    # the old worker's lost try counts: its run was taken over by the sweeper and ran again as try 2
    lost = runs.get(jobs["lost_worker"], t0)
    assert lost is not None and lost.attempt == 2 and executions[lost.run_id] == 1
    retried = runs.get(jobs["retrying"], t0)
    assert retried is not None and retried.attempt == 2 and executions[retried.run_id] == 2
    assert dead_runs.notified == []
