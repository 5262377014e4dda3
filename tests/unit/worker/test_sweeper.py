"""The sweeper on the in-memory fakes: runs stuck queued, lost workers, owed alerts, finished rows, bounded passes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from jobsched.domain.retries import Outcome
from jobsched.domain.sweeper import Sweeper
from jobsched.models import RunStatus
from jobsched.ports.runs import ClaimRequest, Owned, RetryTransition, RunKey, run_id
from jobsched.ports.targets import TargetCall
from tests.support.worker import T0, Kit


@pytest.fixture
def sweeper(build_sweeper: Callable[..., Sweeper]) -> Sweeper:
    return build_sweeper()


def test_a_run_saved_but_never_enqueued_is_enqueued_exactly_once(kit: Kit, calls: list[TargetCall]) -> None:
    # Given the scheduler saved a run and crashed before enqueueing it
    job = kit.due_job(command="record")
    # When the sweeper runs before the run is overdue, nothing happens
    assert kit.sweeper.sweep().requeued == 0
    # and once it is overdue (queued for sweep_queued_after_s), it is enqueued
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    report = kit.sweeper.sweep()
    assert report.requeued == 1 and report.examined == 1
    # Then a second pass right after does not enqueue it again
    kit.clock.advance(60_000)
    assert kit.sweeper.sweep().requeued == 0
    assert kit.drain.bodies(kit.settings.run_queue_url) == [
        {"job_id": job.id, "scheduled_for": T0, "enqueued_at": kit.clock() - 60_000}  # sent by the first pass
    ]
    # and the worker runs it; the finished run leaves the sweep index
    assert kit.deliver(job) == Outcome.SUCCEEDED
    assert len(calls) == 1
    kit.clock.advance(3_600_000)
    assert kit.sweeper.sweep().examined == 0


def test_a_run_stuck_queued_is_re_enqueued_with_growing_gaps(kit: Kit, sent: list[dict[str, Any]]) -> None:
    job = kit.due_job()
    after = kit.settings.sweep_queued_after_s * 1000
    kit.clock.advance(after)
    sweeps_at: list[int] = []
    for _ in range(12):  # one pass a minute for 12 minutes
        if kit.sweeper.sweep().requeued:
            sweeps_at.append(kit.clock())
        kit.clock.advance(60_000)
    gaps = [b - a for a, b in itertools.pairwise(sweeps_at)]
    assert gaps == [after, 2 * after, 4 * after][: len(gaps)] and len(gaps) >= 2
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.sweeps == len(sweeps_at) and row.status == RunStatus.QUEUED


def test_a_lost_worker_counts_as_a_failed_try_and_the_run_is_retried_with_backoff(
    kit: Kit, sent: list[dict[str, Any]], calls: list[TargetCall]
) -> None:
    # Given a run whose worker claimed it and vanished
    job = kit.due_job(command="record", retry={"backoff_s": 60})
    kit.clock.advance(60_000)
    kit.runs.claim(
        ClaimRequest(
            RunKey(job.id, T0), worker="vanished", now_ms=kit.clock(), stale_before_ms=0, retry_due_by_ms=0
        )
    )
    # When its heartbeat is fresh, the sweeper leaves it and looks again when it could be stale
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000 - 60_000)
    assert kit.sweeper.sweep().deferred == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.sweep_at == row.heartbeat_at + kit.settings.heartbeat_stale_s * 1000 + 1000
    # Once it has been silent for heartbeat_stale_s, the try counts as failed: retrying, with backoff
    kit.clock.advance(kit.settings.heartbeat_stale_s * 1000)
    report = kit.sweeper.sweep()
    assert report.lost_workers == 1 and report.dead == 0
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.RETRYING and row.attempt == 1
    assert row.error.startswith("worker lost during attempt 1: no heartbeat since")
    assert [(json.loads(e["MessageBody"]), e["DelaySeconds"]) for e in sent] == [
        ({"job_id": job.id, "scheduled_for": T0, "enqueued_at": kit.clock()}, 60)
    ]
    # Then the retry runs as attempt 2, with the same key
    kit.clock.advance(60_000)
    assert kit.deliver(job) == Outcome.SUCCEEDED
    assert [(c.attempt, c.run_id) for c in calls] == [(2, run_id(job.id, T0))]


def test_a_run_that_keeps_killing_its_worker_ends_dead(kit: Kit) -> None:
    job = kit.due_job(retry={"max_attempts": 2, "backoff_s": 0})
    stale = (kit.settings.heartbeat_stale_s + 1) * 1000
    for attempt in (1, 2):
        claimed = kit.runs.claim(
            ClaimRequest(
                RunKey(job.id, T0),
                worker=f"w{attempt}",
                now_ms=kit.clock(),
                stale_before_ms=0,
                retry_due_by_ms=kit.clock(),
            )
        ).claimed
        assert claimed
        kit.clock.advance(stale)
        report = kit.sweeper.sweep()
        assert report.lost_workers == 1
    assert report.dead == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.DEAD and row.attempt == 2
    assert row.sweep_at is None
    dead_letters = kit.drain.bodies(kit.settings.dead_run_queue_url)
    assert [d["run_id"] for d in dead_letters] == [run_id(job.id, T0)]
    kit.clock.advance(3_600_000)
    assert kit.sweeper.sweep().examined == 0


def test_a_lost_worker_of_a_deleted_job_is_skipped(kit: Kit) -> None:
    job = kit.due_job()
    kit.runs.claim(
        ClaimRequest(RunKey(job.id, T0), worker="w", now_ms=kit.clock(), stale_before_ms=0, retry_due_by_ms=0)
    )
    kit.jobs.delete(job, deleted_at_ms=T0, retention_days=None)
    kit.clock.advance((kit.settings.heartbeat_stale_s + kit.settings.sweep_queued_after_s) * 1000)
    assert kit.sweeper.sweep().skipped == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SKIPPED and "deleted" in row.error


def test_a_retry_not_yet_due_is_deferred_not_re_enqueued(kit: Kit, sent: list[dict[str, Any]]) -> None:
    job = kit.due_job()
    kit.runs.claim(
        ClaimRequest(RunKey(job.id, T0), worker="w", now_ms=kit.clock(), stale_before_ms=0, retry_due_by_ms=0)
    )
    retry_at = kit.clock() + 600_000
    kit.runs.retry(
        Owned(job.id, T0, 1, "w"), RetryTransition(error="x", retry_at_ms=retry_at, sweep_at_ms=kit.clock())
    )
    kit.clock.advance(1)
    report = kit.sweeper.sweep()
    assert report.deferred == 1 and report.requeued == 0 and sent == []
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.sweep_at == retry_at + kit.settings.sweep_queued_after_s * 1000


def test_finished_rows_still_in_the_index_are_cleared(kit: Kit) -> None:
    job = kit.due_job()
    # e.g. a succeeded row written by an older worker that kept the keys
    kit.runs.force(job.id, T0, status=RunStatus.SUCCEEDED)
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    assert kit.sweeper.sweep().cleared == 1
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.sweep_at is None


def test_a_pass_is_bounded_and_the_rest_waits_for_the_next(kit: Kit) -> None:
    job = kit.make_job()
    for minute in range(5):
        kit.make_run(job, T0 - minute * 60_000)
    sweeper = kit.build_sweeper()
    sweeper.max_rows = 2
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    first = sweeper.sweep()
    assert (first.examined, first.requeued, first.truncated) == (2, 2, True)
    second = sweeper.sweep()
    third = sweeper.sweep()
    assert second.requeued + third.requeued == 3 and not third.truncated


def test_a_claim_between_the_read_and_the_write_wins(
    kit: Kit, sent: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    get_many = kit.runs.get_many

    def racing(keys: Any) -> list[Any]:
        """Reads the rows, then lets a worker claim them before the sweeper writes."""
        rows = get_many(keys)
        for job_id, scheduled_for in keys:
            kit.runs.claim(
                ClaimRequest(
                    RunKey(job_id, scheduled_for),
                    worker="w",
                    now_ms=kit.clock(),
                    stale_before_ms=0,
                    retry_due_by_ms=0,
                )
            )
        return rows

    monkeypatch.setattr(kit.runs, "get_many", racing)

    kit.due_job()
    sweeper = kit.build_sweeper()
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    report = sweeper.sweep()
    assert report.conflicts == 1 and report.requeued == 0 and sent == []


def test_a_failing_re_enqueue_is_reported_and_retried_on_a_later_pass(
    kit: Kit, sent: list[dict[str, Any]]
) -> None:
    class DownOnce:
        def __init__(self, real: Any) -> None:
            self.real, self.down = real, True

        def send(self, messages: Any) -> None:
            if self.down:
                self.down = False
                raise ConnectionError("SQS unreachable")
            self.real.send(messages)

    kit.due_job()
    sweeper = kit.build_sweeper()
    sweeper.queue = DownOnce(sweeper.queue)
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    assert sweeper.sweep().errors == ["enqueue: ConnectionError"]
    kit.clock.advance(kit.settings.sweep_queued_after_s * 1000)
    assert sweeper.sweep().requeued == 1
    assert len(sent) == 1


def test_one_bad_row_does_not_stop_the_pass(kit: Kit) -> None:
    class BrokenSpecs:
        def get_spec(self, job_id: str) -> None:
            raise ConnectionError("DynamoDB unreachable")

    lost_job, queued_job = kit.make_job(), kit.make_job()
    kit.make_run(lost_job)
    kit.make_run(queued_job)
    kit.runs.claim(
        ClaimRequest(
            RunKey(lost_job.id, T0), worker="w", now_ms=kit.clock(), stale_before_ms=0, retry_due_by_ms=0
        )
    )
    sweeper = kit.build_sweeper()
    sweeper.jobs = BrokenSpecs()
    kit.clock.advance((kit.settings.heartbeat_stale_s + kit.settings.sweep_queued_after_s) * 1000)
    report = sweeper.sweep()
    assert report.requeued == 1
    assert report.errors == [f"{run_id(lost_job.id, T0)}: ConnectionError"]
