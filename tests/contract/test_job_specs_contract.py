"""The worker's view of jobs (``jobsched.ports.run_stores.JobSpecs``): the same cases against the in-memory fake
(``jobsched.memory.jobs.MemoryJobStore``), the SQLite adapter (``jobsched.sqlite.jobs``) and the DynamoDB adapter (``jobsched.dynamodb.jobs.JobStore``) on moto. The job as
the worker reads it, and the overlap lock of ``overlap: skip`` jobs: taken once, stale holders replaced, an
exact holder replaced, renewals and releases only by the holder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from jobsched.clock import FakeClock
from jobsched.domain.registration import scheduling_state
from jobsched.dynamodb.batch import STATES_BACKOFF_S, UNPROCESSED_BACKOFF_S
from jobsched.dynamodb.jobs import JobStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.models import Job
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.runs import BufferAnswer, BufferRequest, OverlapHolder, OverlapRequest
from jobsched.sqlite.jobs import SqliteJobStore
from tests.support.aws import answer_unprocessed
from tests.support.worker import T0, new_job

from .conftest import BACKENDS, adapter_on, on_table

NOW = T0 + 1_500


@pytest.fixture(params=BACKENDS)
def specs(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[Any, Callable[[Job], None], Callable[[Job], None]]]:
    """``(store, save(job), delete(job))`` for the fake, or for the DynamoDB adapter on the moto jobs table."""
    settings = request.getfixturevalue("settings")
    store = adapter_on(request, MemoryJobStore, SqliteJobStore, on_table(JobStore, "jobs_table"))

    def save(job: Job) -> None:
        state = scheduling_state(
            job, anchor_at_ms=NOW, next_run_at_ms=None, partition=0, settings=settings, now_ms=NOW
        )
        store.create(job, state)

    yield store, save, lambda job: store.delete(job, deleted_at_ms=NOW, retention_days=None)


def _take(store: Any, run: str, worker: str = "w1", now: int = NOW, **kwargs: Any) -> OverlapHolder | None:
    return store.acquire_overlap(
        OverlapRequest(
            "j_1",
            run_id=run,
            attempt=1,
            worker=worker,
            now_ms=now,
            stale_before_ms=now - 120_000,
            expires_at_s=now // 1000 + 86_400,
            **kwargs,
        )
    )


def test_the_worker_reads_the_job_until_it_is_deleted(specs: Any) -> None:
    store, save, delete = specs
    job = new_job(FakeClock(NOW), 7, command="record", retry={"max_attempts": 2}, overlap="skip")
    save(job)
    read = store.get_spec(job.id)
    assert read is not None
    assert (read.id, read.owner, read.name, read.retry.max_attempts, read.overlap, read.target) == (
        job.id,
        job.owner,
        job.name,
        2,
        job.overlap,
        job.target,
    )
    delete(job)
    assert store.get_spec(job.id) is None
    assert store.get_spec("j_unknown") is None


def test_the_overlap_lock_is_held_by_one_try_and_renewed_only_by_it(specs: Any) -> None:
    store, _, _ = specs
    assert _take(store, "j_1@1") is None
    holder = _take(store, "j_1@2", "w2")
    assert holder is not None and (holder.run_id, holder.attempt, holder.worker) == ("j_1@1", 1, "w1")
    assert holder.heartbeat_at == NOW
    assert _take(store, "j_1@1", "w3") is None  # the same run (a retry or a takeover) may take it
    assert not store.renew_overlap("j_1", run_id="j_1@1", attempt=1, worker="w1", now_ms=NOW + 1)
    assert store.renew_overlap("j_1", run_id="j_1@1", attempt=1, worker="w3", now_ms=NOW + 30_000)
    store.release_overlap("j_1", run_id="j_1@1", attempt=1, worker="w1")  # not the holder: nothing
    assert _take(store, "j_1@2", "w2", now=NOW + 30_000) is not None
    store.release_overlap("j_1", run_id="j_1@1", attempt=1, worker="w3")
    assert _take(store, "j_1@2", "w2", now=NOW + 30_000) is None


def test_a_stale_holder_loses_the_lock_and_an_exact_holder_can_be_replaced(specs: Any) -> None:
    store, _, _ = specs
    assert _take(store, "j_1@1") is None
    assert _take(store, "j_1@2", "w2", now=NOW + 120_000) is not None  # exactly at the limit: still fresh
    assert _take(store, "j_1@2", "w2", now=NOW + 120_001) is None  # stale: taken over
    holder = _take(store, "j_1@3", "w3", now=NOW + 120_002)
    assert holder is not None and holder.run_id == "j_1@2"
    stranger = OverlapHolder("j_1@2", 1, "someone-else")
    assert _take(store, "j_1@3", "w3", now=NOW + 120_002, replacing=stranger) is not None
    assert _take(store, "j_1@3", "w3", now=NOW + 120_002, replacing=holder) is None


def test_a_throttled_spec_read_is_store_unavailable(aws: Any, settings: Any) -> None:
    store = JobStore(aws.table(settings.jobs_table))
    with Stubber(store.table.meta.client) as stubber:
        stubber.add_client_error("get_item", "ThrottlingException", http_status_code=400)
        with pytest.raises(StoreUnavailable) as raised:
            store.get_spec("j_1")
    assert isinstance(raised.value.__cause__, ClientError)


def test_a_batch_s_jobs_are_read_together_as_one_by_one(specs: Any) -> None:
    # Given 105 jobs (more than one BatchGetItem's 100 keys), one of them deleted
    store, save, delete = specs
    clock = FakeClock(NOW)
    jobs = [new_job(clock, n, command="record") for n in range(105)]
    for job in jobs:
        save(job)
    delete(jobs[50])
    # When a batch naming them (one twice) and an unknown job is read together
    wanted = [job.id for job in jobs] + [jobs[7].id, "j_unknown"]
    read = store.get_specs(wanted)
    # Then each live job is what get_spec gives, and the deleted and unknown ones are left out
    assert set(read) == {job.id for job in jobs} - {jobs[50].id}
    assert all(read[job_id] == store.get_spec(job_id) for job_id in read)
    assert store.get_specs([]) == {}


def test_a_throttled_batch_read_of_specs_is_store_unavailable(aws: Any, settings: Any) -> None:
    store = JobStore(aws.table(settings.jobs_table))
    with Stubber(store.table.meta.client) as stubber:
        stubber.add_client_error("batch_get_item", "ThrottlingException", http_status_code=400)
        with pytest.raises(StoreUnavailable):
            store.get_specs(["j_1"])


def _unprocessed(store: JobStore, monkeypatch: pytest.MonkeyPatch, times: int) -> list[float]:
    """The store's client answers ``times`` BatchGetItems with every key unprocessed; returns the sleeps."""
    return answer_unprocessed(store, monkeypatch, "batch_get_item", times)


