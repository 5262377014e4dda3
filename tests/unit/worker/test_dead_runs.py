"""Out of attempts, the failure paths around the dead run's notifications on the in-memory fakes: a failed
notification stays owed and the sweeper sends it (again later if it fails again); a retry whose message was
lost is re-enqueued by the sweeper. The messages and alerts themselves: tests/integration/worker/test_dead_runs.py."""

from __future__ import annotations

from typing import Any

from jobsched.aws.clients import DEFAULT_CALLS
from jobsched.aws.queue import delivery_of
from jobsched.domain.retries import NOTIFY_RETRY_MS, Outcome
from jobsched.models import RunStatus
from jobsched.ports.run_messages import DeadRun
from jobsched.ports.runs import run_id
from tests.support.worker import T0, Kit


class FlakyNotifier:
    """A dead-run sink that fails its first ``failures`` calls, then records."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent: list[DeadRun] = []

    def notify(self, dead: DeadRun) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("SNS unreachable")
        self.sent.append(dead)


def test_a_failed_notification_stays_owed_and_the_sweeper_sends_it(kit: Kit) -> None:
    notifier = FlakyNotifier(failures=1)
    worker = kit.build_worker(dead_runs=notifier)
    job = kit.due_job(command="fail", retry={"max_attempts": 1})
    # When the alert cannot be sent at the run's death
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.DEAD
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and row.notify_pending is True
    assert notifier.sent == []
    # Then the sweeper, a minute later, sends it and clears the mark
    sweeper = kit.build_sweeper(dead_runs=notifier)
    kit.clock.advance(NOTIFY_RETRY_MS + 1_000)
    report = sweeper.sweep()
    assert report.notified == 1
    assert [d.run_id for d in notifier.sent] == [run_id(job.id, T0)]
    assert notifier.sent[0].owner == job.owner and notifier.sent[0].attempts == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and not row.notify_pending and row.sweep_at is None
    assert sweeper.sweep().notified == 0


def test_a_notification_failing_again_is_retried_later(kit: Kit) -> None:
    notifier = FlakyNotifier(failures=2)
    worker = kit.build_worker(dead_runs=notifier)
    sweeper = kit.build_sweeper(dead_runs=notifier)
    job = kit.due_job(command="fail", retry={"max_attempts": 1})
    worker.handle(delivery_of(kit.record(job.id, T0)))
    kit.clock.advance(NOTIFY_RETRY_MS + 1_000)
    first = sweeper.sweep()
    assert first.notified == 0 and first.deferred == 1
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    assert sweeper.sweep().notified == 1
    assert len(notifier.sent) == 1


def test_a_retry_that_could_not_be_enqueued_is_re_enqueued_by_the_sweeper(kit: Kit) -> None:
    class DownQueue:
        def send(self, messages: Any) -> None:
            raise ConnectionError("SQS unreachable")

    worker = kit.build_worker(queue=DownQueue())
    job = kit.due_job(command="fail", input={"times": 1}, retry={"backoff_s": 30})
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.RETRYING
    sweeper = kit.build_sweeper()
    kit.clock.advance(30_000)
    assert sweeper.sweep().requeued == 0  # retry due, but its message may still be on the way
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    assert sweeper.sweep().requeued == 1
    assert kit.drain.bodies(kit.settings.run_queue_url) == [
        {"job_id": job.id, "scheduled_for": T0, "enqueued_at": kit.clock()}  # sent now, in the run's round
    ]
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.SUCCEEDED


class SlowNotifier:
    """A dead-run sink whose first call takes over a minute (a slow SNS publish under the SDK's retries): while it
    hangs, ``meanwhile`` runs (the sweeper's pass of that minute); every call that completes is recorded."""

    def __init__(self) -> None:
        self.sent: list[DeadRun] = []
        self.meanwhile: Any = None
        self.calls = 0

    def notify(self, dead: DeadRun) -> None:
        self.calls += 1
        if self.calls == 1 and self.meanwhile is not None:
            self.meanwhile()
        self.sent.append(dead)


def test_a_dead_runs_alert_is_sent_once_when_its_sending_is_slow(kit: Kit) -> None:
    # Given a run out of attempts whose worker is sending its dead-run message and alert, slowly
    notifier = SlowNotifier()
    worker = kit.build_worker(dead_runs=notifier)
    sweeper = kit.build_sweeper(dead_runs=notifier)
    passes = []

    def sweeper_pass_while_the_worker_sends() -> None:
        # a live worker may still be at it this long after the dead write's clock reading: the dead write, the
        # dead-run message, the alert and the notified mark are each bounded by DEFAULT_CALLS (with retries)
        kit.clock.advance(round(4 * DEFAULT_CALLS.worst_case_s * 1000))
        passes.append(sweeper.sweep())

    notifier.meanwhile = sweeper_pass_while_the_worker_sends
    job = kit.due_job(command="fail", retry={"max_attempts": 1})
    # When the sweeper's pass runs while that sending hangs, and the sending then completes
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.DEAD
    assert len(passes) == 1
    # Then the owner got one dead-run message and one alert, not one from the worker and one from the sweeper
    assert [d.run_id for d in notifier.sent] == [run_id(job.id, T0)]
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and not row.notify_pending


def test_two_sweeper_passes_at_once_resend_an_owed_notification_once(kit: Kit) -> None:
    # Given a dead run whose notification the worker could not send (it is owed: notify_pending)
    worker = kit.build_worker(dead_runs=FlakyNotifier(failures=1))
    job = kit.due_job(command="fail", retry={"max_attempts": 1})
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.DEAD
    # When two sweeper passes run at once (EventBridge delivers a scheduled event at least once; Lambda retries
    # an asynchronous invocation that failed), the second while the first is sending
    notifier = SlowNotifier()
    first, second = kit.build_sweeper(dead_runs=notifier), kit.build_sweeper(dead_runs=notifier)
    reports = []
    notifier.meanwhile = lambda: reports.append(second.sweep())
    kit.clock.advance(NOTIFY_RETRY_MS + 1_000)
    reports.append(first.sweep())
    # Then the owner gets the dead-run message and the alert once
    assert [d.run_id for d in notifier.sent] == [run_id(job.id, T0)], reports
    row = kit.runs.get(job.id, T0)
    assert row is not None and not row.notify_pending
