"""Local mode in this process: wired from its own ``Settings`` object, never through the process environment."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jobsched.local.config import LocalConfig
from jobsched.settings import Settings
from tests.support.local import quiet_runtime, serving

SETTINGS_NAMES = {name.upper() for name in Settings.model_fields}
"""The environment variables ``Settings`` would read (``JOBS_TABLE``, ``ALLOW_SHELL_TARGETS``...)."""


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A copy of the process environment standing in for it during the test (local mode still points the
    AWS credentials at fake ones); without any ``Settings`` variable to begin with."""
    copy = {name: value for name, value in os.environ.items() if name not in SETTINGS_NAMES}
    monkeypatch.setattr(os, "environ", copy)
    yield copy


def test_local_mode_runs_on_its_own_settings_without_writing_them_to_the_environment(
    environment: dict[str, str], quiet_logs: None, tmp_path: Path
) -> None:
    # Given local mode started in this process with an extra setting of the caller's
    lines: list[str] = []
    runtime = quiet_runtime(tmp_path, lines, settings={"due_shards": 2})
    runtime.start()
    try:
        settings = runtime.components.settings
        auth = {"Authorization": f"Bearer {runtime.token}"}
        with httpx.Client(base_url=runtime.url, headers=auth, timeout=10) as client:
            # When a team registers a shell job (only local mode's own knobs allow shell targets)
            created = client.post(
                "/jobs",
                json={
                    "name": "local-shell",
                    "schedule": "every 10 seconds",
                    "target": {"type": "shell", "command": "true"},
                },
            )
            listed = client.get("/jobs")
    finally:
        runtime.stop()

    # Then the API served it with local mode's settings: its knobs, the caller's, the embedded resources
    assert created.status_code == 201, created.text
    assert [job["name"] for job in listed.json()["items"]] == ["local-shell"]
    assert settings.allow_shell_targets and settings.allow_loopback_http_targets and settings.due_shards == 2
    assert settings.local_tokens_file == str((tmp_path / "tokens.json").resolve())
    assert settings.jobs_table.startswith("jobsched-") and settings.run_queue_url.startswith("http")
    # and none of them went through the process environment
    assert not SETTINGS_NAMES & set(environment)


def test_local_mode_answers_only_its_loopback_names_and_the_names_it_is_given(
    quiet_logs: None, tmp_path: Path
) -> None:
    # Given local mode that also accepts console.example (its --accept-host)
    lines: list[str] = []
    with serving(tmp_path, lines, accept_hosts=("console.example",)) as (runtime, client):
        port = httpx.URL(runtime.url).port
        # When a page of rebind.example, whose name now resolves to 127.0.0.1, calls it (DNS rebinding),
        # and a browser calls it by its own names
        rebound = client.get("/jobs", headers={"Host": f"rebind.example:{port}"})
        console = client.get("/ui/", headers={"Host": f"rebind.example:{port}"})
        own = [client.get("/jobs", headers={"Host": f"{name}:{port}"}) for name in ("localhost", "127.0.0.1")]
        added = client.get("/jobs", headers={"Host": f"console.example:{port}"})

    # Then the foreign name gets a short plain refusal for the API and the console alike
    for refused in (rebound, console):
        assert refused.status_code == 421 and refused.headers["Content-Type"].startswith("text/plain")
        assert "--accept-host" in refused.text
    assert [reply.status_code for reply in (*own, added)] == [200, 200, 200]


def test_a_bad_accept_host_is_refused_before_local_mode_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--accept-host takes NAME or NAME:PORT"):
        LocalConfig(data_dir=tmp_path, accept_hosts=("http://console.example",))
    assert list(tmp_path.iterdir()) == []


def test_over_http_a_request_without_a_content_type_is_taken_as_sent(
    quiet_logs: None, tmp_path: Path
) -> None:
    lines: list[str] = []
    with serving(tmp_path, lines) as (_, client):
        job = client.post(
            "/jobs", json={"name": "labelled", "schedule": "daily 02:00", "command": "echo"}
        ).json()
        # When a call without a body comes without a Content-Type (the server adds none), and a JSON body too
        paused = client.post(f"/jobs/{job['id']}/pause")
        unlabelled = client.post(
            "/jobs", content=json.dumps({"name": "unlabelled", "schedule": "daily 02:00", "command": "echo"})
        )
        names = [j["name"] for j in client.get("/jobs").json()["items"]]

    # Then the first is served and the second refused naming the header
    assert paused.status_code == 200, paused.text
    assert unlabelled.status_code == 400
    assert unlabelled.json()["error"]["code"] == "unsupported_media_type"
    assert unlabelled.json()["error"]["field"] == "Content-Type"
    assert names == ["labelled"]
