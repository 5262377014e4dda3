"""Each try of a run is recorded in its row as it ends (design §5.7), on the in-memory fakes: attempt,
start, finish, worker, error and an excerpt of what the target said, bounded per try and per row."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobsched.domain.retries import Outcome
from jobsched.domain.tries import FAILED_TRY_BYTES, with_try
from jobsched.domain.worker import Worker
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Job, RunStatus
from jobsched.ports.runs import RunRow
from jobsched.ports.targets import SUCCESS_OUTPUT_BYTES, TargetCall, TargetFailed
from jobsched.ports.tries import TryRecord
from jobsched.targets import Targets
from jobsched.targets.commands import CommandExecutor, CommandRegistry
from tests.support.worker import T0, Kit, claim_now


@pytest.fixture
def registry() -> CommandRegistry:
    return CommandRegistry()


@pytest.fixture
def worker(build_worker: Callable[..., Worker], registry: CommandRegistry) -> Worker:
    """The worker running the commands of ``registry`` (this module's)."""
    return build_worker(Targets(command=CommandExecutor(registry)))


@pytest.fixture
def flaky(registry: CommandRegistry) -> Iterator[None]:
    """``flaky``: fails its first two attempts with a message, then returns ``{"rows": 42}``."""

    @registry.register("flaky")
    def flaky(call: TargetCall) -> Any:
        if call.attempt <= 2:
            raise TargetFailed(f"upstream said no (try {call.attempt})")
        return {"rows": 42}

    yield


def _row(runs: MemoryRunStore, job: Job) -> RunRow:
    row = runs.get(job.id, T0)
    assert row is not None
    return row


def test_each_try_is_recorded_with_its_error_then_the_success_with_its_output(kit: Kit, flaky: None) -> None:
    job = kit.due_job(command="flaky", retry={"max_attempts": 3, "backoff_s": 1})
    starts = []
    for expected in (Outcome.RETRYING, Outcome.RETRYING, Outcome.SUCCEEDED):
        starts.append(kit.clock())
        assert kit.deliver(job) == expected
        kit.clock.advance(2_000)
    row = _row(kit.runs, job)
    assert row.status is RunStatus.SUCCEEDED
    assert [t.attempt for t in row.tries] == [1, 2, 3]
    assert [t.started_at for t in row.tries] == starts
    assert all(t.finished_at == t.started_at for t in row.tries)  # the fake clock stands still during a try
    assert [t.error for t in row.tries] == [
        "upstream said no (try 1)",
        "upstream said no (try 2)",
        None,
    ]
    assert row.tries[2].output == '{"rows": 42}'
    assert all(t.worker and t.round == 0 for t in row.tries)


def test_a_dead_run_keeps_every_failed_try(kit: Kit) -> None:
    job = kit.due_job(command="fail", retry={"max_attempts": 2, "backoff_s": 1})
    assert kit.deliver(job) == Outcome.RETRYING
    kit.clock.advance(2_000)
    assert kit.deliver(job) == Outcome.DEAD
    row = _row(kit.runs, job)
    assert row.status is RunStatus.DEAD
    assert [t.attempt for t in row.tries] == [1, 2]
    assert all(t.error and "fail" in t.error for t in row.tries)


def test_outputs_are_cut_to_their_budgets(kit: Kit) -> None:
    @kit.registry.register("chatty")
    def chatty(call: TargetCall) -> Any:
        return "ü" * 10_000

    @kit.registry.register("loud-failure")
    def loud(call: TargetCall) -> Any:
        raise TargetFailed("bad " * 2_000)

    ok = kit.due_job(command="chatty")
    assert kit.deliver(ok) == Outcome.SUCCEEDED
    (tried,) = _row(kit.runs, ok).tries
    assert tried.output is not None and len(tried.output.encode()) <= SUCCESS_OUTPUT_BYTES
    assert tried.output.startswith('"üü')  # the head of the returned value, never a broken character

    bad = kit.due_job(command="loud-failure", retry={"max_attempts": 1})
    assert kit.deliver(bad) == Outcome.DEAD
    (failed,) = _row(kit.runs, bad).tries
    assert failed.error is not None and failed.error.endswith("...")
    assert len(failed.error.encode()) + len((failed.output or "").encode()) <= FAILED_TRY_BYTES


def _claimed_by_a_worker_since_lost(kit: Kit, job: Any) -> int:
    """The run of ``job`` at ``T0`` claimed by worker ``lost-one``, then the clock past its heartbeat's staleness
    (the worker is lost). Returns when it was claimed (epoch ms)."""
    first = kit.clock()
    assert claim_now(kit, job, "lost-one", stale_before_ms=first - 1).claimed
    kit.clock.advance((kit.settings.heartbeat_stale_s + 1) * 1000)
    return first


def test_a_lost_workers_last_try_is_recorded_when_the_run_dies_of_it(kit: Kit) -> None:
    job = kit.due_job(command="echo", retry={"max_attempts": 1})
    first = _claimed_by_a_worker_since_lost(kit, job)
    assert kit.deliver(job) == Outcome.DEAD
    (lost,) = _row(kit.runs, job).tries
    assert (lost.attempt, lost.worker, lost.started_at) == (1, "lost-one", first)
    assert lost.error is not None and "worker lost" in lost.error


def test_a_lost_workers_try_is_recorded_when_a_redelivery_takes_the_run_over(kit: Kit) -> None:
    # Given a run whose first worker claimed it and vanished, with attempts left
    @kit.registry.register("ok")
    def ok(call: TargetCall) -> Any:
        return "done"

    job = kit.due_job(command="ok", retry={"max_attempts": 3})
    # When its message comes back once the heartbeat is stale and the redelivery takes the run over
    first = _claimed_by_a_worker_since_lost(kit, job)
    assert kit.deliver(job) == Outcome.SUCCEEDED
    # Then the row counts two tries and records both: the lost one (it counts as a try) and the success
    row = _row(kit.runs, job)
    assert row.status is RunStatus.SUCCEEDED and row.attempt == 2
    assert [(t.attempt, t.worker) for t in row.tries] == [(1, "lost-one"), (2, row.worker)]
    lost = row.tries[0]
    assert lost.started_at == first and lost.error is not None and "worker lost" in lost.error
    assert row.tries[1].error is None


@pytest.mark.parametrize("max_attempts", [1, 2])
def test_a_lost_workers_try_is_recorded_when_the_sweeper_counts_it_failed(
    kit: Kit, max_attempts: int
) -> None:
    # Given a run whose worker claimed it and vanished
    job = kit.due_job(command="echo", retry={"max_attempts": max_attempts, "backoff_s": 60})
    # When the sweeper finds its heartbeat stale: a failed try (retrying, or dead when it was the last)
    first = _claimed_by_a_worker_since_lost(kit, job)
    assert kit.build_sweeper().sweep().lost_workers == 1
    # Then that try is in the row's tries, as the worker records a try it ran
    row = _row(kit.runs, job)
    assert row.status is (RunStatus.DEAD if max_attempts == 1 else RunStatus.RETRYING) and row.attempt == 1
    (lost,) = row.tries
    assert (lost.attempt, lost.worker, lost.started_at) == (1, "lost-one", first)
    assert lost.error is not None and "worker lost" in lost.error


def test_older_tries_are_summarised_and_the_oldest_dropped() -> None:
    tries: tuple[TryRecord, ...] = ()
    for attempt in range(1, 41):
        tries = with_try(tries, TryRecord(attempt, 1, 2, "w", "e" * 500, "o" * 5_000))
    assert [t.attempt for t in tries] == list(range(11, 41))  # at most 30, the newest
    assert all(t.output is None and t.error == "e" * 197 + "..." for t in tries[:-5])
    assert all(t.output and t.error == "e" * 500 for t in tries[-5:])
