"""Local mode with ``--tokens``: ``shell`` targets run commands as the user running ``jobsched local``, so only
owners with a token marked ``"shell": true`` may use them; other teams get a 400 on ``target`` at create and
PATCH (as AWS answers where shell targets are disabled), and their tries fail without running."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_only_teams_granted_shell_may_use_shell_targets(quiet_logs: None, tmp_path: Path) -> None:
    # Given two teams, ops granted shell targets and billing not
    teams = tmp_path / "teams.json"
    teams.write_text(json.dumps({"t-ops": {"owner": "ops", "shell": True}, "t-billing": "billing"}))
    lines: list[str] = []
    with serving(tmp_path / "data", lines, tokens_file=teams) as (_, client):
        ops = {"Authorization": "Bearer t-ops"}
        billing = {"Authorization": "Bearer t-billing"}
        # When each creates a shell job, and billing turns its http job into one
        by_ops = client.post("/jobs", json=SHELL_JOB, headers=ops)
        by_billing = client.post("/jobs", json=SHELL_JOB, headers=billing)
        hook = client.post("/jobs", json=HTTP_JOB, headers=billing)
        patched = client.patch(
            f"/jobs/{hook.json()['id']}", json={"target": SHELL_JOB["target"]}, headers=billing
        )
        listed = client.get("/jobs", headers=billing).json()["items"]

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
