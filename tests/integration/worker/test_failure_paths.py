"""Failure paths of the worker that depend on the DynamoDB adapters (the rest run on the fakes in
tests/unit/worker/test_failure_paths.py): a throttled read of the spec is ``StoreUnavailable`` and gives the
claim back; a spec the worker cannot parse is not given back forever; a scheduled run (its row made by its
claim) whose retry message or dead-run notification is lost is found by the sweeper; a throttled success write is
written again by the worker."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber

from jobsched.aws.queue import delivery_of
from jobsched.domain.retries import NOTIFY_RETRY_MS, Outcome
from jobsched.domain.worker import Deferred
from jobsched.models import RunStatus
from jobsched.ports.targets import TargetCall
from jobsched.runtime.wiring import Components
from tests.support.worker import Kit

from .conftest import T0


def test_a_throttled_spec_read_on_dynamodb_gives_the_claim_back(kit: Kit, calls: list[TargetCall]) -> None:
    # The JobStore turns DynamoDB's throttle into StoreUnavailable, the error the worker gives the claim back on
    job = kit.due_job(command="record", retry={"max_attempts": 1})
    client = kit.jobs.table.meta.client
    real_get_item = client.get_item

    def throttled_once(**kwargs: Any) -> Any:
        client.get_item = real_get_item
        with Stubber(client) as stubber:
            stubber.add_client_error("get_item", "ThrottlingException", http_status_code=400)
            return client.get_item(**kwargs)

    client.get_item = throttled_once
    try:
        with pytest.raises(Deferred):
            kit.deliver(job)
    finally:
        client.get_item = real_get_item
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.attempt, row.worker) == (RunStatus.QUEUED, 0, None)
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0, message_id="m-again"))) == Outcome.SUCCEEDED
    assert len(calls) == 1


def test_a_spec_the_worker_cannot_read_is_not_given_back_forever(kit: Kit) -> None:
    # The give-back catches every Exception between the claim and the target, not only storage errors: a spec
    # this worker cannot parse (a field written by a newer API during a deploy, a hand edit) is "given back" at
    # every delivery: attempt stays 0, no try is ever counted, nothing goes dead, no owner alert; the message goes
    # to the DLQ and the sweeper re-enqueues the queued row forever.
    job = kit.due_job(command="record", retry={"max_attempts": 1})
    kit.jobs.table.update_item(
        Key={"pk": f"job#{job.id}", "sk": "spec"},
        UpdateExpression="SET doc = :d",
        ExpressionAttributeValues={":d": '{"schedule": 42}'},
    )
    outcomes = []
    for n in range(3):
        try:
            outcomes.append(kit.worker.handle(delivery_of(kit.record(job.id, T0, message_id=f"m{n}"))))
        except Exception as error:
            outcomes.append(type(error).__name__)
    row = kit.runs.get(job.id, T0)
    assert row.attempt > 0 or row.status != "queued", (outcomes, row.status, row.attempt)


def _delivered_while_sqs_is_unreachable(
    kit: Kit, job: Any, monkeypatch: pytest.MonkeyPatch, sender: Any, method: str
) -> str:
    """Deliver ``job``'s run while ``sender.method`` raises ``ConnectionError`` (SQS unreachable): its outcome."""

    def unreachable(*args: Any) -> None:
        raise ConnectionError("SQS unreachable")

    monkeypatch.setattr(sender, method, unreachable)
    try:
        return kit.deliver(job)
    finally:
        monkeypatch.undo()


def _sweep(kit: Kit) -> Any:
    """One pass of a sweeper built on the kit's AWS clients and clock: its report."""
    return Components(kit.settings, kit.aws, clock=kit.clock).sweeper().sweep()


def test_a_scheduled_runs_lost_retry_message_is_re_enqueued_by_the_sweeper(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a scheduled run: no row until its claim makes one (the happy path, design §4.2)
    job = kit.make_job(command="fail", input={"times": 1}, retry={"backoff_s": 30})
    # When its first try fails and the retry message cannot be sent
    outcome = _delivered_while_sqs_is_unreachable(kit, job, monkeypatch, kit.worker.failures.queue, "send")
    assert outcome == Outcome.RETRYING
    # Then the sweeper re-enqueues it once overdue ("the sweeper re-enqueues it when due"), and the retry runs
    kit.clock.advance((30 + kit.settings.sweep_queued_after_s) * 1000)
    report = _sweep(kit)
    assert report.requeued == 1, report
    assert kit.drain.bodies(kit.settings.run_queue_url) == [
        {"job_id": job.id, "scheduled_for": T0, "enqueued_at": kit.clock()}  # sent by this pass
    ]
    assert kit.deliver(job) == Outcome.SUCCEEDED


def test_a_scheduled_dead_runs_failed_notification_is_sent_by_the_sweeper(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a scheduled run (no row until its claim) whose only try fails
    job = kit.make_job(command="fail", retry={"max_attempts": 1})
    # When the dead-run message and alert cannot be sent
    outcome = _delivered_while_sqs_is_unreachable(
        kit, job, monkeypatch, kit.worker.failures.dead_runs, "notify"
    )
    assert outcome == Outcome.DEAD
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.DEAD and row.notify_pending
    # Then the sweeper, once they are due again, sends them: the owner is told once
    kit.clock.advance(NOTIFY_RETRY_MS + 1_000)
    report = _sweep(kit)
    assert report.notified == 1, report
    assert [b["run_id"] for b in kit.drain.bodies(kit.settings.dead_run_queue_url)] == [row.run_id]
    assert not kit.runs.get(job.id, T0).notify_pending  # type: ignore[union-attr]


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_a_throttled_success_write_on_dynamodb_is_tried_again(
    kit: Kit, calls: list[TargetCall], max_attempts: int
) -> None:
    # Given a scheduled run whose success write (the UpdateItem setting status succeeded) DynamoDB throttles twice
    job = kit.make_job(command="record", retry={"max_attempts": max_attempts})
    client = kit.worker.runs.table.meta.client
    real_update_item = client.update_item
    throttled: list[dict[str, Any]] = []

    def throttled_twice(**kwargs: Any) -> Any:
        succeeding = RunStatus.SUCCEEDED.value in kwargs.get("ExpressionAttributeValues", {}).values()
        if not succeeding or len(throttled) == 2:
            return real_update_item(**kwargs)
        throttled.append(kwargs)
        client.update_item = real_update_item
        try:
            with Stubber(client) as stubber:
                stubber.add_client_error("update_item", "ThrottlingException", http_status_code=400)
                return client.update_item(**kwargs)
        finally:
            client.update_item = throttled_twice

    client.update_item = throttled_twice
    try:
        outcome = kit.deliver(job)
    finally:
        client.update_item = real_update_item
    # Then the worker wrote it again: the run succeeded on its one try, and no owner is told it is dead
    assert len(throttled) == 2
    assert outcome == Outcome.SUCCEEDED
    row = kit.runs.get(job.id, T0)
    assert row is not None and (row.status, row.attempt) == (RunStatus.SUCCEEDED, 1) and len(calls) == 1
    assert kit.drain.bodies(kit.settings.dead_run_queue_url) == []
