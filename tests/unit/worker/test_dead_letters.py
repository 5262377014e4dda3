"""The run queue's dead-letter queue, drained by the sweeper on the in-memory fakes: a scheduled run has no row
and no sweep keys before its claim, so a message SQS gives up on must still end as a recorded run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from jobsched.api.run_views import run_view
from jobsched.api.triggers import send_manual
from jobsched.aws.queue import dead_letter_of
from jobsched.aws.wire import run_message_body
from jobsched.domain.retries import DEAD_LETTER_WORKER
from jobsched.domain.runs import new_run, rerun_request
from jobsched.domain.sweeper import Sweeper
from jobsched.memory.queue import MemoryDeadLetters
from jobsched.models import Job, RunKind, RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.runs import ClaimRequest, RunKey, RunRow
from tests.support.worker import T0, Kit, claim_now


class RecordingSender:
    """A run queue that keeps what it is sent."""

    def __init__(self) -> None:
        self.messages: list[RunMessage] = []

    def send(self, messages: Sequence[RunMessage]) -> None:
        self.messages.extend(messages)


@pytest.fixture
def letters() -> MemoryDeadLetters:
    return MemoryDeadLetters()


@pytest.fixture
def sweeper(build_sweeper: Callable[..., Sweeper], letters: MemoryDeadLetters) -> Sweeper:
    return build_sweeper(dead_letters=letters)


def test_a_message_dead_lettered_before_any_claim_ends_as_a_recorded_dead_run(kit: Kit) -> None:
    # Given a scheduled run whose message was redriven to the dead-letter queue before any worker claimed it
    job = kit.make_job(command="echo")
    kit.letters.redrive(
        RunMessage(job.id, T0, dispatch_at=T0 + 200, enqueued_at=T0 + 300, term=4), receive_count=5
    )
    assert kit.runs.get(job.id, T0) is None
    # When the sweeper passes
    report = kit.sweeper.sweep()
    # Then the run is recorded dead with no try, its dead-run message and alert went out, and the letter is gone
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.DEAD and row.attempt == 0
    assert row.error is not None and "dead-lettered after 5 deliveries without a try" in row.error
    assert (row.dispatch_at, row.enqueued_at, row.term) == (T0 + 200, T0 + 300, 4)
    assert row.sweep_at is None and not row.notify_pending
    assert [d.run_id for d in kit.dead_runs.notified] == [row.run_id] and kit.dead_runs.notified[
        0
    ].attempts == 0
    assert report.dead_letters == 1 and report.dead == 1 and kit.letters.letters == []
    # And a late copy of its message on the run queue is refused: the fire does not run after its alert
    assert not kit.runs.claim(
        ClaimRequest(RunKey(job.id, T0), worker="w", now_ms=T0, stale_before_ms=0, retry_due_by_ms=T0)
    ).claimed


def test_a_queued_row_of_a_dead_lettered_message_is_recorded_dead(kit: Kit) -> None:
    # Given a run saved queued (a manual run, or a scheduled run of design's Upgrades in flight) whose message was
    # dead-lettered
    job = kit.due_job(command="echo")
    kit.letters.redrive(RunMessage(job.id, T0))
    kit.sweeper.sweep()
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.DEAD and row.attempt == 0
    assert len(kit.dead_runs.notified) == 1 and kit.letters.letters == []


def test_a_lost_workers_run_whose_message_was_dead_lettered_is_a_failed_try(kit: Kit) -> None:
    # Given a worker that claimed the run (no sweep keys) and vanished, and its message dead-lettered
    job = kit.make_job(command="echo", retry={"max_attempts": 3, "backoff_s": 10})
    now = kit.clock()
    create = new_run(job.id, T0, now_ms=now, retention_days=90, sweep_after_ms=None)
    assert claim_now(kit, job, "lost", stale_before_ms=now, create=create).claimed
    kit.letters.redrive(RunMessage(job.id, T0))
    # When the sweeper passes while the heartbeat is fresh, the letter is kept for the next pass
    assert kit.sweeper.sweep().lost_workers == 0 and len(kit.letters.letters) == 1
    assert kit.runs.get(job.id, T0).status is RunStatus.RUNNING  # type: ignore[union-attr]
    # And once the heartbeat is stale, the lost try fails: retrying with backoff, in the sweep index
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000 + 1)
    report = kit.sweeper.sweep()
    row = kit.runs.get(job.id, T0)
    assert report.lost_workers == 1 and kit.letters.letters == []
    assert (
        row is not None and row.status is RunStatus.RETRYING and row.attempt == 1 and row.sweep_at is not None
    )


def test_a_finished_runs_letter_is_deleted_and_a_malformed_one_dropped(kit: Kit) -> None:
    job = kit.make_job(command="echo")
    assert kit.deliver(job) == "succeeded"
    kit.letters.redrive(RunMessage(job.id, T0))
    kit.letters.letters.append(dead_letter_of("not json", "dlq-bad"))
    kit.sweeper.sweep()
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.SUCCEEDED and kit.letters.letters == []
    assert kit.dead_runs.notified == []


def test_a_letter_whose_fire_no_date_can_hold_is_dropped_without_a_run(kit: Kit) -> None:
    # Given letters of the job's messages whose fire is past year 9999 or before year 1 (no run has such a fire)
    job = kit.make_job(command="echo")
    for scheduled_for in (10**30, -(10**20), 2**63):
        kit.letters.redrive(RunMessage(job.id, scheduled_for, enqueued_at=T0), receive_count=5)
    # When the sweeper passes
    report = kit.sweeper.sweep()
    # Then they are dropped as malformed: no dead run of a fire that cannot exist, no alert, the queue empty
    assert kit.letters.letters == [] and report.dead == 0 and report.errors == []
    assert kit.dead_runs.notified == []


def test_a_failing_dead_letter_queue_is_counted_and_the_pass_goes_on(kit: Kit) -> None:
    job = kit.make_job(command="echo")
    kit.letters.redrive(RunMessage(job.id, T0))

    def broken(limit: int) -> list[object]:
        raise ConnectionError("SQS unreachable")

    kit.letters.receive = broken  # type: ignore[method-assign,assignment]
    report = kit.sweeper.sweep()
    assert report.errors == ["dead letters: ConnectionError"] and len(kit.letters.letters) == 1


def test_a_storage_error_after_the_dead_letters_claim_does_not_turn_it_into_a_lost_workers_try(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a scheduled run whose message was dead-lettered before any try
    job = kit.make_job(command="echo", retry={"max_attempts": 3, "backoff_s": 10})
    kit.letters.redrive(RunMessage(job.id, T0), receive_count=5)
    # When the sweeper's claim of it succeeds but the job's spec cannot be read (a throttled GetItem)
    get_spec = kit.jobs.get_spec
    failures = iter([StoreUnavailable("jobs table throttled")])

    def flaky_get_spec(job_id: str) -> object:
        error = next(failures, None)
        if error is not None:
            raise error
        return get_spec(job_id)

    monkeypatch.setattr(kit.jobs, "get_spec", flaky_get_spec)
    assert kit.sweeper.sweep().errors  # the letter stays for a later pass
    # Then later passes (the letter back, the run's claim now stale) still record the run dead without a try
    _passes_record_it_dead_without_a_try(kit, job)


def _passes_record_it_dead_without_a_try(kit: Kit, job: Job) -> None:
    """Five sweeper passes a minute apart (the letter comes back, a claim left by a pass goes stale), then the
    run at ``T0`` is dead without a try, its owner notified once, the letter gone and no try of it enqueued."""
    for _ in range(5):
        kit.clock.advance(60_000)
        kit.sweeper.sweep()
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.DEAD and row.attempt == 0, (row.status, row.error)
    assert row.error is not None and "without a try" in row.error and row.tries == ()
    assert len(kit.dead_runs.notified) == 1 and kit.letters.letters == []
    assert kit.drain.bodies(kit.settings.run_queue_url) == []  # no try of it was enqueued


@pytest.mark.parametrize("saved_queued", [False, True], ids=["message-only", "queued-row-in-sweep-index"])
def test_a_dead_letter_claim_left_by_a_crashed_pass_is_not_taken_for_a_lost_workers_try(
    kit: Kit, saved_queued: bool
) -> None:
    # Given a sweeper pass that claimed a dead-lettered run to record it dead, then stopped (its Lambda timed
    # out) before the dead write: the run is running under the sweeper's claim, and the letter is still there.
    # The run had no row (a scheduled run), or a queued one in the sweep index (a manual run).
    job = kit.make_job(command="echo", retry={"max_attempts": 3, "backoff_s": 10})
    if saved_queued:
        kit.make_run(job)
    message = RunMessage(job.id, T0)
    kit.letters.redrive(message, receive_count=5)
    create = (
        None
        if saved_queued
        else new_run(job.id, T0, now_ms=kit.clock(), retention_days=90, sweep_after_ms=None)
    )
    _claim_as_a_dead_letter_pass(kit, job, create)
    # When later passes find the letter again, the claim's heartbeat long stale
    # Then the run is recorded dead without a try (that claim ran none), not retried as a lost worker's
    _passes_record_it_dead_without_a_try(kit, job)


def test_a_dead_lettered_scheduled_run_is_listed_among_its_owners_failed_runs(kit: Kit) -> None:
    # Given a scheduled run (no row) whose message was dead-lettered before any claim
    job = kit.make_job(command="echo")
    kit.letters.redrive(RunMessage(job.id, T0), receive_count=5)
    # When the sweeper records it dead
    assert kit.sweeper.sweep().dead == 1
    # Then its owner finds it among the failed runs (GET /runs?status=dead)
    assert [r.key for r in kit.runs.list_failed(job.owner, 10)[0]] == [(job.id, T0)]


def test_a_dead_letter_claim_left_by_a_crashed_pass_is_not_taken_for_a_lost_workers_try_by_a_redelivery(
    kit: Kit,
) -> None:
    # Given a manual run (a queued row in the sweep index, so the sweeper re-enqueued it while its first message
    # was being handed back: a copy is still on the run queue) whose first message was dead-lettered, and a
    # sweeper pass that claimed it to record it dead, then stopped before the dead write
    job = kit.make_job(command="echo", retry={"max_attempts": 3, "backoff_s": 10})
    kit.make_run(job)
    _claim_as_a_dead_letter_pass(kit, job)
    # When the copy on the run queue reaches a worker once that claim's heartbeat is stale
    kit.clock.advance((kit.settings.heartbeat_stale_s + 1) * 1000)
    kit.deliver(job, T0)
    # Then that claim, which ran no try, is not recorded as a lost worker's try ("worker lost during attempt 1",
    # by the sweeper) nor counted as an attempt: the sweeper's own passes record it dead without a try
    row = kit.runs.get(job.id, T0)
    assert row is not None
    phantom = [t for t in row.tries if t.worker == DEAD_LETTER_WORKER]
    assert phantom == [], (row.status, row.attempt, phantom)
    # and it is recorded dead as the pass would have (SQS gave up on its message), with its owner told once
    assert row.status is RunStatus.DEAD and row.error == "run message dead-lettered without a try"


def test_a_letter_of_an_earlier_round_does_not_kill_the_owners_re_run(kit: Kit) -> None:
    # Given a scheduled run recorded dead from its dead-lettered message, and a second copy of that message (the
    # sweeper's, sent two minutes on) still in the dead-letter queue behind a backlog
    job = kit.make_job(command="echo")
    kit.letters.redrive(RunMessage(job.id, T0, dispatch_at=T0, enqueued_at=T0, term=1), receive_count=5)
    kit.sweeper.sweep()
    assert kit.runs.get(job.id, T0).status is RunStatus.DEAD  # type: ignore[union-attr]
    alerts = len(kit.dead_runs.notified)
    # When its owner re-runs it an hour later (the run queued again, its message sent) and then the drain
    # reaches the older letter
    kit.clock.advance(3_600_000)
    now = kit.clock()
    rerun = kit.runs.rerun(
        rerun_request(RunKey(job.id, T0), now_ms=now, sweep_at_ms=now + 120_000, retention_days=90)
    )
    assert rerun.done and rerun.row is not None
    sent = RecordingSender()
    send_manual(sent, run_view(rerun.row))
    kit.letters.redrive(RunMessage(job.id, T0, enqueued_at=T0 + 120_000), receive_count=5)
    report = kit.sweeper.sweep()
    # Then the letter is deleted without effect: the re-run stays queued, no new dead-run message or alert
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.QUEUED and row.reruns == 1
    assert len(kit.dead_runs.notified) == alerts and report.dead == 0 and kit.letters.letters == []
    # And the re-run's own message runs it
    (message,) = sent.messages
    assert message.enqueued_at == now
    assert kit.deliver(job, T0) == "succeeded"


def test_a_letter_of_a_fire_later_backfilled_does_not_kill_the_backfilled_run(kit: Kit) -> None:
    # Given a scheduled fire whose message was dead-lettered before any claim (no row), behind a backlog
    job = kit.make_job(command="echo")
    kit.letters.redrive(RunMessage(job.id, T0, dispatch_at=T0, enqueued_at=T0, term=1), receive_count=5)
    # When its owner backfills the fire first (a backfill run, queued) and the drain reaches the letter after
    kit.clock.advance(3_600_000)
    now = kit.clock()
    assert kit.runs.put_new(new_run(job.id, T0, now_ms=now, retention_days=90, kind=RunKind.BACKFILL)) is None
    report = kit.sweeper.sweep()
    # Then the backfilled run stays queued for its own message: no dead run, no alert, the letter gone
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.QUEUED and row.kind is RunKind.BACKFILL
    assert kit.dead_runs.notified == [] and report.dead == 0 and kit.letters.letters == []
    assert kit.deliver(job, T0) == "succeeded"


def test_a_letter_of_the_current_round_still_records_its_run_dead(kit: Kit) -> None:
    # Given a backfilled run whose own message (sent with the backfill) was dead-lettered
    job = kit.make_job(command="echo")
    now = kit.clock()
    assert kit.runs.put_new(new_run(job.id, T0, now_ms=now, retention_days=90, kind=RunKind.BACKFILL)) is None
    kit.letters.redrive(RunMessage(job.id, T0, enqueued_at=now), receive_count=5)
    # When the drain reaches it, the run is recorded dead with its alert
    assert kit.sweeper.sweep().dead == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.DEAD and len(kit.dead_runs.notified) == 1


def test_a_run_re_run_between_the_drains_read_and_its_claim_is_not_claimed(kit: Kit) -> None:
    # Given a manual run whose own message was dead-lettered, re-queued (a new round) just after the drain read it
    job = kit.make_job(command="echo")
    now = kit.clock()
    kit.runs.put_new(new_run(job.id, T0, now_ms=now, retention_days=90, kind=RunKind.MANUAL))
    kit.letters.redrive(RunMessage(job.id, T0, enqueued_at=now), receive_count=5)
    get_many = kit.runs.get_many

    def then_re_run(keys: Any) -> Any:
        rows = get_many(keys)  # the drain saw the queued row of the letter's round
        kit.runs.force(job.id, T0, enqueued_at=now + 60_000, reruns=1)  # a round queued since
        return rows

    kit.runs.get_many = then_re_run  # type: ignore[method-assign]
    # When it claims the run: the claim is conditioned on the letter's round
    report = kit.sweeper.sweep()
    # Then nothing is recorded: the row is left queued for its new round
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status is RunStatus.QUEUED and report.dead == 0
    assert kit.dead_runs.notified == []


def test_the_queue_adapter_parses_a_letters_body_once_and_marks_a_malformed_one() -> None:
    body = run_message_body(RunMessage("j_1", T0, enqueued_at=T0))
    assert dead_letter_of(body, "h", 5).message == RunMessage("j_1", T0, enqueued_at=T0)
    for bad in ("not json", '{"job_id": 1, "scheduled_for": 2}', '{"job_id": "j"}', "[]"):
        letter = dead_letter_of(bad, "h")
        assert letter.message is None and letter.body == bad and letter.receipt_handle == "h"


def _claim_as_a_dead_letter_pass(kit: Kit, job: Job, create: RunRow | None = None) -> None:
    """Claim run ``(job, T0)`` now as the sweeper's dead-letter pass does (``create``: the row a run without one
    gets)."""
    assert claim_now(kit, job, DEAD_LETTER_WORKER, stale_before_ms=kit.clock(), create=create).claimed
