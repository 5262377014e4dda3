"""A try's outcome written against transient storage errors (``jobsched.domain.outcomes``): the run store's
write of the outcome fails once or twice (before or after it took effect) and the worker tries it again while it
still holds the run, so the run is never taken over as a lost worker's (which ran a succeeded target again, or
recorded it dead with an alert). On the in-memory fakes, in simulated time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.domain.outcomes import OUTCOME_RESERVE_S
from jobsched.domain.retries import Outcome
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Job, RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.run_messages import Delivery, RunMessage
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.targets.commands import commands
from tests.support.worker import T0, Kit


class Faults:
    """A fault-injecting wrapper of one run-store write: ``fail(name, times, after=...)`` makes the next
    ``times`` calls of ``runs.<name>`` raise ``StoreUnavailable``, before the write (nothing written) or, with
    ``after``, once it took effect (its answer lost); ``until_ms`` instead fails every call made before that
    instant of the fake clock. ``calls[name]`` counts the calls made."""

    def __init__(
        self, runs: MemoryRunStore, monkeypatch: pytest.MonkeyPatch, clock: Callable[[], int]
    ) -> None:
        self.runs, self.monkeypatch, self.clock = runs, monkeypatch, clock
        self.calls: dict[str, int] = {}

    def fail(self, name: str, times: int = 0, *, after: bool = False, until_ms: int | None = None) -> None:
        real = getattr(self.runs, name)
        left = [times]
        self.calls[name] = 0

        def faulty(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            failing = left[0] > 0 or (until_ms is not None and self.clock() < until_ms)
            if not failing:
                return real(*args, **kwargs)
            left[0] -= 1
            if after:
                real(*args, **kwargs)
            raise StoreUnavailable(f"{name}: ThrottlingException")

        self.monkeypatch.setattr(self.runs, name, faulty)


@pytest.fixture
def faults(kit: Kit, monkeypatch: pytest.MonkeyPatch) -> Faults:
    return Faults(kit.runs, monkeypatch, kit.clock)


def _deliver_as_sqs(kit: Kit, job: Job) -> list[str]:
    """Deliver the run's message as SQS would: a delivery whose record fails (the error escapes the handler)
    comes back once its visibility (``heartbeat_stale_s + heartbeat_interval_s``) ends. Returns each delivery's
    outcome (``"error"`` for a failed record)."""
    outcomes: list[str] = []
    for receive in range(1, 4):
        record = kit.record(job.id, T0, receive_count=receive, receipt_handle=f"rh-{receive}")
        try:
            outcomes.append(kit.worker.handle(delivery_of(record)))
            return outcomes
        except StoreUnavailable:
            outcomes.append("error")
            kit.clock.advance((kit.settings.heartbeat_stale_s + kit.settings.heartbeat_interval_s) * 1000)
    return outcomes


BEFORE_OR_AFTER_IT_TOOK_EFFECT = pytest.mark.parametrize(
    "after", [False, True], ids=["before-it-took-effect", "after-it-took-effect"]
)
"""Whether the failing write fails before it takes effect or after (its answer lost)."""


def _fails_boom_as_sqs_delivers(
    kit: Kit,
    faults: Faults,
    write: str,
    *,
    after: bool,
    max_attempts: int,
    outcome: Outcome,
    status: RunStatus,
) -> None:
    """A due run of a job failing with "boom" whose ``write`` fails twice (``after`` it took effect or before),
    delivered as SQS would: one delivery answers ``outcome`` and the row records the one failed try in
    ``status``."""
    job = kit.due_job(command="fail-boom", retry={"max_attempts": max_attempts})
    faults.fail(write, 2, after=after)
    assert _deliver_as_sqs(kit, job) == [outcome]
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.attempt, row.error) == (status, 1, "boom")


@BEFORE_OR_AFTER_IT_TOOK_EFFECT
@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("max_attempts", [1, 3])
def test_a_success_write_that_fails_transiently_still_records_the_run_succeeded(
    kit: Kit, faults: Faults, calls: list[TargetCall], max_attempts: int, times: int, after: bool
) -> None:
    # Given a run whose one success write fails on a transient store error, once or twice
    job = kit.due_job(command="record", retry={"max_attempts": max_attempts})
    faults.fail("succeed", times, after=after)
    # When its message is delivered (and again, as SQS would, if a delivery fails)
    outcomes = _deliver_as_sqs(kit, job)
    # Then the run is recorded succeeded by that delivery: the target ran once, nothing is dead or alerted
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.attempt, row.error) == (RunStatus.SUCCEEDED, 1, None)
    assert len(calls) == 1 and kit.dead_runs.notified == []
    assert outcomes == [Outcome.SUCCEEDED]
    assert [t.error for t in row.tries] == [None]
    # and a later copy of its message, once any heartbeat is stale, is dropped: no second try
    kit.clock.advance((kit.settings.heartbeat_stale_s + 1) * 1000)
    again = kit.record(job.id, T0, message_id="m-late", receive_count=2, receipt_handle="rh-late")
    assert kit.worker.handle(delivery_of(again)) == Outcome.DROPPED
    assert len(calls) == 1 and kit.dead_runs.notified == []


@pytest.fixture
def failing() -> Any:
    """Command ``fail-boom``: the try fails with ``boom``."""

    @commands.register("fail-boom", replace=True)
    def fail(call: TargetCall) -> None:
        raise TargetFailed("boom")

    yield
    commands.unregister("fail-boom")


@BEFORE_OR_AFTER_IT_TOOK_EFFECT
def test_a_retry_write_that_fails_transiently_still_records_the_failed_try(
    kit: Kit, faults: Faults, failing: None, sent: list[dict[str, Any]], after: bool
) -> None:
    _fails_boom_as_sqs_delivers(
        kit, faults, "retry", after=after, max_attempts=3, outcome=Outcome.RETRYING, status=RunStatus.RETRYING
    )
    assert len(sent) == 1 and kit.dead_runs.notified == []


@BEFORE_OR_AFTER_IT_TOOK_EFFECT
def test_a_dead_write_that_fails_transiently_records_the_run_dead_once(
    kit: Kit, faults: Faults, failing: None, after: bool
) -> None:
    _fails_boom_as_sqs_delivers(
        kit, faults, "dead", after=after, max_attempts=1, outcome=Outcome.DEAD, status=RunStatus.DEAD
    )
    assert [d.error for d in kit.dead_runs.notified] == ["boom"]


def test_a_refused_outcome_write_is_not_tried_again(
    kit: Kit, faults: Faults, calls: list[TargetCall], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a try whose run another worker took over while it ran (the success write's condition refuses it)
    job = kit.due_job(command="record")
    succeed = kit.runs.succeed

    def taken_over(owned: Any, **kwargs: Any) -> bool:
        kit.runs.force(owned.job_id, owned.scheduled_for, worker="thief", attempt=owned.attempt + 1)
        return bool(succeed(owned, **kwargs))

    monkeypatch.setattr(kit.runs, "succeed", taken_over)
    faults.fail("succeed")
    # Then the write is made once and the try ends LOST, the run left to the other worker
    assert kit.deliver(job) == Outcome.LOST
    assert faults.calls["succeed"] == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.worker) == (RunStatus.RUNNING, "thief")


def test_the_run_is_held_by_beats_while_its_outcome_write_keeps_failing(
    kit: Kit, faults: Faults, calls: list[TargetCall], visibility_calls: list[dict[str, Any]]
) -> None:
    # Given a success write failing for 70 s after the try (more than two heartbeat intervals), the beats landing
    job = kit.due_job(command="record", retry={"max_attempts": 1})
    ended = kit.clock()
    faults.fail("succeed", until_ms=ended + 70_000)
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0, receipt_handle="rh-1"))) == Outcome.SUCCEEDED
    # Then the row's heartbeat and the message's visibility were extended meanwhile, so no claim could take the
    # run over as a lost worker's, and the success landed
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.SUCCEEDED and len(calls) == 1
    assert row.heartbeat_at is not None and row.heartbeat_at >= ended + 60_000
    interval = kit.settings.heartbeat_interval_s
    assert len([c for c in visibility_calls if c["ReceiptHandle"] == "rh-1"]) >= 70 // interval
    assert kit.dead_runs.notified == []


def test_an_outcome_write_is_given_up_after_heartbeat_stale_s(
    kit: Kit, faults: Faults, calls: list[TargetCall]
) -> None:
    # Given a store that fails every write of the run from the end of its try on (the beats too)
    job = kit.due_job(command="record")
    ended = kit.clock()
    faults.fail("succeed", until_ms=ended + 3_600_000)
    faults.fail("heartbeat", until_ms=ended + 3_600_000)
    # Then the worker stops trying within heartbeat_stale_s, and the record fails (its message comes back)
    with pytest.raises(StoreUnavailable):
        kit.worker.handle(delivery_of(kit.record(job.id, T0)))
    assert ended < kit.clock() <= ended + kit.settings.heartbeat_stale_s * 1000
    assert faults.calls["succeed"] > 5


def test_an_outcome_write_stops_before_the_invocation_ends(
    kit: Kit, faults: Faults, calls: list[TargetCall]
) -> None:
    # Given a Lambda invocation with 40 s left after the try (less than heartbeat_stale_s)
    job = kit.due_job(command="record", timeout_s=10)
    ends_at = kit.clock() + 40_000
    faults.fail("succeed", until_ms=ends_at)
    delivery = Delivery(RunMessage(job.id, T0), worker="req-1", remaining_ms=lambda: ends_at - kit.clock())
    # Then the worker stops trying OUTCOME_RESERVE_S before it ends, for what follows the write
    with pytest.raises(StoreUnavailable):
        kit.worker.handle(delivery)
    assert kit.clock() <= ends_at - OUTCOME_RESERVE_S * 1000


def test_a_beat_refused_while_retrying_finds_the_outcome_that_landed_unseen(
    kit: Kit, calls: list[TargetCall], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a success write that lands but whose answer is lost, and whose next tries fail for a minute
    job = kit.due_job(command="record", retry={"max_attempts": 1})
    ended = kit.clock()
    succeed = kit.runs.succeed
    tries: list[int] = []

    def landed_unseen(*args: Any, **kwargs: Any) -> bool:
        tries.append(kit.clock())
        if len(tries) == 1:
            succeed(*args, **kwargs)
        if kit.clock() < ended + 60_000:
            raise StoreUnavailable("succeed: ThrottlingException")
        return bool(succeed(*args, **kwargs))

    monkeypatch.setattr(kit.runs, "succeed", landed_unseen)
    # Then the first beat while retrying is refused (the row is no longer running), the row shows the success
    # under this claim, and the worker stops there with the run succeeded
    assert kit.deliver(job) == Outcome.SUCCEEDED
    assert kit.clock() < ended + 60_000 and len(tries) > 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.attempt) == (RunStatus.SUCCEEDED, 1) and len(calls) == 1
