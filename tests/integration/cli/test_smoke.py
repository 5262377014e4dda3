"""``jobsched smoke`` against a scripted API (httpx.MockTransport) on a fake clock: every step, every way a
step can fail, and the cleanup after each. No test sleeps: the check's waits advance the fake clock."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner

from jobsched.api.app import REPLAYED_HEADER as API_REPLAYED_HEADER
from jobsched.cli import register
from jobsched.client import JobschedClient
from jobsched.clock import FakeClock
from jobsched.smoke import REPLAYED_HEADER, SmokeCheck, SmokeFailed, SmokeSettings

API = "http://api.test/v1"
NOW_MS = 1_772_445_600_250  # 2026-03-02T10:00:00.250Z


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class ScriptedApi:
    """The API as the check sees it. The run appears ``enqueue_ms`` after the job's instant, starts
    ``start_ms`` after it and ends ``finish_ms`` after it with ``final`` (None: that never happens)."""

    clock: FakeClock
    enqueue_ms: int | None = 200
    start_ms: int | None = 450
    finish_ms: int | None = 500
    final: str = "succeeded"
    replays: bool = True
    create_status: int = 201
    delete_status: int = 204
    location_prefix: str = "/v1"
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/v1")
        if request.method == "POST" and path == "/jobs":
            return self._create(request)
        if request.method == "DELETE":
            self.deleted.append(path.split("/")[2])
            if self.delete_status != 204:
                return self._error(self.delete_status, "internal_error")
            return httpx.Response(204)
        job_id = path.split("/")[2]
        if job_id not in self.jobs:
            return self._error(404, "not_found")
        if path.endswith("/runs"):
            return httpx.Response(200, json={"items": self._runs(self.jobs[job_id]), "next_cursor": None})
        return httpx.Response(200, json=self.jobs[job_id])

    def _error(self, status: int, code: str) -> httpx.Response:
        return httpx.Response(status, json={"error": {"code": code, "message": "scripted", "field": None}})

    def _create(self, request: httpx.Request) -> httpx.Response:
        if self.create_status != 201:
            return self._error(self.create_status, "invalid_schedule")
        body = json.loads(request.content)
        key = request.headers.get("Idempotency-Key", "")
        if self.replays and key in self.keys:
            return httpx.Response(200, json=self.jobs[self.keys[key]], headers={REPLAYED_HEADER: "true"})
        job_id = f"j_{len(self.jobs):020x}"
        at = body["schedule"].removeprefix("at ")
        fire_ms = round(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000)
        self.jobs[job_id] = {"id": job_id, "name": body["name"], "fire_ms": fire_ms, "body": body}
        self.keys[key] = job_id
        return httpx.Response(
            201, json=self.jobs[job_id], headers={"Location": f"{self.location_prefix}/jobs/{job_id}"}
        )

    def _runs(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        fire, now = job["fire_ms"], self.clock()
        if self.enqueue_ms is None or now < fire + self.enqueue_ms:
            return []
        run: dict[str, Any] = {
            "id": f"r_{job['id']}",
            "job_id": job["id"],
            "scheduled_for": iso(fire),
            "status": "queued",
            "attempt": 0,
            "enqueued_at": iso(fire + self.enqueue_ms),
            "started_at": None,
            "finished_at": None,
            "lateness_ms": None,
        }
        if self.start_ms is not None and now >= fire + self.start_ms:
            run.update(
                status="running", attempt=1, started_at=iso(fire + self.start_ms), lateness_ms=self.start_ms
            )
            run["worker"] = "worker-1"
        if self.finish_ms is not None and now >= fire + self.finish_ms:
            run.update(status=self.final, finished_at=iso(fire + self.finish_ms))
            if self.final == "dead":
                run["error"] = "echo exploded"
        return [run]


def check(api: ScriptedApi, lines: list[str], **settings: float) -> SmokeCheck:
    client = JobschedClient(API, token="t", transport=httpx.MockTransport(api))
    return SmokeCheck(
        client, say=lines.append, settings=SmokeSettings(**settings), clock=api.clock, sleep=api.clock.sleep,
        suffix="abcd1234",
    )  # fmt: skip


@pytest.fixture
def api() -> ScriptedApi:
    return ScriptedApi(FakeClock(NOW_MS))


def test_a_healthy_deployment_passes_every_step_and_leaves_nothing_behind(api):
    lines: list[str] = []

    result = check(api, lines).run()

    assert [line.split()[0] for line in lines] == [
        "created", "replayed", "enqueued", "started", "succeeded", "cleaned", "passed",
    ]  # fmt: skip
    (job_id,) = api.jobs
    assert api.deleted == [job_id]
    assert result.job_id == job_id and result.run_id == f"r_{job_id}"
    assert result.dispatch_lateness_ms == 200 and result.start_lateness_ms == 450
    assert "dispatch lateness 0.20 s" in lines[2] and "start lateness 0.45 s" in lines[3]
    # the job: a uniquely named one-off 5 s ahead (on a whole second), the echo command, one try
    body = api.jobs[job_id]["body"]
    assert re.fullmatch(r"smoke-20260302T100000Z-abcd1234", body["name"])
    assert body["schedule"] == "at 2026-03-02T10:00:06Z" and body["timezone"] == "UTC"
    assert body["command"] == "echo" and body["retry"] == {"max_attempts": 1}
    # it waited on the fake clock until the run had succeeded, polling once a second
    assert NOW_MS + 5_750 + 500 <= api.clock() <= NOW_MS + 5_750 + 500 + 1_000


def test_a_run_seen_only_when_done_still_reports_each_step_once(api):
    api.enqueue_ms = api.start_ms = api.finish_ms = 100
    lines: list[str] = []

    check(api, lines, poll_s=30).run()

    assert [line.split()[0] for line in lines].count("enqueued") == 1
    assert [line.split()[0] for line in lines][2:5] == ["enqueued", "started", "succeeded"]


@pytest.mark.parametrize(
    ("script", "step", "says"),
    [
        ({"enqueue_ms": None}, "enqueued", "is the scheduler running"),
        ({"start_ms": None, "finish_ms": None}, "started", "is a worker consuming the run queue"),
        ({"finish_ms": None}, "succeeded", "is still running"),
        ({"final": "dead"}, "succeeded", "ended dead: echo exploded"),
        ({"replays": False}, "replay", "expected job"),
        ({"location_prefix": "/elsewhere"}, "create", "does not lead to the job"),
    ],
)
def test_each_failing_step_is_named_and_the_job_is_deleted_anyway(api, script, step, says):
    for name, value in script.items():
        setattr(api, name, value)
    lines: list[str] = []

    with pytest.raises(SmokeFailed) as failed:
        check(api, lines, timeout_s=30).run()

    assert failed.value.step == step and says in failed.value.message
    assert sorted(api.deleted) == sorted(api.jobs)  # every job it made (a second one when replay failed)
    assert lines[-1].startswith("cleaned up")


def test_the_wait_ends_at_the_timeout_after_the_jobs_instant(api):
    api.enqueue_ms = None

    with pytest.raises(SmokeFailed):
        check(api, [], timeout_s=30).run()

    assert NOW_MS + 5_750 + 30_000 <= api.clock() < NOW_MS + 5_750 + 31_000


def test_a_refused_create_fails_the_create_step_with_the_apis_error(api):
    api.create_status = 400

    with pytest.raises(SmokeFailed) as failed:
        check(api, []).run()

    assert failed.value.step == "create" and "invalid_schedule" in failed.value.message
    assert api.deleted == []


def test_a_failed_cleanup_fails_the_check_naming_cleanup(api):
    api.delete_status = 500

    with pytest.raises(SmokeFailed) as failed:
        check(api, []).run()

    assert failed.value.step == "cleanup"


def test_a_failed_cleanup_after_a_failure_is_reported_and_the_first_failure_wins(api):
    api.enqueue_ms, api.delete_status = None, 500
    lines: list[str] = []

    with pytest.raises(SmokeFailed) as failed:
        check(api, lines, timeout_s=5).run()

    assert failed.value.step == "enqueued"
    assert lines[-1].startswith("cleanup    FAILED too")


def test_the_replay_header_is_the_apis():
    assert REPLAYED_HEADER == API_REPLAYED_HEADER


def cli(api: ScriptedApi, *args: str) -> Any:
    app = typer.Typer()
    register(app)
    obj = {"transport": httpx.MockTransport(api), "clock": api.clock, "sleep": api.clock.sleep}
    return CliRunner().invoke(app, ["smoke", "--api", API, "--token", "t", *args], obj=obj)


def test_the_command_prints_the_steps_and_exits_0(api):
    result = cli(api)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"smoke      {API}"
    assert "succeeded" in result.stdout and "passed" in result.stdout


def test_the_command_exits_1_with_one_line_naming_the_failing_step(api):
    api.start_ms = api.finish_ms = None

    result = cli(api, "--timeout", "10")

    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: smoke failed at step started: run r_")


def test_a_bad_timeout_is_a_usage_error(api):
    result = cli(api, "--timeout", "0")

    assert result.exit_code == 2 and api.jobs == {}
