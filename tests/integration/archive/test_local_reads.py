"""Local mode's API across the retention boundary, as its composition root wires it (``SqliteComponents``): a
window from before the retention is answered at once from the archive's files and the runs table together, each
run once, and never with another owner's runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobsched.aws.clients import Aws
from jobsched.clock import FakeClock
from jobsched.domain.archive import archive_objects
from jobsched.local.archive import LocalArchive, archive_dir
from jobsched.local.components import SqliteComponents
from jobsched.models import RunStatus
from jobsched.ports.runs import RunRow
from jobsched.settings import Settings
from jobsched.sqlite.database import SqliteDatabase
from tests.support.api import NOW_MS, Http

DAY_MS = 86_400_000


@pytest.fixture
def http(aws: Aws, settings: Settings, tmp_path: Path) -> Iterator[Http]:
    database = SqliteDatabase(tmp_path / "jobsched.sqlite3")
    try:
        yield Http(
            lambda s, clock: SqliteComponents(s, aws, clock=clock, database=database).api(),
            settings,
            FakeClock(NOW_MS),
            aws=aws,
        )
    finally:
        database.close()


def test_a_window_across_the_retention_reads_the_archive_files_and_the_runs_table(
    http: Http, tmp_path: Path
) -> None:
    job = http.create()
    recent, backfilled, old = (NOW_MS - days * DAY_MS for days in (1, 150, 200))
    http.put_run(job["id"], recent, RunStatus.SUCCEEDED)
    http.put_run(job["id"], backfilled, RunStatus.SUCCEEDED)
    archived = [
        RunRow(job_id=job["id"], scheduled_for=old, status=RunStatus.DEAD, owner=http.alice_owner),
        RunRow(job_id="j_" + "b" * 20, scheduled_for=old, status=RunStatus.DEAD, owner=http.bob_owner),
    ]
    archive = LocalArchive(archive_dir(tmp_path))
    for item in archive_objects(archived):
        archive.put(item)
    since = datetime.fromtimestamp((NOW_MS - 365 * DAY_MS) / 1000, tz=UTC).isoformat()

    answer = http("GET", "/runs", query={"since": since})

    assert answer.status == 200 and answer.body["status"] == "succeeded", answer.body
    found = [(run["job_id"], run["scheduled_for"], run["archived"]) for run in answer.body["runs"]]
    assert found == [(job["id"], recent, False), (job["id"], backfilled, False), (job["id"], old, True)]
    assert http("GET", answer.headers["location"], caller="bob").status == 404


def test_an_archived_cancelled_run_still_says_who_cancelled_it_and_why(http: Http, tmp_path: Path) -> None:
    job = http.create()
    old = NOW_MS - 200 * DAY_MS
    cancelled = RunRow(
        job_id=job["id"],
        scheduled_for=old,
        status=RunStatus.CANCELLED,
        owner=http.alice_owner,
        cancelled_by="arn:aws:iam::1:user/ops",
        cancel_reason="wrong ledger",
        cancelled_from=RunStatus.QUEUED,
    )
    archive = LocalArchive(archive_dir(tmp_path))
    for item in archive_objects([cancelled]):
        archive.put(item)
    since = datetime.fromtimestamp((NOW_MS - 365 * DAY_MS) / 1000, tz=UTC).isoformat()

    [run] = http("GET", f"/jobs/{job['id']}/runs", query={"since": since}).body["runs"]

    assert (run["status"], run["cancelled_by"], run["cancel_reason"]) == (
        "cancelled",
        "arn:aws:iam::1:user/ops",
        "wrong ledger",
    )
