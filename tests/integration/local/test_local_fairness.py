"""Local mode end to end (its HTTP API, scheduler, SQLite run queue and worker threads in this process): a noisy
owner's backlog does not hold back a quiet owner's run (design §4.10). The tick sends the quiet owner's fire as
soon as it is due, and the run queue, as SQS fair queues do, hands it out ahead of the noisy owner's messages
while that owner holds most of those in flight. Real time (local mode runs on the system clock): about 30 s."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.local import serving

NOISY = {"Authorization": "Bearer t-noisy"}
QUIET = {"Authorization": "Bearer t-quiet"}
NOISY_JOBS = 40
"""Every second, 40 runs of 3 s: more than twice what the five worker threads' 50 runs in flight drain. (A worker
thread receives once its batch of 10 is done: the others' 40 are in flight then, 30 or more of them the noisy
owner's, which makes it noisy.)"""
SLEEP_S = 3
WATCH_S = 15


def _runs(client: httpx.Client, headers: dict[str, str]) -> list[dict[str, Any]]:
    """Every run of the caller's jobs (``GET /runs``, every page)."""
    runs: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": "100", **({"cursor": cursor} if cursor else {})}
        page = client.get("/runs", params=params, headers=headers).json()
        runs += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return runs


def test_a_quiet_owners_runs_start_on_time_while_a_noisy_owners_backlog_grows(
    quiet_logs: None, tmp_path: Path
) -> None:
    # Given local mode with five worker threads (10 runs each in flight) and two teams
    teams = tmp_path / "teams.json"
    teams.write_text(json.dumps({"t-noisy": "noisy", "t-quiet": "quiet"}))
    lines: list[str] = []
    with serving(tmp_path / "data", lines, tokens_file=teams, workers=5) as (_, client):
        # When the noisy team's 40 jobs each run 3 s every second, and the quiet team's job runs every 2 seconds
        for n in range(NOISY_JOBS):
            body = {
                "name": f"n{n:03d}",
                "schedule": "every 1 second",
                "command": "sleep",
                "input": {"seconds": SLEEP_S},
            }
            assert client.post("/jobs", json=body, headers=NOISY).status_code == 201
        body = {"name": "invoice", "schedule": "every 2 seconds", "command": "echo"}
        assert client.post("/jobs", json=body, headers=QUIET).status_code == 201
        time.sleep(WATCH_S)
        noisy = [r for r in _runs(client, NOISY) if r.get("started_at")]
        quiet = [r for r in _runs(client, QUIET) if r.get("started_at")]

    # Then the noisy team's backlog grew (its latest runs started ever later), while each of the quiet team's runs
    # started within two batches of the noisy runs' 3 s of its fire (the batch a worker thread was running when
    # the fire came, and on a busy machine the one ahead of it): well before the noisy backlog's 8 s and more
    assert max(r["lateness_ms"] for r in noisy) > 2 * (SLEEP_S + 1) * 1000, sorted(
        r["lateness_ms"] for r in noisy
    )
    assert len(quiet) >= WATCH_S // 2 - 2
    assert all(r["lateness_ms"] < 2 * SLEEP_S * 1000 for r in quiet), [r["lateness_ms"] for r in quiet]
    assert len({(r["job_id"], r["scheduled_for"]) for r in noisy + quiet}) == len(noisy + quiet)
