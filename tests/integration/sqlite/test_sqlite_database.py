"""What the SQLite backend does beyond the shared contracts: its failure paths (a busy or unusable database),
its durability setting, reading a state it did not write, retention, run listeners, and the guard that keeps
every record of the run store on disk."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from jobsched.domain.quotas import count_change, fire_rate
from jobsched.domain.runs import new_run
from jobsched.models import RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.jobs import Unreadable
from jobsched.ports.quotas import OwnerUsage, RecountProgress
from jobsched.ports.runs import ClaimRequest, Owned, RunKey, RunRow
from jobsched.sqlite.control import SqliteControlStore
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.jobs import SqliteJobStore
from jobsched.sqlite.runs import SqliteRunStore
from tests.contract.test_job_store_contract import job, state

T0 = 1_767_578_400_000  # 2026-01-05T02:00Z, epoch ms


@pytest.fixture
def database(tmp_path: Path) -> Any:
    opened = SqliteDatabase(tmp_path / "jobsched.sqlite3", busy_timeout_s=0.05)
    yield opened
    opened.close()


def _run(job_id: str = "j_a", scheduled_for: int = T0, now: int = T0, retention_days: int = 90) -> RunRow:
    return new_run(job_id, scheduled_for, now_ms=now, retention_days=retention_days)


def test_a_database_locked_by_another_process_is_store_unavailable(database: SqliteDatabase) -> None:
    # Given another connection (as another process would) holding the write lock
    other = sqlite3.connect(database.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        # Then a write gives up after the busy timeout with the transient error, and writes nothing
        with pytest.raises(StoreUnavailable) as raised:
            SqliteRunStore(database).put_new(_run())
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        with pytest.raises(StoreUnavailable):
            SqliteControlStore(database).advance_watermark(0, 5, term=1, now_ms=T0)
    finally:
        other.execute("ROLLBACK")
        other.close()
    # and once the lock is gone the same write lands
    assert SqliteRunStore(database).put_new(_run()) is None
    assert SqliteRunStore(database).get("j_a", T0) == _run()


def test_a_file_that_is_not_a_database_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "jobsched.sqlite3"
    path.write_bytes(b"not a database, " * 512)
    with pytest.raises(ValueError, match=r"jobsched\.sqlite3"):
        SqliteDatabase(path)
    assert path.read_bytes() == b"not a database, " * 512  # left as it was


def test_only_the_durable_synchronous_levels_are_accepted(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteDatabase(tmp_path / "db", synchronous="OFF")  # type: ignore[arg-type]
    for level, code in (("NORMAL", 1), ("FULL", 2)):
        opened = SqliteDatabase(tmp_path / f"db-{level}", synchronous=level)  # type: ignore[arg-type]
        try:
            with opened.read() as conn:
                assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
                assert conn.execute("PRAGMA synchronous").fetchone()[0] == code
            opened.checkpoint()
        finally:
            opened.close()


def test_a_state_this_store_did_not_write_is_unreadable_and_left_alone(database: SqliteDatabase) -> None:
    with database.write() as conn:
        conn.execute(
            "INSERT INTO jobs (job_id, owner, name, updated_at, spec, state) VALUES (?, ?, ?, ?, ?, ?)",
            ("j_bad", "team-a", "bad", T0, "{}", '{"job_id": "j_bad", "missed": "sometimes"}'),
        )
    found = SqliteJobStore(database).scheduling_states(["j_bad", "j_absent"])
    assert set(found) == {"j_bad"} and isinstance(found["j_bad"], Unreadable)
    assert "sometimes" in found["j_bad"].reason


def test_retention_reaps_expired_runs_only(database: SqliteDatabase) -> None:
    runs = SqliteRunStore(database)
    runs.put_new(_run(scheduled_for=T0, retention_days=1))
    runs.put_new(_run(scheduled_for=T0 + 1, retention_days=90))
    assert database.reap_expired(T0 + 86_400_000) == 0  # exactly at the end: still kept
    assert database.reap_expired(T0 + 86_401_000) == 1
    assert [r.scheduled_for for r in runs.rows()] == [T0 + 1]


def test_listeners_hear_each_committed_run_write_and_a_failing_one_fails_nothing(
    database: SqliteDatabase,
) -> None:
    heard: list[tuple[RunStatus | None, RunStatus]] = []

    def failing(before: RunRow | None, after: RunRow) -> None:
        raise RuntimeError("a printer broke")

    database.run_listeners += [failing, lambda b, a: heard.append((b.status if b else None, a.status))]
    runs = SqliteRunStore(database)
    runs.put_new(_run())
    claim = runs.claim(
        ClaimRequest(
            RunKey("j_a", T0), worker="w1", now_ms=T0 + 5, stale_before_ms=T0 - 1, retry_due_by_ms=T0 + 5
        )
    )
    assert claim.claimed
    assert runs.succeed(Owned("j_a", T0, 1, "w1"), now_ms=T0 + 9)
    assert not runs.succeed(
        Owned("j_a", T0, 1, "w1"), now_ms=T0 + 10
    )  # refused: nothing written, nothing heard
    assert heard == [
        (None, RunStatus.QUEUED),
        (RunStatus.QUEUED, RunStatus.RUNNING),
        (RunStatus.RUNNING, RunStatus.SUCCEEDED),
    ]
    assert runs.get("j_a", T0).status is RunStatus.SUCCEEDED  # type: ignore[union-attr]


def test_writes_survive_closing_and_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "jobsched.sqlite3"
    first = SqliteDatabase(path)
    SqliteRunStore(first).put_new(_run())
    SqliteControlStore(first).raise_partition_high_water(3)
    first.close()
    again = SqliteDatabase(path)
    try:
        assert SqliteRunStore(again).get("j_a", T0) == _run()
        assert SqliteRunStore(again).unfinished() == [_run()]
        assert SqliteControlStore(again).raise_partition_high_water(1) == (3, False)
    finally:
        again.close()


def test_audit_events_are_written_with_their_change_or_not_at_all_and_page_newest_first(
    database: SqliteDatabase,
) -> None:
    from jobsched.clock import from_ms
    from jobsched.models import CommandTarget, Job, JobEventKind
    from jobsched.ports.errors import Conflict
    from jobsched.ports.jobs import AuditEvent

    store = SqliteJobStore(database)
    job = Job(
        id="j_" + "1" * 20,
        name="audited",
        owner="team-a",
        schedule="@daily",
        target=CommandTarget(name="echo"),
        created_at=from_ms(T0),
        updated_at=from_ms(T0),
    )
    from jobsched.ports.jobs import Rewrite, SchedulingState

    state = SchedulingState(job_id=job.id, partition=0, schedule=job.schedule, version=1)
    created = AuditEvent(job.id, T0, "v1", JobEventKind.CREATED, "ana", {}, T0 // 1000 + 86_400)
    store.create(job, state, created)
    with pytest.raises(Conflict):  # a stale write records nothing either
        store.replace(
            Rewrite(
                job, state, T0 - 1, event=AuditEvent(job.id, T0 + 1, "v2", JobEventKind.UPDATED, "ana", {})
            )
        )
    triggered = [
        AuditEvent(job.id, T0 + k, f"run-{k}", JobEventKind.TRIGGERED, "ana", {"run_id": f"r{k}"})
        for k in (2, 3)
    ]
    for one in (*triggered, triggered[0]):  # a repeat lands on itself
        store.record_event(one)
    deleted = AuditEvent(job.id, T0 + 9, "v2", JobEventKind.DELETED, "bob", {})
    store.delete(job, deleted_at_ms=T0 + 9, retention_days=1, event=deleted)

    page, cursor = store.list_events(job.id, 2)
    rest, end = store.list_events(job.id, 10, cursor)
    assert page == [deleted, triggered[1]] and cursor == triggered[1].position
    assert rest == [triggered[0], created] and end is None
    assert store.list_events("j_other", 10) == ([], None)
    assert (
        database.reap_expired((T0 // 1000 + 86_401) * 1000) >= 1
    )  # the created event expired, the rest kept
    assert [e.key for e in store.list_events(job.id, 10)[0]] == ["v2", "run-3", "run-2"]


def test_a_jobs_history_filters_by_kind_and_since_on_its_key_range(database: SqliteDatabase) -> None:
    from dataclasses import replace

    from jobsched.models import RunKind
    from jobsched.ports.runs import RunFilter

    runs = SqliteRunStore(database)
    for k in range(6):
        runs.put_new(replace(_run(scheduled_for=T0 + k), kind=RunKind.MANUAL if k % 2 else RunKind.SCHEDULED))
    runs.put_new(replace(_run("j_b", T0 + 3), kind=RunKind.MANUAL))
    rows, cursor = runs.list_for_job("j_a", 2, RunFilter(kind=RunKind.MANUAL))
    assert [r.scheduled_for for r in rows] == [T0 + 5, T0 + 3] and cursor == T0 + 3
    rows, cursor = runs.list_for_job("j_a", 10, RunFilter(kind=RunKind.MANUAL), cursor)
    assert [r.scheduled_for for r in rows] == [T0 + 1] and cursor is None
    rows, _ = runs.list_for_job("j_a", 10, RunFilter(since_ms=T0 + 4))
    assert [r.scheduled_for for r in rows] == [T0 + 5, T0 + 4]
    assert len(runs._rows.values()) == 7  # the fake's scans read every row in one query


def test_expired_runs_move_to_the_archive_and_a_refused_write_keeps_them(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    from jobsched.local.archive import LocalArchive, archive_then_reap
    from jobsched.ports.archive import ArchiveObject, ArchiveUnavailable
    from jobsched.sqlite.runs import archive_expired

    runs = SqliteRunStore(database)
    runs.put_new(_run(scheduled_for=T0, retention_days=1))
    runs.put_new(_run(job_id="j_b", scheduled_for=T0 + 1, retention_days=1))
    runs.put_new(_run(scheduled_for=T0 + 2, retention_days=90))

    class Refusing:
        def put(self, item: ArchiveObject) -> None:
            raise ArchiveUnavailable("disk full")

    with pytest.raises(ArchiveUnavailable):
        archive_expired(database, Refusing(), T0 + 86_401_000)
    assert len(list(runs.rows())) == 3  # nothing deleted that was not archived

    reap = archive_then_reap(database, tmp_path / "archive")
    assert reap(T0 + 86_400_000) == 0  # exactly at the end: still kept
    assert reap(T0 + 86_401_000) == 2
    assert [r.scheduled_for for r in runs.rows()] == [T0 + 2]
    _, found = LocalArchive(tmp_path / "archive").query("SELECT job_id, scheduled_for FROM runs ORDER BY 1")
    assert found == [("j_a", T0), ("j_b", T0 + 1)]


def test_a_crash_between_writing_the_files_and_deleting_the_rows_loses_and_doubles_nothing(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    from jobsched.local.archive import LocalArchive
    from jobsched.ports.archive import ArchiveObject
    from jobsched.sqlite.runs import archive_expired

    runs = SqliteRunStore(database)
    for i in range(3):
        runs.put_new(_run(job_id=f"j_{i}", scheduled_for=T0 + i, retention_days=1))
    archive = LocalArchive(tmp_path / "archive")

    class CrashAfterWrite:
        def put(self, item: ArchiveObject) -> None:
            archive.put(item)
            raise KeyboardInterrupt("the process stops after the file is written")

    with pytest.raises(KeyboardInterrupt):
        archive_expired(database, CrashAfterWrite(), T0 + 86_401_000)
    assert len(list(runs.rows())) == 3  # the rows stay until their files are written and the deletion commits
    runs.put_new(_run(job_id="j_3", scheduled_for=T0 + 3, retention_days=1))
    _, during = archive.query("SELECT count(*) FROM runs")  # a reader meanwhile sees each archived run once
    assert during == [(3,)]
    assert archive_expired(database, archive, T0 + 86_402_000) == 4
    assert list(runs.rows()) == []
    assert len(list((tmp_path / "archive").rglob("*.json.gz"))) == 2  # a run in two files
    _, found = archive.query("SELECT job_id, count(*) FROM runs GROUP BY 1 ORDER BY 1")
    assert found == [(f"j_{i}", 1) for i in range(4)]


def test_a_database_made_before_quota_usage_gets_its_owners_job_counts_and_fire_rates(tmp_path: Path) -> None:
    path = tmp_path / "jobsched.sqlite3"
    database = SqliteDatabase(path)
    store = SqliteJobStore(database)
    made = [job(number, owner=owner) for number, owner in ((1, "team-a"), (2, "team-a"), (3, "team-b"))]
    for each in made:
        store.create(each, state(each))  # written as a release without quotas does: no usage
    with database.write() as conn:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        conn.execute(f"PRAGMA user_version = {version - 4}")  # before the usage and the jobs' counts
    database.close()

    reopened = SqliteDatabase(path)
    try:
        upgraded = SqliteJobStore(reopened)
        rate = fire_rate(made[0].schedule, made[0].timezone)
        assert rate > 0
        assert upgraded.usage("team-a") == OwnerUsage(2, 2 * rate)
        assert upgraded.usage("team-b") == OwnerUsage(1, rate)
        for each in made[:2]:  # deletes take away what the upgrade counted each job with: never below zero
            read = upgraded.get(each.id).job
            assert read.quota_rate == rate
            upgraded.delete(read, deleted_at_ms=1, retention_days=1, usage=count_change("team-a", rate, None))
        assert upgraded.usage("team-a") == OwnerUsage(0, 0)
        assert upgraded.recount_progress() == RecountProgress()  # no pass needed: no job is uncounted
        assert upgraded.uncounted_jobs(None, 10) == ([], None)
    finally:
        reopened.close()
