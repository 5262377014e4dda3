"""Local mode in this process: wired from its own ``Settings`` object, never through the process environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jobsched.settings import Settings
from tests.support.local import quiet_runtime

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
