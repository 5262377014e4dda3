"""The worker on the in-memory fakes: claim, success, duplicates, lost workers, deleted jobs, retries and dead runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from jobsched.adapters.queue import delivery_of
from jobsched.clock import FakeClock
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Worker
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Job, RunStatus, to_ms
from jobsched.ports.jobs import Rewrite
from jobsched.ports.runs import ClaimRequest, new_run, run_id
from jobsched.settings import Settings
from jobsched.targets import TargetCall
from tests.support.worker import T0

from .conftest import FakeDrain as Drain


def test_a_run_succeeds_once_and_records_its_try(
    runs: MemoryRunStore,
    calls: list[TargetCall],
    clock: FakeClock,
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    # Given a saved run of a job whose command echoes its input
    job = due_job(command="record", input={"day": "monday"})
    # When its message is delivered
    outcome = deliver(job)
    # Then the command ran once with the run id as key, and the run is succeeded with its facts
    assert outcome == Outcome.SUCCEEDED
    assert [c.run_id for c in calls] == [run_id(job.id, T0)]
    assert calls[0].input == {"day": "monday"} and calls[0].attempt == 1
    row = runs.get(job.id, T0)
    assert row is not None
    assert row.status == RunStatus.SUCCEEDED
    assert row.attempt == 1
    assert row.started_at == clock() and row.finished_at == clock()
    assert row.lateness_ms == 1_500
    assert row.worker
    assert row.sweep_at is None and row.error is None


def test_a_duplicate_delivery_executes_the_target_once(
    worker: Worker,
    record: Callable[..., dict[str, Any]],
    calls: list[TargetCall],
    due_job: Callable[..., Job],
) -> None:
    job = due_job(command="record")
    assert worker.handle(delivery_of(record(job.id, T0, message_id="a"))) == Outcome.SUCCEEDED
    assert worker.handle(delivery_of(record(job.id, T0, message_id="b", receive_count=2))) == Outcome.DROPPED
    assert len(calls) == 1


def test_a_duplicate_while_the_first_is_running_loses_the_claim(
    runs: MemoryRunStore,
    calls: list[TargetCall],
    clock: FakeClock,
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    job = due_job(command="record")
    claimed = runs.claim(
        ClaimRequest(
            job.id,
            T0,
            worker="other",
            now_ms=clock(),
            stale_before_ms=clock() - 120_000,
            retry_due_by_ms=clock(),
        )
    ).claimed
    assert claimed
    clock.advance(60_000)  # its heartbeat is a minute old: fresh
    assert deliver(job) == Outcome.DROPPED
    assert calls == []
    row = runs.get(job.id, T0)
    assert row is not None and row.worker == "other" and row.status == RunStatus.RUNNING


def test_a_redelivery_after_a_lost_worker_runs_again_with_the_same_key(
    worker: Worker,
    runs: MemoryRunStore,
    record: Callable[..., dict[str, Any]],
    calls: list[TargetCall],
    clock: FakeClock,
    settings: Settings,
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    # Given a run whose first worker claimed it, ran the target, then died without a word
    job = due_job(command="record")
    assert deliver(job) == Outcome.SUCCEEDED  # the first run of the target
    first_key = calls[0].idempotency_key
    # rewind: as if that worker had died before recording its result
    runs.force(job.id, T0, status=RunStatus.RUNNING, heartbeat_at=clock())
    # When SQS redelivers the message after the heartbeat went stale
    clock.advance(settings.heartbeat_stale_s * 1000 + 1)
    assert worker.handle(delivery_of(record(job.id, T0, receive_count=2))) == Outcome.SUCCEEDED
    # Then the target ran again, as attempt 2, with the same idempotency key
    assert [c.idempotency_key for c in calls] == [first_key, first_key]
    assert [c.attempt for c in calls] == [1, 2]
    row = runs.get(job.id, T0)
    assert row is not None and row.attempt == 2 and row.status == RunStatus.SUCCEEDED
    assert row.lateness_ms == 1_500  # the first try's lateness is kept


def test_a_lost_worker_on_the_last_attempt_ends_dead_without_running_again(
    worker: Worker,
    runs: MemoryRunStore,
    record: Callable[..., dict[str, Any]],
    calls: list[TargetCall],
    clock: FakeClock,
    settings: Settings,
    drain: Drain,
    due_job: Callable[..., Job],
) -> None:
    job = due_job(command="record", retry={"max_attempts": 1})
    runs.claim(
        ClaimRequest(job.id, T0, worker="w1", now_ms=clock(), stale_before_ms=0, retry_due_by_ms=clock())
    )
    clock.advance(settings.heartbeat_stale_s * 1000 + 1)
    assert worker.handle(delivery_of(record(job.id, T0, receive_count=2))) == Outcome.DEAD
    assert calls == []
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and row.attempt == 1
    assert "worker lost during attempt 1" in row.error
    assert drain.bodies(settings.dead_run_queue_url)[0]["run_id"] == run_id(job.id, T0)


def test_a_run_of_a_deleted_job_is_skipped(
    runs: MemoryRunStore,
    jobs: Any,
    calls: list[TargetCall],
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    job = due_job(command="record")
    jobs.delete(job, deleted_at_ms=T0, retention_days=None)
    assert deliver(job) == Outcome.SKIPPED
    assert calls == []
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SKIPPED
    assert "deleted" in row.error and row.sweep_at is None


def test_a_message_for_a_run_without_a_row_creates_it_at_the_claim_and_runs_it(
    runs: MemoryRunStore,
    calls: list[TargetCall],
    clock: FakeClock,
    make_job: Callable[..., Job],
    worker: Worker,
    record: Callable[..., dict[str, Any]],
) -> None:
    # Given a scheduled run whose message is its only record (the scheduler writes no row)
    job = make_job(command="record")
    message = record(job.id, T0) | {
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
    assert worker.handle(delivery_of(message)) == Outcome.SUCCEEDED
    # Then the claim created the row from the message, outside the sweep index, and the try succeeded
    assert len(calls) == 1
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 1
    assert (row.dispatch_at, row.enqueued_at, row.term) == (T0 + 700, T0 + 900, 7)
    assert row.lateness_ms == clock() - T0 and row.sweep_at is None
    assert row.expires_at_s is not None and row.expires_at_s > (T0 + 900) // 1000
    # And a copy of the message after the success is refused: the fire ran once
    assert worker.handle(delivery_of(message | {"messageId": "m-2"})) == Outcome.DROPPED
    assert len(calls) == 1


def test_a_lost_workers_run_is_taken_over_by_the_redelivery_of_its_message(
    runs: MemoryRunStore,
    calls: list[TargetCall],
    clock: FakeClock,
    make_job: Callable[..., Job],
    deliver: Callable[..., str],
    settings: Settings,
) -> None:
    # Given a worker that claimed the run (creating its row) and vanished: no heartbeat since
    job = make_job(command="record")
    assert runs.claim(
        ClaimRequest(
            job.id,
            T0,
            worker="lost",
            now_ms=clock(),
            stale_before_ms=clock() - 1,
            retry_due_by_ms=clock(),
            create=new_run(job.id, T0, now_ms=clock(), retention_days=90, sweep_after_ms=None),
        )
    ).claimed
    # When its message comes back before the heartbeat is stale, it is dropped
    clock.advance(settings.heartbeat_stale_s * 1000 - 1000)
    assert deliver(job) == Outcome.DROPPED
    # And when it comes back after (its visibility, set at the claim, runs out then), it takes the run over
    clock.advance(settings.heartbeat_interval_s * 1000 + 1000)
    assert deliver(job) == Outcome.SUCCEEDED
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 2 and row.worker != "lost"
    assert len(calls) == 1


def test_a_malformed_message_fails_the_record(worker: Worker, record: Callable[..., dict[str, Any]]) -> None:
    bad = record("j", T0) | {"body": "not json"}
    with pytest.raises(ValueError, match="malformed run message"):
        worker.handle(delivery_of(bad))


def test_a_failed_try_retries_with_backoff_then_succeeds_with_the_same_key(
    runs: MemoryRunStore,
    clock: FakeClock,
    sent: list[dict[str, Any]],
    settings: Settings,
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    # Given a job whose command fails its first attempt
    job = due_job(command="fail", input={"times": 1}, retry={"backoff_s": 60})
    # When the first delivery fails
    assert deliver(job) == Outcome.RETRYING
    # Then the run waits for its retry, due in 60 s, re-enqueued with that SQS delay
    row = runs.get(job.id, T0)
    assert row is not None
    assert row.status == RunStatus.RETRYING and row.attempt == 1
    assert "attempt 1 failed on purpose" in row.error
    assert row.retry_at == clock() + 60_000
    assert row.sweep_at == row.retry_at + settings.sweep_queued_after_s * 1000
    assert len(sent) == 1 and sent[0]["DelaySeconds"] == 60
    assert json.loads(sent[0]["MessageBody"]) == {"job_id": job.id, "scheduled_for": T0}
    # An early copy (before the retry is due) is dropped
    assert deliver(job) == Outcome.DROPPED
    # When the delayed message arrives
    clock.advance(60_000)
    assert deliver(job) == Outcome.SUCCEEDED
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 2
    assert row.error is None and row.retry_at is None


def test_retry_delays_double_up_to_the_cap(
    clock: FakeClock,
    sent: list[dict[str, Any]],
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    job = due_job(command="fail", retry={"max_attempts": 7, "backoff_s": 30, "max_backoff_s": 300})
    for _ in range(6):
        assert deliver(job) == Outcome.RETRYING
        clock.advance(sent[-1]["DelaySeconds"] * 1000)
    # min(backoff_s * 2^(attempt-1), max_backoff_s)
    assert [e["DelaySeconds"] for e in sent] == [30, 60, 120, 240, 300, 300]
    assert job.retry.delay_s(1) == 30


def test_max_attempts_lowered_below_the_tries_made_ends_dead_without_running(
    runs: MemoryRunStore,
    jobs: Any,
    calls: list[TargetCall],
    due_job: Callable[..., Job],
    deliver: Callable[..., str],
) -> None:
    job = due_job(command="fail", retry={"max_attempts": 3, "backoff_s": 0})
    assert deliver(job) == Outcome.RETRYING
    # the owner lowers max_attempts to 1 while the retry waits
    changed = job.model_dump() | {"retry": {**job.retry.model_dump(), "max_attempts": 1}}
    stored = jobs.get(job.id)
    assert stored.state is not None
    jobs.replace(
        Rewrite(
            Job.model_validate(changed | {"target": {"type": "command", "name": "record"}}),
            stored.state,
            expected_updated_at=to_ms(job.updated_at),
        )
    )
    assert deliver(job) == Outcome.DEAD
    assert calls == []
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and row.attempt == 1
    assert "out of attempts" in row.error


def test_a_failing_run_is_listed_among_its_owners_failed_runs_until_it_succeeds(
    runs: MemoryRunStore, clock: FakeClock, due_job: Callable[..., Job], deliver: Callable[..., str]
) -> None:
    # Given a scheduled run whose row knows no owner (as the scheduler saves it) and whose first try fails
    job = due_job(command="fail", input={"times": 1}, retry={"backoff_s": 60})
    runs.force(job.id, T0, owner=None)
    assert deliver(job) == Outcome.RETRYING
    # Then it is among its owner's failed runs (GET /runs?status=retrying), until its retry succeeds
    assert [row.key for row in runs.list_failed(job.owner, 10)[0]] == [(job.id, T0)]
    clock.advance(60_000)
    assert deliver(job) == Outcome.SUCCEEDED
    assert runs.list_failed(job.owner, 10) == ([], None)
