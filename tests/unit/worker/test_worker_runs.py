"""The worker on the in-memory fakes: claim, success, duplicates, lost workers, deleted jobs, retries and dead runs."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.aws.wire import parse_run_message, run_message_body
from jobsched.clock import to_ms
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Deferred, Worker
from jobsched.models import Job, RunStatus
from jobsched.ports.jobs import Rewrite
from jobsched.ports.lateness import LatenessLabels
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.runs import run_id
from jobsched.ports.targets import TargetCall
from tests.support.worker import T0, Kit, claim_now, claim_scheduled_now


def test_a_run_succeeds_once_and_records_its_try(kit: Kit, calls: list[TargetCall]) -> None:
    # Given a saved run of a job whose command echoes its input
    job = kit.due_job(command="record", input={"day": "monday"})
    # When its message is delivered
    outcome = kit.deliver(job)
    # Then the command ran once with the run id as key, and the run is succeeded with its facts
    assert outcome == Outcome.SUCCEEDED
    assert [c.run_id for c in calls] == [run_id(job.id, T0)]
    assert calls[0].input == {"day": "monday"} and calls[0].attempt == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None
    assert row.status == RunStatus.SUCCEEDED
    assert row.attempt == 1
    assert row.started_at == kit.clock() and row.finished_at == kit.clock()
    assert row.lateness_ms == 1_500
    assert row.worker
    assert row.sweep_at is None and row.error is None


def test_a_duplicate_delivery_executes_the_target_once(kit: Kit, calls: list[TargetCall]) -> None:
    job = kit.due_job(command="record")
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0, message_id="a"))) == Outcome.SUCCEEDED
    assert (
        kit.worker.handle(delivery_of(kit.record(job.id, T0, message_id="b", receive_count=2)))
        == Outcome.DROPPED
    )
    assert len(calls) == 1


def test_a_duplicate_while_the_first_is_running_loses_the_claim(kit: Kit, calls: list[TargetCall]) -> None:
    job = kit.due_job(command="record")
    claimed = claim_now(kit, job, "other", stale_before_ms=kit.clock() - 120_000).claimed
    assert claimed
    kit.clock.advance(60_000)  # its heartbeat is a minute old: fresh
    assert kit.deliver(job) == Outcome.DROPPED
    assert calls == []
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.worker == "other" and row.status == RunStatus.RUNNING


def test_a_redelivery_after_a_lost_worker_runs_again_with_the_same_key(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a run whose first worker claimed it, ran the target, then died without a word
    job = kit.due_job(command="record")
    assert kit.deliver(job) == Outcome.SUCCEEDED  # the first run of the target
    first_key = calls[0].idempotency_key
    # rewind: as if that worker had died before recording its result
    kit.runs.force(job.id, T0, status=RunStatus.RUNNING, heartbeat_at=kit.clock())
    # When SQS redelivers the message after the heartbeat went stale
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0, receive_count=2))) == Outcome.SUCCEEDED
    # Then the target ran again, as attempt 2, with the same idempotency key
    assert [c.idempotency_key for c in calls] == [first_key, first_key]
    assert [c.attempt for c in calls] == [1, 2]
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.attempt == 2 and row.status == RunStatus.SUCCEEDED
    assert row.lateness_ms == 1_500  # the first try's lateness is kept


def test_a_lost_worker_on_the_last_attempt_ends_dead_without_running_again(
    kit: Kit, calls: list[TargetCall]
) -> None:
    job = kit.due_job(command="record", retry={"max_attempts": 1})
    claim_now(kit, job, "w1", stale_before_ms=0)
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    assert kit.worker.handle(delivery_of(kit.record(job.id, T0, receive_count=2))) == Outcome.DEAD
    assert calls == []
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and row.attempt == 1
    assert "worker lost during attempt 1" in row.error
    assert kit.drain.bodies(kit.settings.dead_run_queue_url)[0]["run_id"] == run_id(job.id, T0)


def test_a_run_of_a_deleted_job_is_skipped(kit: Kit, calls: list[TargetCall]) -> None:
    job = kit.due_job(command="record")
    kit.jobs.delete(job, deleted_at_ms=T0, retention_days=None)
    assert kit.deliver(job) == Outcome.SKIPPED
    assert calls == []
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SKIPPED
    assert "deleted" in row.error and row.sweep_at is None


def test_a_message_for_a_run_without_a_row_creates_it_at_the_claim_and_runs_it(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a scheduled run whose message is its only record (the scheduler writes no row)
    job = kit.make_job(command="record")
    message = kit.record(job.id, T0) | {
        "body": json.dumps(
            {
                "job_id": job.id,
                "scheduled_for": T0,
                "dispatch_at": T0 + 700,
                "enqueued_at": T0 + 900,
                "term": 7,
            }
        )
    }
    # When it is delivered
    assert kit.worker.handle(delivery_of(message)) == Outcome.SUCCEEDED
    # Then the claim created the row from the message, outside the sweep index, and the try succeeded
    assert len(calls) == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 1
    assert (row.dispatch_at, row.enqueued_at, row.term) == (T0 + 700, T0 + 900, 7)
    assert row.lateness_ms == kit.clock() - T0 and row.sweep_at is None
    assert row.expires_at_s is not None and row.expires_at_s > (T0 + 900) // 1000
    # And a copy of the message after the success is refused: the fire ran once
    assert kit.worker.handle(delivery_of(message | {"messageId": "m-2"})) == Outcome.DROPPED
    assert len(calls) == 1


def test_a_lost_workers_run_is_taken_over_by_the_redelivery_of_its_message(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a worker that claimed the run (creating its row) and vanished: no heartbeat since
    job = kit.make_job(command="record")
    claim_scheduled_now(kit, job, "lost")
    # When its message comes back before the heartbeat is stale, it is dropped
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 - 1000)
    assert kit.deliver(job) == Outcome.DROPPED
    # And when it comes back after (its visibility, set at the claim, runs out then), it takes the run over
    kit.clock.advance(kit.settings.heartbeat_interval_s * 1000 + 1000)
    assert kit.deliver(job) == Outcome.SUCCEEDED
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 2 and row.worker != "lost"
    assert len(calls) == 1


def test_a_dropped_duplicate_of_a_running_run_does_not_leave_it_unguarded(
    kit: Kit, calls: list[TargetCall]
) -> None:
    # Given a scheduled run (its message is its only record) whose worker claimed it and is still running it
    job = kit.make_job(command="record")
    claim_scheduled_now(kit, job, "slow")
    kit.clock.advance(30_000)
    # When SQS delivers a duplicate of that same message (at least once) to another worker
    try:
        kit.worker.handle(delivery_of(kit.record(job.id, T0, receive_count=2)))
        message_kept = (
            False  # acknowledged: the event source mapping deletes the message, the slow worker's too
        )
    except Deferred:
        message_kept = True  # handed back: the message comes again
    # And the slow worker then vanishes: no beat, no result
    # Then the run is still recovered as a lost worker's, by the sweeper or by the message coming back
    for _ in range(10):  # ten minutes, the sweeper's pass each minute
        kit.clock.advance(60_000)
        kit.build_sweeper().sweep()
        if message_kept and kit.runs.get(job.id, T0).status is RunStatus.RUNNING:
            with contextlib.suppress(Deferred):  # handed back again: it comes again
                kit.deliver(job)
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is not RunStatus.RUNNING, "still running under the vanished worker"
    # its lost try counted and recorded, a retry on its way (the worker field names the last try's worker)
    assert row.status is RunStatus.RETRYING
    assert [t.error for t in row.tries] == [row.error] and "worker lost during attempt 1" in (row.error or "")


def test_a_malformed_message_fails_the_record(worker: Worker, record: Callable[..., dict[str, Any]]) -> None:
    bad = record("j", T0) | {"body": "not json"}
    with pytest.raises(ValueError, match="malformed run message"):
        worker.handle(delivery_of(bad))


@pytest.mark.parametrize(
    "body",
    [
        '{"job_id": "j_a", "scheduled_for": true}',  # a bool is an int in Python, not in the message
        '{"job_id": "j_a", "scheduled_for": 1.5}',
        '{"job_id": "j_a", "scheduled_for": 1000.0}',
        '{"job_id": "j_a", "scheduled_for": "1000"}',
        '{"job_id": "j_a", "scheduled_for": 1000, "enqueued_at": false}',
        '{"job_id": "j_a", "scheduled_for": 1000, "dispatch_at": 2.5}',
        '{"job_id": 7, "scheduled_for": 1000}',
        '{"scheduled_for": 1000}',
    ],
)
def test_a_message_field_of_another_type_is_malformed(body: str) -> None:
    with pytest.raises(ValueError, match="malformed run message"):
        parse_run_message(body)


@pytest.mark.parametrize(
    "body",
    [
        '{"job_id": "j_a", "scheduled_for": 1000000000000000000000000000000}',  # past year 9999
        '{"job_id": "j_a", "scheduled_for": -100000000000000000000}',  # before year 1
        '{"job_id": "j_a", "scheduled_for": 1000, "enqueued_at": 9223372036854775808}',
        '{"job_id": "j_a", "scheduled_for": 1000, "dispatch_at": -99999999999999999}',
        '{"job_id": "j_a", "scheduled_for": 1000, "term": -1}',
        '{"job_id": "j_a", "scheduled_for": 1000, "term": 9223372036854775808}',  # past a 64-bit column
    ],
)
def test_a_message_instant_no_date_can_hold_or_a_term_out_of_range_is_malformed(body: str) -> None:
    with pytest.raises(ValueError, match="malformed run message"):
        parse_run_message(body)


def test_a_message_with_integer_fields_parses() -> None:
    message = parse_run_message('{"job_id": "j_a", "scheduled_for": 1000, "enqueued_at": 900, "term": null}')
    assert (message.job_id, message.scheduled_for, message.enqueued_at, message.term) == (
        "j_a",
        1000,
        900,
        None,
    )


def test_a_failed_try_retries_with_backoff_then_succeeds_with_the_same_key(
    kit: Kit, sent: list[dict[str, Any]]
) -> None:
    # Given a job whose command fails its first attempt
    job = kit.due_job(command="fail", input={"times": 1}, retry={"backoff_s": 60})
    # When the first delivery fails
    assert kit.deliver(job) == Outcome.RETRYING
    # Then the run waits for its retry, due in 60 s, re-enqueued with that SQS delay
    row = kit.runs.get(job.id, T0)
    assert row is not None
    assert row.status == RunStatus.RETRYING and row.attempt == 1
    assert "attempt 1 failed on purpose" in row.error
    assert row.retry_at == kit.clock() + 60_000
    assert row.sweep_at == row.retry_at + kit.settings.sweep_queued_after_s * 1000
    assert len(sent) == 1 and sent[0]["DelaySeconds"] == 60
    assert json.loads(sent[0]["MessageBody"]) == {
        "job_id": job.id,
        "scheduled_for": T0,
        "enqueued_at": kit.clock(),
    }
    # An early copy (before the retry is due) is dropped
    assert kit.deliver(job) == Outcome.DROPPED
    # When the delayed message arrives
    kit.clock.advance(60_000)
    assert kit.deliver(job) == Outcome.SUCCEEDED
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 2
    assert row.error is None and row.retry_at is None


def test_retry_delays_double_up_to_the_cap(kit: Kit, sent: list[dict[str, Any]]) -> None:
    job = kit.due_job(command="fail", retry={"max_attempts": 7, "backoff_s": 30, "max_backoff_s": 300})
    for _ in range(6):
        assert kit.deliver(job) == Outcome.RETRYING
        kit.clock.advance(sent[-1]["DelaySeconds"] * 1000)
    # min(backoff_s * 2^(attempt-1), max_backoff_s)
    assert [e["DelaySeconds"] for e in sent] == [30, 60, 120, 240, 300, 300]
    assert job.retry.delay_s(1) == 30


def test_max_attempts_lowered_below_the_tries_made_ends_dead_without_running(
    kit: Kit, calls: list[TargetCall]
) -> None:
    job = kit.due_job(command="fail", retry={"max_attempts": 3, "backoff_s": 0})
    assert kit.deliver(job) == Outcome.RETRYING
    # the owner lowers max_attempts to 1 while the retry waits
    changed = job.model_dump() | {"retry": {**job.retry.model_dump(), "max_attempts": 1}}
    stored = kit.jobs.get(job.id)
    assert stored.state is not None
    kit.jobs.replace(
        Rewrite(
            Job.model_validate(changed | {"target": {"type": "command", "name": "record"}}),
            stored.state,
            expected_updated_at=to_ms(job.updated_at),
        )
    )
    assert kit.deliver(job) == Outcome.DEAD
    assert calls == []
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and row.attempt == 1
    assert "out of attempts" in row.error


def test_a_failing_run_is_listed_among_its_owners_failed_runs_until_it_succeeds(kit: Kit) -> None:
    # Given a scheduled run whose row knows no owner (as the scheduler saves it) and whose first try fails
    job = kit.due_job(command="fail", input={"times": 1}, retry={"backoff_s": 60})
    kit.runs.force(job.id, T0, owner=None)
    assert kit.deliver(job) == Outcome.RETRYING
    # Then it is among its owner's failed runs (GET /runs?status=retrying), until its retry succeeds
    assert [row.key for row in kit.runs.list_failed(job.owner, 10)[0]] == [(job.id, T0)]
    kit.clock.advance(60_000)
    assert kit.deliver(job) == Outcome.SUCCEEDED
    assert kit.runs.list_failed(job.owner, 10) == ([], None)


def test_a_scheduled_run_dead_without_a_failed_try_is_listed_among_its_owners_failed_runs(kit: Kit) -> None:
    # Given a scheduled run whose row its claim made (no owner on it), claimed by a worker that vanished on the
    # only attempt its job allows
    job = kit.make_job(command="record", retry={"max_attempts": 1})
    claim_scheduled_now(kit, job, "lost")
    # When its message comes back once the heartbeat is stale: out of attempts, dead without running again
    kit.clock.advance((kit.settings.heartbeat_stale_s + 1) * 1000)
    assert kit.deliver(job) == Outcome.DEAD
    # Then it is among its owner's failed runs (GET /runs?status=dead), as a run dead of a failed try is
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.DEAD
    assert [r.key for r in kit.runs.list_failed(job.owner, 10)[0]] == [(job.id, T0)]


def test_a_message_with_labels_parses_and_one_whose_labels_are_not_two_strings_is_malformed() -> None:
    message = parse_run_message(
        '{"job_id": "j_a", "scheduled_for": 1000, "labels": {"priority": "low", "owner": "x"}}'
    )
    assert message.labels == LatenessLabels("low", "x")
    assert parse_run_message('{"job_id": "j_a", "scheduled_for": 1000, "labels": null}').labels is None
    for labels in ('"low"', '{"priority": "low"}', '{"priority": "low", "owner": 3}', "[1, 2]"):
        with pytest.raises(ValueError, match="malformed run message"):
            parse_run_message(f'{{"job_id": "j_a", "scheduled_for": 1000, "labels": {labels}}}')


def test_a_messages_labels_travel_in_its_body_and_back() -> None:
    sent = RunMessage("j_a", 1000, enqueued_at=900, owner="team-a", labels=LatenessLabels("high", "other"))
    body = run_message_body(sent)
    assert json.loads(body)["labels"] == {"priority": "high", "owner": "other"}
    assert parse_run_message(body).labels == sent.labels
    assert "labels" not in json.loads(run_message_body(RunMessage("j_a", 1000)))