def test_keys_left_unprocessed_are_asked_again_after_a_back_off(
    aws: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JobStore(aws.table(settings.jobs_table))
    job = new_job(FakeClock(NOW), 1, command="record")
    store.create(
        job,
        scheduling_state(
            job, anchor_at_ms=NOW, next_run_at_ms=None, partition=0, settings=settings, now_ms=NOW
        ),
    )
    slept = _unprocessed(store, monkeypatch, 2)
    assert set(store.get_specs([job.id])) == {job.id}
    assert slept == [0.05, 0.1]


def test_keys_still_unprocessed_after_the_back_offs_are_unavailable_not_absent(
    aws: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JobStore(aws.table(settings.jobs_table))
    slept = _unprocessed(store, monkeypatch, 10)
    with pytest.raises(StoreUnavailable):
        store.get_specs(["j_1"])
    with pytest.raises(StoreUnavailable):  # the scheduler's read of scheduling states alike, waiting longer
        store.scheduling_states(["j_1"])
    assert slept == [*UNPROCESSED_BACKOFF_S, *STATES_BACKOFF_S]


def test_a_lock_held_on_past_its_try_is_not_taken_even_by_its_own_run(specs: Any) -> None:
    store, _, _ = specs
    # Given a lock whose try holds it on for 15 minutes (its heartbeat_at set to the end of the hold)
    assert _take(store, "j_1@1") is None
    assert store.renew_overlap("j_1", run_id="j_1@1", attempt=1, worker="w1", now_ms=NOW + 900_000)
    # Then the run's retry does not take it while held on, and does after
    assert _take(store, "j_1@1", "w2", now=NOW + 60_000, held_after_ms=NOW + 62_000) is not None
    assert _take(store, "j_1@1", "w2", now=NOW + 900_000, held_after_ms=NOW + 902_000) is None


def _buffer(store: Any, run: str, replacing: str | None = None) -> BufferAnswer:
    answer: BufferAnswer = store.buffer_overlap(BufferRequest("j_1", run, replacing))
    return answer


def test_one_fire_waits_for_a_held_lock_and_the_release_hands_the_lock_to_it(specs: Any) -> None:
    store, _, _ = specs
    # Given a lock held by run 1
    assert not _buffer(store, "j_1@2").buffered  # a free lock: nothing to wait for
    assert _take(store, "j_1@1") is None
    # When run 2 waits for it
    assert _buffer(store, "j_1@2").buffered
    assert _buffer(store, "j_1@2").buffered  # again: still the one that waits
    # Then run 3 does not wait beside it, and the fire that waits is kept by the holder's own retake
    refused = _buffer(store, "j_1@3")
    assert not refused.buffered and refused.holder is not None
    assert (refused.holder.run_id, refused.holder.waiting) == ("j_1@1", "j_1@2")
    assert _take(store, "j_1@1", "w2") is None
    # And neither run 2 nor run 3 takes the lock while run 1 holds it
    assert _take(store, "j_1@2", "w3") is not None
    assert _take(store, "j_1@3", "w3") is not None
    # When run 1 gives it back, it is handed to run 2: reserved for it, never stale to anyone else
    assert store.release_overlap("j_1", run_id="j_1@1", attempt=1, worker="w2") == "j_1@2"
    later = NOW + 3_600_000
    held = _take(store, "j_1@3", "w3", now=later)
    assert held is not None and (held.run_id, held.reserved, held.waiting) == ("j_1@2", True, None)
    assert _buffer(store, "j_1@3").buffered  # run 3 may now wait behind run 2
    assert _take(store, "j_1@2", "w4", now=later) is None
    # And run 2's release hands it to run 3; run 3's release frees it
    assert store.release_overlap("j_1", run_id="j_1@2", attempt=1, worker="w4") == "j_1@3"
    assert _take(store, "j_1@3", "w5", now=later) is None
    assert store.release_overlap("j_1", run_id="j_1@3", attempt=1, worker="w5") is None
    assert _take(store, "j_1@4", "w6", now=later) is None


def test_a_stale_or_finished_holder_loses_the_lock_only_to_the_fire_that_waits(specs: Any) -> None:
    store, _, _ = specs
    assert _take(store, "j_1@1") is None
    assert _buffer(store, "j_1@2").buffered
    stale = NOW + 120_001
    assert _take(store, "j_1@3", "w3", now=stale) is not None  # not the fire that waits
    holder = _take(store, "j_1@3", "w3", now=stale)
    assert holder is not None
    assert _take(store, "j_1@3", "w3", now=stale, replacing=holder) is not None
    assert _take(store, "j_1@2", "w2", now=stale, replacing=holder) is None
    # run 2 took it: no fire waits any more, and run 3 may wait behind it
    assert _buffer(store, "j_1@3").buffered


def test_a_fire_that_waits_and_is_over_is_replaced_only_exactly(specs: Any) -> None:
    store, _, _ = specs
    assert _take(store, "j_1@1") is None
    assert _buffer(store, "j_1@2").buffered
    assert not _buffer(store, "j_1@3", replacing="j_1@9").buffered
    assert _buffer(store, "j_1@3", replacing="j_1@2").buffered
    assert store.release_overlap("j_1", run_id="j_1@1", attempt=1, worker="w1") == "j_1@3"
    # a reserved lock whose fire is known to be over is replaced exactly
    held = _take(store, "j_1@4", "w4")
    assert held is not None and held.reserved
    assert _take(store, "j_1@4", "w4", replacing=held) is None
