"""One contract for the due index's anti-entropy (``refile_stuck``), run against the in-memory fake, the DynamoDB
adapter (on moto) and the SQLite adapter: each applies ``domain.due_repair.is_stuck`` (DynamoDB after its Scan's
filter), so the three refile the same jobs, file the same new entries and leave the jobs' states as they were."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.clock import from_ms, to_ms
from jobsched.domain.due_repair import STUCK_AFTER_MS, refiled_entry
from jobsched.domain.registration import due_entry
from jobsched.dynamodb.jobs import JobStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.models import CommandTarget, Job
from jobsched.ports.jobs import LATE, DueQuery, SchedulingState
from jobsched.sqlite.jobs import SqliteJobStore

from .conftest import BACKENDS, adapter_on, on_table

T0 = to_ms(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
NOW = T0 + 2 * 3_600_000
BUCKET_MS = 60_000
WATERMARK = NOW // BUCKET_MS  # every bucket before now drained


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    return adapter_on(request, MemoryJobStore, SqliteJobStore, on_table(JobStore, "jobs_table"))


def add(store: Any, number: int, *, due_at: int | None, partition: int = 0) -> SchedulingState:
    """Create job ``number`` with its entry due at ``due_at`` (None: not in the due index), filed when it was
    written an hour before that (in the early lane), in one shard; returns its state."""
    job = Job(
        id=f"j_{number:020x}",
        name=f"job-{number:03d}",
        owner="team-a",
        schedule="* * * * *",
        target=CommandTarget(name="echo"),
        created_at=from_ms(T0),
        updated_at=from_ms(T0),
    )
    due = (
        None
        if due_at is None
        else due_entry(
            job.id,
            due_at,
            partition=partition,
            shards=1,
            bucket_ms=BUCKET_MS,
            now_ms=due_at - 3_600_000,
            version=1,
        )
    )
    state = SchedulingState(
        job_id=job.id,
        partition=partition,
        schedule=job.schedule,
        anchor_at=T0,
        version=1,
        next_run_at=due_at,
        due=due,
    )
    store.create(job, state)
    return state


def refiler(store: Any) -> Any:
    """What runs ``store``'s anti-entropy pass: the DynamoDB adapter's ``repair`` part, the store itself else."""
    return store.repair if isinstance(store, JobStore) else store


def test_the_stores_refile_exactly_the_entries_the_rule_takes_for_lost(store: Any) -> None:
    # Given a job due long ago in a drained bucket, one just past the rule's threshold, one not yet past it, one
    # waiting in a bucket its partition has not drained, one of a partition without a watermark, one ended
    lost = add(store, 1, due_at=T0)
    just = add(store, 2, due_at=NOW - STUCK_AFTER_MS - 1)
    recent = add(store, 3, due_at=NOW - STUCK_AFTER_MS)
    backlog = add(store, 4, due_at=T0, partition=1)
    unled = add(store, 5, due_at=T0, partition=2)
    ended = add(store, 6, due_at=None)
    assert backlog.due is not None
    watermarks = {0: WATERMARK, 1: backlog.due.bucket}

    # When a pass of the anti-entropy runs now
    done = refiler(store).refile_stuck(lambda: NOW, bucket_ms=BUCKET_MS, shards=1, watermarks=watermarks)

    # Then the two past the threshold in drained buckets, and only they, are refiled, in one pass to the end
    assert sorted(done.refiled) == [lost.job_id, just.job_id]
    assert done.wrapped and done.unreadable == 0
    # and their new entries are in the late lane at now, where a tick reads them
    entries, _ = store.query_due(DueQuery(0, WATERMARK, 0, up_to_ms=NOW, lane=LATE))
    assert lost.due is not None and just.due is not None
    expected = [refiled_entry(s.due, now_ms=NOW, shards=1, bucket_ms=BUCKET_MS) for s in (lost, just)]
    assert sorted(entries, key=lambda e: e.job_id) == expected
    # and every job's stored state is as it was (the tick judges the new entry against it)
    states = store.scheduling_states([s.job_id for s in (lost, just, recent, backlog, unled, ended)])
    assert [states[s.job_id] for s in (lost, just, recent, backlog, unled, ended)] == [
        lost,
        just,
        recent,
        backlog,
        unled,
        ended,
    ]
