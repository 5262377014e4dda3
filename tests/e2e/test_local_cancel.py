"""Cancelling a running ``shell`` run in local mode, end to end over HTTP (design §5.8): the run ends ``cancelled``
at once, and the command's process group is gone within one heartbeat interval (local mode's worker on a
heartbeat of ``HEARTBEAT_S``), its try recorded as stopped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.support import wait_for
from tests.support.local import serving
from tests.support.processes import pid_written, process_gone

pytestmark = pytest.mark.e2e

HEARTBEAT_S = 2
SLACK_S = 3.0
"""Beyond one heartbeat: a busy machine's delay in delivering the beat and the signals (real seconds)."""


def test_a_running_sleep_300_is_cancelled_and_its_process_group_is_gone_within_a_heartbeat(
    tmp_path: Path,
) -> None:
    shell_pid, child_pid = tmp_path / "shell.pid", tmp_path / "child.pid"
    command = f"echo $$ > {shell_pid}; sleep 300 & echo $! > {child_pid}; wait"
    lines: list[str] = []
    data = tmp_path / "data"
    data.mkdir()
    with serving(data, lines, settings={"heartbeat_interval_s": HEARTBEAT_S}) as (_, client):
        body = {"name": "long", "schedule": "daily 02:00", "target": {"type": "shell", "command": command}}
        job = client.post("/jobs", json=body).json()
        run = client.post(f"/jobs/{job['id']}/trigger").json()
        wait_for(
            "the command and its child to start", lambda: pid_written(child_pid) and pid_written(shell_pid)
        )
        pids = [int(shell_pid.read_text()), int(child_pid.read_text())]

        asked = time.monotonic()
        reply = client.post(f"/jobs/{job['id']}/runs/{run['id']}/cancel", json={"reason": "stuck"})

        assert reply.status_code == 200, reply.text
        answer = reply.json()
        assert answer["status"] == "cancelled" and answer["stop"] == "terminated"
        assert answer["cancel_reason"] == "stuck" and answer["cancelled_by"]
        assert all(process_gone(pid, timeout_s=HEARTBEAT_S + SLACK_S) for pid in pids)
        assert time.monotonic() - asked <= HEARTBEAT_S + SLACK_S
        # the try is recorded as stopped by the cancel, and nothing runs it again
        detail = wait_for(
            "the stopped try to be recorded",
            lambda: (d := client.get(f"/jobs/{job['id']}/runs/{run['id']}").json())["attempts"] and d,
        )
        assert detail["status"] == "cancelled"
        (tried,) = detail["attempts"]
        assert "stopped: the run was cancelled by" in tried["error"] and tried["error"].endswith(": stuck")
        events = client.get(f"/jobs/{job['id']}/events").json()["items"]
        assert "run_cancelled" in [e["kind"] for e in events]
