"""Out of attempts, the failure paths around the dead run's notifications on the in-memory fakes: a failed
notification stays owed and the sweeper sends it (again later if it fails again); a retry whose message was
lost is re-enqueued by the sweeper. The messages and alerts themselves: tests/integration/worker/test_dead_runs.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobsched.adapters.queue import delivery_of
from jobsched.clock import FakeClock
from jobsched.domain.retries import Outcome
from jobsched.domain.sweeper import Sweeper
from jobsched.domain.worker import Worker
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Job, RunStatus
from jobsched.ports.runs import DeadRun, run_id
from jobsched.settings import Settings
from tests.support.worker import T0

from .conftest import FakeDrain as Drain


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


def test_a_failed_notification_stays_owed_and_the_sweeper_sends_it(
    build_worker: Callable[..., Worker],
    build_sweeper: Callable[..., Sweeper],
    clock: FakeClock,
    runs: MemoryRunStore,
    record: Callable[..., dict[str, Any]],
    due_job: Callable[..., Job],
) -> None:
    notifier = FlakyNotifier(failures=1)
    worker = build_worker(dead_runs=notifier)
    job = due_job(command="fail", retry={"max_attempts": 1})
    # When the alert cannot be sent at the run's death
    assert worker.handle(delivery_of(record(job.id, T0))) == Outcome.DEAD
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and row.notify_pending is True
    assert notifier.sent == []
    # Then the sweeper, a minute later, sends it and clears the mark
    sweeper = build_sweeper(dead_runs=notifier)
    clock.advance(61_000)
    report = sweeper.sweep()
    assert report.notified == 1
    assert [d.run_id for d in notifier.sent] == [run_id(job.id, T0)]
    assert notifier.sent[0].owner == job.owner and notifier.sent[0].attempts == 1
    row = runs.get(job.id, T0)
    assert row is not None and not row.notify_pending and row.sweep_at is None
    assert sweeper.sweep().notified == 0


def test_a_notification_failing_again_is_retried_later(
    settings: Settings,
    build_worker: Callable[..., Worker],
    build_sweeper: Callable[..., Sweeper],
    clock: FakeClock,
    record: Callable[..., dict[str, Any]],
    due_job: Callable[..., Job],
) -> None:
    notifier = FlakyNotifier(failures=2)
    worker = build_worker(dead_runs=notifier)
    sweeper = build_sweeper(dead_runs=notifier)
    job = due_job(command="fail", retry={"max_attempts": 1})
    worker.handle(delivery_of(record(job.id, T0)))
    clock.advance(61_000)
    first = sweeper.sweep()
    assert first.notified == 0 and first.deferred == 1
    clock.advance(settings.sweep_queued_after_s * 1000)
    assert sweeper.sweep().notified == 1
    assert len(notifier.sent) == 1


def test_a_retry_that_could_not_be_enqueued_is_re_enqueued_by_the_sweeper(
    settings: Settings,
    build_worker: Callable[..., Worker],
    build_sweeper: Callable[..., Sweeper],
    clock: FakeClock,
    runs: MemoryRunStore,
    record: Callable[..., dict[str, Any]],
    drain: Drain,
    due_job: Callable[..., Job],
) -> None:
    class DownQueue:
        def send(self, messages: Any) -> None:
            raise ConnectionError("SQS unreachable")

    worker = build_worker(queue=DownQueue())
    job = due_job(command="fail", input={"times": 1}, retry={"backoff_s": 30})
    assert worker.handle(delivery_of(record(job.id, T0))) == Outcome.RETRYING
    row = runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.RETRYING
    sweeper = build_sweeper()
    clock.advance(30_000)
    assert sweeper.sweep().requeued == 0  # retry due, but its message may still be on the way
    clock.advance(settings.sweep_queued_after_s * 1000)
    assert sweeper.sweep().requeued == 1
    assert drain.bodies(settings.run_queue_url) == [{"job_id": job.id, "scheduled_for": T0}]
    assert worker.handle(delivery_of(record(job.id, T0))) == Outcome.SUCCEEDED
