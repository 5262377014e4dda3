"""The API's archive reads for one owner: a window before the retention starts the owner's query (202, then
polls, then rows, on the in-memory fake); another owner's poll is 404 as an unknown id; local mode answers from
the local archive's files at once through DuckDB, across the boundary, and never shows another owner's rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobsched.api.archive_reads import ArchiveReads
from jobsched.api.exceptions import ArchiveQueryNotFound, HistoryGone, InvalidInput
from jobsched.domain.archive import archive_batch, archive_row
from jobsched.domain.archive_queries import DAY_MS
from jobsched.local.archive import LocalArchive
from jobsched.local.archive_queries import LocalArchiveQueries
from jobsched.memory.archive_queries import MemoryArchiveQueries
from jobsched.models import RunStatus
from jobsched.ports.archive_queries import QueryState, RunsWindow
from jobsched.ports.runs import RunRow
from jobsched.ports.tries import TryRecord

NOW = 1_790_000_000_000
JOB_A = "j_" + "a" * 20
JOB_B = "j_" + "b" * 20


def run(job_id: str, owner: str, days_ago: int, status: RunStatus = RunStatus.SUCCEEDED) -> RunRow:
    at = NOW - days_ago * DAY_MS
    return RunRow(
        job_id=job_id, scheduled_for=at, status=status, attempt=1, finished_at=at + 500, owner=owner
    )


ROWS = [
    run(JOB_A, "team-a", 200),
    run(JOB_A, "team-a", 120, RunStatus.DEAD),
    run(JOB_B, "team-b", 150),
    run(JOB_B, "team-b", 100),
]


def test_a_window_before_the_retention_answers_202_then_the_owners_rows() -> None:
    fake = MemoryArchiveQueries(polls_before_done=2)
    for row in ROWS:
        fake.add(row.owner or "", archive_row(row))
    reads = ArchiveReads(fake, retention_days=90)
    started = reads.start(RunsWindow("team-a", NOW - 365 * DAY_MS, NOW), now_ms=NOW)
    assert started.status is QueryState.RUNNING and started.body() == {
        "query_id": started.query_id,
        "status": "running",
    }
    assert started.location == f"/archive/queries/{started.query_id}"
    assert reads.poll("team-a", started.query_id).status is QueryState.RUNNING
    done = reads.poll("team-a", started.query_id)
    assert done.status is QueryState.SUCCEEDED
    assert [(r["job_id"], r["status"]) for r in done.body()["runs"]] == [
        (JOB_A, "dead"),
        (JOB_A, "succeeded"),
    ]


def test_another_owners_poll_and_an_unknown_id_are_not_found() -> None:
    reads = ArchiveReads(MemoryArchiveQueries(polls_before_done=0), retention_days=90)
    started = reads.start(RunsWindow("team-a", NOW - 365 * DAY_MS, NOW), now_ms=NOW)
    with pytest.raises(ArchiveQueryNotFound):
        reads.poll("team-b", started.query_id)
    with pytest.raises(ArchiveQueryNotFound):
        reads.poll("team-a", "q-999")
    assert reads.poll("team-a", started.query_id).status is QueryState.SUCCEEDED


def test_without_an_archive_the_window_is_refused_saying_where_the_history_went() -> None:
    reads = ArchiveReads(None, retention_days=90)
    with pytest.raises(HistoryGone) as refused:
        reads.start(RunsWindow("team-a", NOW - 365 * DAY_MS, NOW), now_ms=NOW)
    assert "90 days" in refused.value.message and "archive" in refused.value.message
    with pytest.raises(ArchiveQueryNotFound):
        reads.poll("team-a", "q-1")


def test_a_malformed_window_is_refused_naming_its_field() -> None:
    reads = ArchiveReads(MemoryArchiveQueries(), retention_days=90)
    with pytest.raises(InvalidInput) as refused:
        reads.start(RunsWindow("team-a", NOW - 365 * DAY_MS, NOW, job_id="j_1' OR '1'='1"), now_ms=NOW)
    assert refused.value.field == "job_id"


class _NoSpill:
    def spill(self, items: object) -> None:
        raise AssertionError("a directory never refuses here")


def test_local_mode_reads_the_archive_files_at_once_for_one_owner_only(tmp_path: Path) -> None:
    archive = LocalArchive(tmp_path)
    archive_batch(ROWS, archive, _NoSpill())
    archive_batch(ROWS[:2], archive, _NoSpill())  # a retried batch: the same rows again
    reads = ArchiveReads(LocalArchiveQueries(archive), retention_days=90)
    for owner, job, expected in (("team-a", JOB_A, [120, 200]), ("team-b", JOB_B, [100, 150])):
        answer = reads.start(RunsWindow(owner, NOW - 365 * DAY_MS, NOW), now_ms=NOW)
        assert answer.status is QueryState.SUCCEEDED
        runs = answer.body()["runs"]
        assert {r["job_id"] for r in runs} == {job}
        assert [(NOW - r["scheduled_for"]) // DAY_MS for r in runs] == expected
        assert reads.poll(owner, answer.query_id).runs == runs
        other = "team-b" if owner == "team-a" else "team-a"
        with pytest.raises(ArchiveQueryNotFound):
            reads.poll(other, answer.query_id)
    # another owner's job id named by the caller reads nothing: the owner predicate stays the caller's
    crossed = reads.start(RunsWindow("team-a", NOW - 365 * DAY_MS, NOW, job_id=JOB_B), now_ms=NOW)
    assert crossed.runs == []


def test_local_mode_reads_an_owner_with_an_escaped_partition_and_its_tries(tmp_path: Path) -> None:
    archive = LocalArchive(tmp_path)
    owner = "arn:aws:iam::1:role/o'x"
    tried = RunRow(
        job_id=JOB_A,
        scheduled_for=NOW - 200 * DAY_MS,
        status=RunStatus.DEAD,
        attempt=1,
        owner=owner,
        tries=(TryRecord(1, 5, 6, "w", "HTTP 503", "out"),),
    )
    archive_batch([tried, run(JOB_B, "arn:aws:iam::1:role/o", 200)], archive, _NoSpill())
    answer = ArchiveReads(LocalArchiveQueries(archive), retention_days=90).start(
        RunsWindow(owner, NOW - 365 * DAY_MS, NOW), now_ms=NOW
    )
    assert answer.runs == [{**archive_row(tried), "archived": True}]


@pytest.mark.parametrize("owner", ["_none", "%5Fnone", "None", "null"])
def test_local_mode_never_answers_an_owner_the_runs_that_name_no_owner(tmp_path: Path, owner: str) -> None:
    """Rows written without an owner are in the partition ``_none``; DuckDB decodes partition values, so an owner
    whose own partition decodes to the same text must still read only its own rows."""
    archive = LocalArchive(tmp_path)
    ownerless = RunRow(job_id=JOB_A, scheduled_for=NOW - 200 * DAY_MS, status=RunStatus.DEAD, owner=None)
    own = run(JOB_B, owner, 150)
    archive_batch([ownerless, own], archive, _NoSpill())
    answer = ArchiveReads(LocalArchiveQueries(archive), retention_days=90).start(
        RunsWindow(owner, NOW - 365 * DAY_MS, NOW), now_ms=NOW
    )
    assert answer.status is QueryState.SUCCEEDED
    assert [r["job_id"] for r in answer.runs or []] == [JOB_B]
