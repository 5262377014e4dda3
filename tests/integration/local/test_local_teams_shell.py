"""Local mode with ``--tokens``: ``shell`` targets run commands as the user running ``jobsched local``, so only
owners with a token marked ``"shell": true`` may use them; other teams get a 400 on ``target`` at create and
PATCH (as AWS answers where shell targets are disabled), and their tries fail without running. The same owners
alone may have ``http`` targets reach loopback (the laptop's own services)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.local import serving

SHELL_JOB = {
    "name": "sh",
    "schedule": "every 1 hour",
    "target": {"type": "shell", "command": "cat tokens.json"},
}
HTTP_JOB = {
    "name": "hook",
    "schedule": "every 1 hour",
    "target": {"type": "http", "url": "https://example.com/"},
}

OPS = {"Authorization": "Bearer t-ops"}
BILLING = {"Authorization": "Bearer t-billing"}


def _ops_and_billing(tmp_path: Path) -> Path:
    """A tokens file of two teams: ``ops`` (token ``t-ops``) granted shell targets, ``billing`` (``t-billing``)
    not; its path."""
    teams = tmp_path / "teams.json"
    teams.write_text(json.dumps({"t-ops": {"owner": "ops", "shell": True}, "t-billing": "billing"}))
    return teams


def test_only_teams_granted_shell_may_use_shell_targets(quiet_logs: None, tmp_path: Path) -> None:
    # Given two teams, ops granted shell targets and billing not
    teams = _ops_and_billing(tmp_path)
    lines: list[str] = []
    with serving(tmp_path / "data", lines, tokens_file=teams) as (_, client):
        # When each creates a shell job, and billing turns its http job into one
        by_ops = client.post("/jobs", json=SHELL_JOB, headers=OPS)
        by_billing = client.post("/jobs", json=SHELL_JOB, headers=BILLING)
        hook = client.post("/jobs", json=HTTP_JOB, headers=BILLING)
        patched = client.patch(
            f"/jobs/{hook.json()['id']}", json={"target": SHELL_JOB["target"]}, headers=BILLING
        )
        listed = client.get("/jobs", headers=BILLING).json()["items"]

    # Then ops' is created, billing's are refused naming the target, as AWS refuses shell targets
    assert by_ops.status_code == 201, by_ops.text
    for refused in (by_billing, patched):
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["field"] == "target" and "not allowed for owner 'billing'" in error["message"]
    assert [job["target"]["type"] for job in listed] == ["http"]


def test_the_dev_token_keeps_shell_targets(quiet_logs: None, tmp_path: Path) -> None:
    lines: list[str] = []
    with serving(tmp_path / "data", lines) as (_, client):
        created = client.post("/jobs", json=SHELL_JOB)
    assert created.status_code == 201, created.text


def _finished_run(client: httpx.Client, job_id: str, headers: dict[str, str]) -> dict[str, Any]:
    """Trigger ``job_id`` and wait (at most 30 s) for its run to end its first try."""
    run = client.post(f"/jobs/{job_id}/trigger", headers=headers).json()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found: dict[str, Any] = client.get(f"/jobs/{job_id}/runs/{run['id']}", headers=headers).json()
        if found.get("attempts") and found["attempts"][0].get("finished_at") is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the run of {job_id} did not finish a try: {found}")


def test_only_teams_granted_shell_may_reach_loopback_with_http_targets(
    quiet_logs: None, tmp_path: Path
) -> None:
    # Given two teams, ops granted shell targets and billing not
    teams = _ops_and_billing(tmp_path)
    lines: list[str] = []
    with serving(tmp_path / "data", lines, tokens_file=teams) as (runtime, client):
        # When each has an http job call a service on loopback (local mode's own API)
        local = {
            **HTTP_JOB,
            "target": {"type": "http", "method": "GET", "url": f"{runtime.url}/openapi.json"},
        }
        by_ops = client.post("/jobs", json=local, headers=OPS).json()
        by_billing = client.post("/jobs", json=local, headers=BILLING).json()
        ops_run = _finished_run(client, by_ops["id"], OPS)
        billing_run = _finished_run(client, by_billing["id"], BILLING)

    # Then ops' try reaches it, and billing's is refused before any connection is made
    assert ops_run["attempts"][0]["output"].startswith("HTTP 200"), ops_run
    assert "resolves to 127.0.0.1 (loopback)" in billing_run["attempts"][0]["error"], billing_run
