"""Failure paths forced on purpose: a target that raises something unexpected, a run taken over between
the try and its result, transport errors of targets, name resolution failures, storage errors around the try.
On the in-memory fakes; a spec the worker cannot read is tests/integration/worker/test_failure_paths.py's."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

from jobsched.aws.queue import delivery_of
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Deferred
from jobsched.memory.queue import MemoryDeadLetters
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import HttpTarget, LambdaTarget, RunStatus, SqsTarget
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.resources import RUN_QUEUE
from jobsched.targets import Targets, commands
from jobsched.targets.aws import LambdaExecutor, SqsExecutor
from jobsched.targets.http import AddressPolicy, HttpExecutor
from tests.support.worker import T0, Kit, claim_scheduled_now


def _call() -> TargetCall:
    return TargetCall(run_id=f"j_1@{T0}", job_id="j_1", scheduled_for_ms=T0, attempt=1, timeout_s=2.0)


@pytest.fixture
def steal(runs: MemoryRunStore) -> Iterator[None]:
    """Command ``steal-and-fail``: another worker takes the run over, then this try fails."""

    @commands.register("steal-and-fail", replace=True)
    def steal_and_fail(call: TargetCall) -> None:
        row = runs.get(call.job_id, call.scheduled_for_ms)
        assert row is not None
        runs.force(call.job_id, call.scheduled_for_ms, worker="thief", attempt=row.attempt + 1)
        raise TargetFailed("failed after losing the run")

    yield
    commands.unregister("steal-and-fail")


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_a_failed_try_of_a_run_taken_over_changes_nothing(kit: Kit, steal: None, max_attempts: int) -> None:
    # Given a try that fails after another worker took its run over (retry or dead alike)
    job = kit.due_job(command="steal-and-fail", retry={"max_attempts": max_attempts})
    # Then its failure is not recorded: the run is the other worker's
    assert kit.deliver(job) == Outcome.LOST
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.RUNNING and row.worker == "thief"
    assert row.error is None
    assert kit.dead_runs.notified == []


def test_an_unexpected_exception_from_an_executor_is_a_failed_try(kit: Kit) -> None:
    class Buggy:
        def execute(self, target: Any, call: TargetCall) -> str:
            raise RuntimeError("executor bug")

    worker = kit.build_worker(targets=Targets(command=Buggy()))
    job = kit.due_job()
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.error == "RuntimeError: executor bug"


def test_a_skip_of_a_run_taken_over_is_not_recorded(kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    skip = kit.runs.skip

    def taken_over(*args: Any, **kwargs: Any) -> bool:
        kit.runs.force(args[0].job_id, args[0].scheduled_for, worker="thief")
        return skip(*args, **kwargs)

    monkeypatch.setattr(kit.runs, "skip", taken_over)
    job = kit.due_job()
    kit.jobs.delete(job, deleted_at_ms=T0, retention_days=None)
    assert kit.deliver(job) == Outcome.LOST
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.RUNNING


@pytest.mark.parametrize(
    "error",
    [ReadTimeoutError(endpoint_url="https://lambda"), EndpointConnectionError(endpoint_url="https://lambda")],
)
def test_lambda_transport_errors_fail_the_try(error: Exception) -> None:
    class Client:
        def invoke(self, **kwargs: Any) -> Any:
            raise error

    with pytest.raises(TargetFailed, match=f"lambda billing: {type(error).__name__}"):
        LambdaExecutor(lambda: Client()).execute(LambdaTarget(function="billing"), _call())


def test_sqs_transport_errors_fail_the_try() -> None:
    class Client:
        def send_message(self, **kwargs: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="https://sqs")

    with pytest.raises(TargetFailed, match="sqs https://q/x: EndpointConnectionError"):
        SqsExecutor(lambda: Client()).execute(SqsTarget(queue_url="https://q/x"), _call())


def test_a_host_that_does_not_resolve_fails_the_try() -> None:
    def unresolvable(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(TargetFailed, match=r"cannot resolve nowhere\.invalid"):
        HttpExecutor(AddressPolicy(), resolver=unresolvable).execute(
            HttpTarget(url="http://nowhere.invalid/"), _call()
        )
    with pytest.raises(TargetFailed, match="no addresses"):
        HttpExecutor(AddressPolicy(), resolver=lambda host, port: []).execute(
            HttpTarget(url="http://empty.example/"), _call()
        )


def test_the_sweeper_leaves_a_running_row_without_a_heartbeat_alone(kit: Kit) -> None:
    job = kit.due_job()
    kit.runs.force(
        job.id, T0, status=RunStatus.RUNNING
    )  # a malformed row: running with neither heartbeat nor claim facts
    kit.clock.advance((kit.settings.sweep_queued_after_s + kit.settings.heartbeat_stale_s) * 1000)
    report = kit.build_sweeper().sweep()
    assert report.conflicts == 1 and report.lost_workers == 0


@pytest.mark.parametrize("overlap", ["allow", "skip"])
def test_a_storage_error_between_the_claim_and_the_target_gives_the_claim_back(
    kit: Kit, calls: list[TargetCall], monkeypatch: pytest.MonkeyPatch, overlap: str
) -> None:
    # A transient DynamoDB error after the claim (reading the spec, or taking the overlap lock) must not leave the
    # run `running`: no redelivery could claim it, the sweeper would take it for a lost worker, and with
    # max_attempts 1 the run would go dead and its owner be alerted although the target never ran.
    job = kit.due_job(command="record", input={"n": 1}, retry={"max_attempts": 1}, overlap=overlap)
    step = "acquire_overlap" if overlap == "skip" else "get_spec"
    real = getattr(kit.worker.jobs, step)
    failures: list[str] = []

    def throttled(*args: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append(step)
            # what the DynamoDB adapter raises for a throttle (tests/integration/worker/test_failure_paths.py)
            raise StoreUnavailable(f"{step}: ThrottlingException")
        return real(*args, **kwargs)

    monkeypatch.setattr(kit.worker.jobs, step, throttled)
    with pytest.raises(Deferred):
        kit.deliver(job)
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.attempt) == (RunStatus.QUEUED, 0)
    assert row.worker is None and row.started_at is None and calls == []
    # the delivery comes back and the one try the job allows runs
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0, message_id="m-again"))) == Outcome.SUCCEEDED
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.attempt) == (RunStatus.SUCCEEDED, 1) and len(calls) == 1


def test_one_failed_lock_release_does_not_skip_the_next_fires_of_an_idle_job(
    kit: Kit, calls: list[TargetCall], monkeypatch: pytest.MonkeyPatch
) -> None:
    # overlap: skip, every 10 s, each run takes no time. The run of T0 succeeds, but the DeleteItem that gives
    # the overlap lock back throttles once. The lock stays with a fresh heartbeat for heartbeat_stale_s, and
    # every fire in that window is recorded "skipped: run ... is still running" although nothing runs.
    job = kit.make_job(schedule="every 10 seconds", command="record", overlap="skip")
    for k in range(3):
        kit.make_run(job, T0 + k * 10_000)
    real = kit.worker.jobs.release_overlap
    failures: list[int] = []

    def throttled(*args: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append(1)
            raise StoreUnavailable("release_overlap: ThrottlingException")
        return real(*args, **kwargs)

    monkeypatch.setattr(kit.worker.jobs, "release_overlap", throttled)
    assert kit.deliver(job) == Outcome.SUCCEEDED
    kit.clock.advance(10_000)
    assert (
        kit.worker.handle(delivery_of(kit.record(job.id, T0 + 10_000, message_id="m2"))) == Outcome.SUCCEEDED
    )


def test_a_storage_outage_of_half_a_minute_before_the_target_does_not_kill_the_run(
    kit: Kit, calls: list[TargetCall], monkeypatch: pytest.MonkeyPatch, visibility_calls: list[dict[str, Any]]
) -> None:
    # Each delivery that meets the outage gives its claim back and hands the message back for GIVE_BACK_DELAY_S;
    # every receive counts toward the run queue's redrive limit (RUN_QUEUE.max_receive_count), so past it SQS
    # moves the message to the DLQ, where the sweeper records the run dead without a try and alerts its owner:
    # the harm the give-back avoids (dead and alerted, the target never ran), after a 30 s jobs-table throttle.
    job = kit.due_job(command="record", retry={"max_attempts": 4})
    back_at = kit.clock() + 30_000
    real = kit.jobs.get_spec

    def throttled(job_id: str) -> Any:
        if kit.clock() < back_at:
            raise StoreUnavailable("get_spec: ThrottlingException")  # as the DynamoDB adapter raises it
        return real(job_id)

    monkeypatch.setattr(kit.jobs, "get_spec", throttled)
    letters = MemoryDeadLetters()
    sweeper = kit.build_sweeper(dead_letters=letters)
    # When SQS delivers the message each time it is visible again, until the worker keeps it or SQS gives up
    for receives in itertools.count(1):
        if receives > RUN_QUEUE.max_receive_count:
            letters.redrive(RunMessage(job.id, T0), receive_count=receives - 1)
            break
        record = kit.record(job.id, T0, receive_count=receives, receipt_handle=f"rh-{receives}")
        try:
            kit.worker.handle(delivery_of(record))
            break
        except Deferred:
            kit.clock.advance(visibility_calls[-1]["VisibilityTimeout"] * 1000)
    kit.clock.advance(60_000)
    sweeper.sweep()
    # Then the run ran once the table was back, rather than ending dead with its owner alerted
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.SUCCEEDED, (row.status, row.error)
    assert len(calls) == 1 and kit.dead_runs.notified == []


def test_a_duplicate_of_a_running_run_that_cannot_be_watched_comes_back_instead_of_being_dropped(
    kit: Kit, monkeypatch: pytest.MonkeyPatch, visibility_calls: list[dict[str, Any]]
) -> None:
    from jobsched.domain.worker import GIVE_BACK_DELAY_S

    # Given a scheduled run whose row its claim made, running under another worker
    job = kit.make_job(command="record")
    claim_scheduled_now(kit, job, "slow")

    # When a duplicate of its message arrives while the runs table is throttled
    def throttled(*_: Any, **__: Any) -> bool:
        raise StoreUnavailable("watch: ThrottlingException")

    monkeypatch.setattr(kit.runs, "watch", throttled)
    with pytest.raises(Deferred):
        kit.worker.handle(delivery_of(kit.record(job.id, T0, receive_count=2, receipt_handle="rh-2")))
    # Then the copy is handed back (it comes again, and is watched then), not acknowledged (which deletes the
    # run's only guard)
    assert visibility_calls[-1]["VisibilityTimeout"] == GIVE_BACK_DELAY_S
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.RUNNING and row.sweep_at is None
