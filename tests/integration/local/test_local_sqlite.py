"""Local mode on its SQLite backend (the default): a data dir of the moto backend moves over whole, and a database
file it cannot use is one error line, not a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from jobsched.local.command import local_command
from jobsched.local.paths import SQLITE_FILE
from jobsched.sqlite.control import SqliteControlStore
from jobsched.sqlite.jobs import SqliteJobStore
from tests.support.local import quiet_runtime, serving


def test_a_data_dir_of_the_moto_backend_moves_to_sqlite_with_its_jobs_runs_and_terms(
    tmp_path: Path, quiet_logs: None
) -> None:
    # Given jobs, a finished manual run and a leader's term saved by local mode on the moto backend
    lines: list[str] = []
    with serving(tmp_path, lines, backend="moto") as (_, client):
        created = [
            client.post("/jobs", json={"name": f"job-{n}", "schedule": "@daily", "command": "echo"}).json()
            for n in range(3)
        ]
        assert client.post(f"/jobs/{created[0]['id']}/pause", json={}).status_code == 200
        run = client.post(f"/jobs/{created[1]['id']}/trigger").json()
        deleted = client.delete(f"/jobs/{created[2]['id']}")
        assert deleted.status_code in (200, 204)
    assert not (tmp_path / SQLITE_FILE).exists()

    # When local mode starts on the SQLite backend on the same data dir
    with serving(tmp_path, lines, backend="sqlite") as (sqlite, client):
        jobs = {j["name"]: j for j in client.get("/jobs").json()["items"]}
        runs = client.get(f"/jobs/{created[1]['id']}/runs").json()["items"]
        gone_runs = client.get(f"/jobs/{created[2]['id']}/runs")
        assert sqlite.database is not None
        lease = SqliteControlStore(sqlite.database).read_lease(0)

    # Then the jobs (paused as they were), the run and the deleted job's history owner came along
    assert set(jobs) == {"job-0", "job-1"}
    assert jobs["job-0"]["paused"] is True
    assert jobs["job-1"]["next_run_at"] == created[1]["next_run_at"]
    assert [r["id"] for r in runs] == [run["id"]]
    assert gone_runs.status_code == 200  # the tombstone keeps the owner of a deleted job's history
    # and the scheduler's fencing term went on from the moto backend's (never back to a lower one)
    assert lease is not None and lease.term >= 2
    assert any("restored 2 job(s)" in line for line in lines)


def test_a_database_file_local_mode_cannot_use_is_one_line_and_exit_1(
    tmp_path: Path, quiet_logs: None
) -> None:
    (tmp_path / SQLITE_FILE).write_bytes(b"not a database, " * 512)
    app = typer.Typer()
    app.command()(local_command)
    result = CliRunner().invoke(app, ["--port", "0", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert f"{SQLITE_FILE} is not a usable jobsched SQLite database" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_unfinished_rows_of_the_sqlite_store_are_enqueued_again_as_the_moto_items_are() -> None:
    from dataclasses import replace

    from jobsched.domain.runs import new_run
    from jobsched.local.recovery import unfinished_row_messages
    from jobsched.models import RunStatus
    from jobsched.ports.run_messages import RunMessage

    now = 1_767_578_400_000

    def row(job_id: str, status: RunStatus, **fields: int) -> object:
        return replace(
            new_run(job_id, now - 60_000, now_ms=now - 60_000, retention_days=90), status=status, **fields
        )

    rows = [
        row("a", RunStatus.QUEUED, dispatch_at=now + 30_500),
        row("c", RunStatus.RETRYING, retry_at=now + 4000),
        row("d", RunStatus.RUNNING, heartbeat_at=now - 100_000),
        row("f", RunStatus.SUCCEEDED),
    ]
    assert unfinished_row_messages(rows, now_ms=now, heartbeat_stale_s=120) == [  # type: ignore[arg-type]
        RunMessage("a", now - 60_000, 31),
        RunMessage("c", now - 60_000, 4),
        RunMessage("d", now - 60_000, 21),
    ]


def test_a_first_sqlite_start_killed_while_moving_a_moto_data_dir_moves_every_job_at_the_next_start(
    tmp_path: Path, quiet_logs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a data dir of the moto backend with three jobs
    lines: list[str] = []
    with serving(tmp_path, lines, backend="moto") as (_, client):
        for n in range(3):
            created = client.post("/jobs", json={"name": f"job-{n}", "schedule": "@daily", "command": "echo"})
            assert created.status_code == 201

    # And a first start on the SQLite backend that dies (kill -9) after moving one job: nothing after the
    # first job's write runs, as a killed process runs nothing more
    class Killed(BaseException):
        pass

    created_jobs: list[str] = []
    original = SqliteJobStore.create

    def dies_after_the_first(self: SqliteJobStore, job: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
        if created_jobs:
            raise Killed()
        created_jobs.append(job.id)
        return original(self, job, state, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(SqliteJobStore, "create", dies_after_the_first)
        dying = quiet_runtime(tmp_path, lines, backend="sqlite")
        with pytest.raises(Killed):
            dying.start()
        dying.stop()  # frees the port and moto; writes no state (no snapshotter started)
    assert len(created_jobs) == 1  # killed after the first job was written

    # When local mode starts again on the SQLite backend
    with serving(tmp_path, lines, backend="sqlite") as (_, client):
        names = sorted(j["name"] for j in client.get("/jobs").json()["items"])

    # Then every job of the moto data dir is there (expected), not only the one moved before the kill
    assert names == ["job-0", "job-1", "job-2"]


def test_a_second_local_mode_on_a_data_dir_in_use_is_refused_naming_it(
    tmp_path: Path, quiet_logs: None
) -> None:
    # Given local mode running on a data dir (a run in flight would be its queue message, received and hidden)
    lines: list[str] = []
    with serving(tmp_path, lines) as (_, client):
        # When a second one is started on the same data dir by mistake (another port)
        # Then it is refused before it opens anything: opening the run queue makes every message the first one
        # holds visible again at once, before its visibility timeout (the previous process is taken for dead),
        # and both would schedule, work and snapshot the same data
        with (
            pytest.raises(OSError, match="in use by another jobsched local") as refused,
            serving(tmp_path, lines),
        ):
            pass
        assert str(tmp_path) in str(refused.value)
        # and the first one goes on serving
        assert client.get("/jobs").status_code == 200


def test_an_input_holding_a_lone_surrogate_is_400_naming_input_not_a_500(
    tmp_path: Path, quiet_logs: None
) -> None:
    # Given local mode on SQLite and a job
    lines: list[str] = []
    json_body = {"Content-Type": "application/json"}
    with serving(tmp_path, lines) as (_, client):
        job = client.post("/jobs", json={"name": "fine", "schedule": "@daily", "command": "echo"}).json()
        # When an input holds "\ud800" (valid JSON, not Unicode text: no UTF-8 encodes it), as a value or a key
        replies = [
            client.post(
                "/jobs",
                content=b'{"name": "odd", "schedule": "@daily", "command": "echo", "input": {"k": "\\ud800"}}',
                headers=json_body,
            ),
            client.patch(f"/jobs/{job['id']}", content=b'{"input": {"\\udfff": 1}}', headers=json_body),
        ]
        stored = client.get(f"/jobs/{job['id']}").json()
    # Then each is a 400 naming input (it was a 500: the SQLite store cannot encode the spec), nothing stored
    for reply in replies:
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["field"] == "input"
    assert stored.get("input") is None


def test_jobs_created_on_the_moto_backend_after_the_move_to_sqlite_refuse_the_next_sqlite_start(
    tmp_path: Path, quiet_logs: None
) -> None:
    # Given a data dir already on SQLite (its database made), then run once with --backend moto, where a job
    # is created and acknowledged (saved in state.json at the graceful stop)
    lines: list[str] = []

    def run(backend: str, action: Any) -> Any:
        with serving(tmp_path, lines, backend=backend) as (_, client):
            return action(client)

    def create(name: str) -> Any:
        return lambda client: client.post(
            "/jobs", json={"name": name, "schedule": "@daily", "command": "echo"}
        )

    assert run("sqlite", create("on-sqlite")).status_code == 201
    assert run("moto", create("on-moto")).status_code == 201

    # When local mode starts on SQLite again (the default backend), it refuses, naming the state file: starting
    # would rewrite state.json without the job acknowledged on moto, which the database never had (lost from both)
    with pytest.raises(OSError, match=r"state\.json holds 1 job\(s\) created with --backend moto"):
        run("sqlite", lambda client: None)

    # Then nothing was lost: the moto backend still serves the job, and the data dir is free again
    names = run("moto", lambda client: sorted(j["name"] for j in client.get("/jobs").json()["items"]))
    assert "on-moto" in names
