"""Local mode's run queue on SQLite (``SqliteComponents``) hands the messages it gives up on to the sweeper, as
SQS's redrive policy hands them to the run dead-letter queue the sweeper drains: a scheduled run has no row
before its claim, so its dead-lettered message must still end as a recorded run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobsched.api.schemas import JobCreate
from jobsched.aws.clients import Aws
from jobsched.aws.queue import RunQueue
from jobsched.clock import FakeClock
from jobsched.domain.runs import new_run
from jobsched.local.components import SqliteComponents
from jobsched.models import Job, RunStatus
from jobsched.ports.run_messages import QueueSendError, RunMessage
from jobsched.ports.runs import RunKey
from jobsched.resources import RUN_QUEUE, RUN_QUEUE_DLQ
from jobsched.settings import Settings
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.queue import SqliteSqsQueue, queue_arn
from tests.support.worker import claim_at

T0 = 1_767_578_400_000
OWNER = "local"


@pytest.fixture
def components(aws: Aws, settings: Settings, tmp_path: Path) -> Iterator[SqliteComponents]:
    database = SqliteDatabase(tmp_path / "jobsched.sqlite3")
    try:
        yield SqliteComponents(settings, aws, clock=FakeClock(T0), database=database)
    finally:
        database.close()


def _received_until_its_last_delivery(components: SqliteComponents) -> tuple[Job, SqliteSqsQueue, FakeClock]:
    """A job's scheduled run at ``T0`` whose message was received ``max_receive_count`` times and never deleted
    (its worker died each time): the next receive moves it to the dead-letter queue. Returns the job, the SQLite
    run queue and the clock."""
    clock = components.clock
    assert isinstance(clock, FakeClock)
    job = (
        components.job_service()
        .create_job(
            OWNER, JobCreate.model_validate({"name": "nightly", "schedule": "@daily", "command": "echo"})
        )
        .job
    )
    queue = components.run_queue_client()
    components.run_queue().send([RunMessage(job.id, T0)])
    for _ in range(RUN_QUEUE.max_receive_count):
        received = queue.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10).get("Messages", [])
        assert len(received) == 1
        clock.advance(RUN_QUEUE.visibility_timeout_s * 1000)
    return job, queue, clock


def test_a_run_message_the_sqlite_queue_dead_letters_is_drained_by_the_sweeper_and_the_run_recorded_dead(
    components: SqliteComponents,
) -> None:
    # Given a job's scheduled run whose message is received max_receive_count times and never deleted (its
    # worker dies each time), so the next receive moves it to the dead-letter queue
    job, queue, _ = _received_until_its_last_delivery(components)
    assert queue.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10).get("Messages", []) == []
    assert len(queue.dead_lettered()) == 1

    # When the sweeper passes
    report = components.sweeper().sweep()

    # Then it read the letter, the run is recorded dead (with its alert owed), and the letter is gone
    assert report.dead_letters == 1 and report.dead == 1
    row = components.runs().get(job.id, T0)
    assert row is not None and row.status is RunStatus.DEAD and row.attempt == 0
    assert queue.dead_lettered() == []


def test_a_dead_letter_of_a_run_still_beating_is_looked_at_again_at_the_next_pass_as_on_sqs(
    components: SqliteComponents,
) -> None:
    # Given a scheduled run's message dead-lettered while a worker runs the try it claimed (fresh heartbeat)
    job, queue, clock = _received_until_its_last_delivery(components)
    now = clock()
    claim = claim_at(
        components.runs(),
        RunKey(job.id, T0),
        "w1",
        now_ms=now,
        stale_before_ms=now - 120_000,
        create=new_run(job.id, T0, now_ms=now, retention_days=90, sweep_after_ms=None, owner=OWNER),
    )
    assert claim.claimed
    assert queue.receive_message(QueueUrl=queue.url).get("Messages", []) == []  # moved to the dead letters
    first = components.sweeper().sweep()
    assert first.dead_letters == 1 and first.lost_workers == 0  # its worker still beats: kept for later

    # When the worker dies (no beat since) and the sweeper passes once its heartbeat is stale, plus the
    # dead-letter queue's visibility timeout (30 s: the letter it kept is visible again)
    stale_s = components.settings.heartbeat_stale_s
    clock.advance((stale_s + 1 + RUN_QUEUE_DLQ.visibility_timeout_s) * 1000)
    second = components.sweeper().sweep()

    # Then the letter is read again and the lost worker's try is recorded failed (the run is not left running
    # for the run queue's visibility timeout, 90 min, which is what hid the letter)
    assert second.dead_letters == 1 and second.lost_workers == 1
    row = components.runs().get(job.id, T0)
    assert row is not None and row.status is not RunStatus.RUNNING


def test_the_run_queue_file_is_as_durable_as_the_database_local_mode_is_configured_with(
    aws: Aws, settings: Settings, tmp_path: Path
) -> None:
    # Given local mode's database with synchronous=FULL (a power loss loses no acknowledged write)
    database = SqliteDatabase(tmp_path / "jobsched.sqlite3", synchronous="FULL")
    try:
        components = SqliteComponents(settings, aws, clock=FakeClock(T0), database=database)
        queue = components.run_queue_client()
        # Then the run queue's file, which holds a scheduled run's only record until its claim, is synced at
        # every commit too (it was NORMAL: a power loss could drop messages whose jobs the database, synced,
        # shows as sent: fires lost)
        assert queue._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        database.close()


def test_the_run_queue_refuses_a_synchronous_level_that_is_not_durable(tmp_path: Path) -> None:
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/runs"
    with pytest.raises(ValueError, match="synchronous"):
        SqliteSqsQueue(
            url,
            queue_arn(url),
            visibility_timeout_s=30,
            max_receive_count=5,
            path=tmp_path / "q",
            synchronous="OFF",
        )


def test_a_checkpoint_of_the_run_queue_puts_its_messages_in_its_file_not_only_in_its_wal(
    tmp_path: Path,
) -> None:
    # Given a queue file in WAL mode with a message sent (committed to the WAL only)
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/runs"
    path = tmp_path / "run-queue.sqlite3"
    queue = SqliteSqsQueue(url, queue_arn(url), visibility_timeout_s=30, max_receive_count=5, path=path)
    queue.send_message(QueueUrl=url, MessageBody="m1")

    # When local mode's sync step checkpoints it (as it does the database's, each second)
    queue.checkpoint()

    # Then the database file alone (what a power loss would leave of an unsynced WAL) holds the message
    alone = tmp_path / "alone.sqlite3"
    alone.write_bytes(path.read_bytes())
    copy = SqliteSqsQueue(url, queue_arn(url), visibility_timeout_s=30, max_receive_count=5, path=alone)
    assert [m["Body"] for m in copy.receive_message(QueueUrl=url).get("Messages", [])] == ["m1"]


def test_a_full_disk_under_the_run_queue_is_a_refused_send_as_an_sqs_service_error_is(tmp_path: Path) -> None:
    # Given the run queue's file on a disk that fills up (SQLite's page limit at the file's size now)
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/runs"
    queue = SqliteSqsQueue(
        url, queue_arn(url), visibility_timeout_s=30, max_receive_count=5, path=tmp_path / "run-queue.sqlite3"
    )
    pages = queue._conn.execute("PRAGMA page_count").fetchone()[0]
    queue._conn.execute(f"PRAGMA max_page_count={pages}")

    # When messages are sent until a send needs a page the disk has not
    # Then the adapter reports the batch refused (QueueSendError), as it does an SQS service error after its
    # retries: the callers (the API's trigger and backfill, the scheduler) leave the saved runs to the sweeper;
    # sqlite3's own error does not escape (a manual run saved, then answered 500)
    with pytest.raises(QueueSendError) as refused:
        for batch in range(1000):
            RunQueue(queue, url).send([RunMessage(f"j_{batch}", T0 + n) for n in range(10)])
    assert len(refused.value.failed) == 10
