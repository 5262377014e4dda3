"""``jobsched archive query``: SQL over local mode's archive; bad SQL is one error line naming the argument."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from jobsched.cli import app
from jobsched.domain.archive import archive_objects
from jobsched.local.archive import LocalArchive, archive_dir
from tests.support.archive import finished_runs


def test_a_query_reads_the_archive_under_the_data_dir(tmp_path: Path) -> None:
    archive = LocalArchive(archive_dir(tmp_path))
    for item in archive_objects(finished_runs(30)):
        archive.put(item)
    for item in archive_objects(finished_runs(30)[:7]):  # a batch split by a retry: the same runs again
        archive.put(item)
    sql = "SELECT owner, status, count(*) AS runs FROM runs GROUP BY ALL ORDER BY owner, status"
    result = CliRunner().invoke(app, ["archive", "query", sql, "--data-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [  # every tenth run is dead, one of each owner's ten
        {"owner": owner, "status": status, "runs": runs}
        for owner in ("arn:aws:iam::1:role/c", "team-a", "team-b")
        for status, runs in (("dead", 1), ("succeeded", 9))
    ]
    shown = CliRunner().invoke(app, ["archive", "query", sql, "--data-dir", str(tmp_path)])
    assert shown.exit_code == 0
    assert shown.stdout.split()[:3] == ["owner", "status", "runs"] and "team-b" in shown.stdout


def test_an_empty_archive_answers_no_rows_and_bad_sql_names_the_argument(tmp_path: Path) -> None:
    empty = CliRunner().invoke(
        app, ["archive", "query", "SELECT count(*) AS n FROM runs", "--data-dir", str(tmp_path), "--json"]
    )
    assert empty.exit_code == 0 and json.loads(empty.stdout) == [{"n": 0}]
    bad = CliRunner().invoke(app, ["archive", "query", "SELEC nothing", "--data-dir", str(tmp_path)])
    assert bad.exit_code == 1
    assert bad.stderr.startswith("error: sql: ")
