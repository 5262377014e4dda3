"""``kill -9`` of ``jobsched local`` loses no acknowledged write: every job created, edited or deleted, every
manual run and every run the API showed before the kill is there after a restart on the same data dir.

The writes are made and the process killed at once, with no wait for any saving: on the SQLite backend a
write is committed before the API answers it."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e.support import LocalProcess, wait_for

pytestmark = pytest.mark.e2e


def _ok(reply: Any, *codes: int) -> dict[str, Any]:
    assert reply.status_code in codes, reply.text
    return dict(reply.json()) if reply.content else {}


def test_a_sigkill_loses_no_acknowledged_write(local: Callable[..., LocalProcess]) -> None:
    # Given local mode with a job firing every second, whose runs the API has shown
    first = local("--workers", "2")
    ticking = _ok(
        first.http.post("/jobs", json={"name": "tick", "schedule": "every 1 second", "command": "echo"}), 201
    )
    wait_for(
        "two finished tick runs",
        lambda: (
            len(first.http.get(f"/jobs/{ticking['id']}/runs", params={"status": "succeeded"}).json()["items"])
            >= 2
        ),
    )

    # When jobs are created, edited, deleted and triggered, and the process is killed right after the answers
    created = [
        _ok(first.http.post("/jobs", json={"name": f"job-{n}", "schedule": "@daily", "command": "echo"}), 201)
        for n in range(20)
    ]
    paused = _ok(first.http.post(f"/jobs/{created[0]['id']}/pause", json={}), 200)
    _ok(first.http.delete(f"/jobs/{created[1]['id']}"), 200, 204)
    trigger = _ok(
        first.http.post(f"/jobs/{created[2]['id']}/trigger", headers={"Idempotency-Key": "before-the-kill"}),
        202,
    )
    seen_runs = {
        r["id"]
        for r in first.http.get(f"/jobs/{ticking['id']}/runs", params={"limit": "100"}).json()["items"]
    }
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL

    # Then after a restart on the same data dir every acknowledged write is there
    second = local("--workers", "2")
    names = {j["name"]: j for j in second.http.get("/jobs", params={"limit": "100"}).json()["items"]}
    assert set(names) == {"tick"} | {f"job-{n}" for n in range(20)} - {"job-1"}
    for job in created[2:]:
        assert names[job["name"]]["next_run_at"] == job["next_run_at"]
    assert names["job-0"]["paused"] is True and paused["paused"] is True
    assert second.http.get(f"/jobs/{created[1]['id']}").status_code == 404
    manual = second.http.get(f"/jobs/{created[2]['id']}/runs").json()["items"]
    assert [r["id"] for r in manual] == [trigger["id"]]
    again = _ok(
        second.http.post(f"/jobs/{created[2]['id']}/trigger", headers={"Idempotency-Key": "before-the-kill"}),
        202,
    )
    assert again["id"] == trigger["id"]  # the key still names the same run: no second one
    after = {
        r["id"]
        for r in second.http.get(f"/jobs/{ticking['id']}/runs", params={"limit": "100"}).json()["items"]
    }
    assert seen_runs <= after


def test_after_a_sigkill_every_fire_of_a_catch_up_job_runs_once_none_lost(
    local: Callable[..., LocalProcess],
) -> None:
    # Given a job firing every second (missed: catch_up, the default) that has run a few times
    first = local("--workers", "2")
    job = _ok(
        first.http.post("/jobs", json={"name": "tick", "schedule": "every 1 second", "command": "echo"}), 201
    )

    def succeeded(process: LocalProcess) -> list[dict[str, Any]]:
        items = process.http.get(f"/jobs/{job['id']}/runs", params={"limit": "100"}).json()["items"]
        return [r for r in items if r["status"] == "succeeded"]

    wait_for("three finished runs", lambda: len(succeeded(first)) >= 3)

    # When the process is killed (fires in the queue and in flight), stays down a few seconds and restarts
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    killed_ms = int(time.time() * 1000)
    time.sleep(3)  # real downtime: local mode runs on the system clock
    second = local("--workers", "2")
    restarted_ms = int(time.time() * 1000)

    # Then every fire from the first one to the restart ran, exactly once: the ones queued or running at the
    # kill, and the ones missed while it was down (caught up)
    def caught_up() -> list[int] | None:
        # every fire through a second before the restart succeeded, and one after it: two workers finish the
        # caught-up fires in any order, so a later one done does not mean the earlier ones are
        ms = sorted(_ms(r["scheduled_for"]) for r in succeeded(second))
        before = [m for m in ms if m < restarted_ms - 1000]
        gaps = set(range(before[0], before[-1] + 1, 1000)) - set(before) if before else {0}
        return ms if not gaps and ms[-1] >= restarted_ms else None

    with contextlib.suppress(AssertionError):  # timed out: the assertions below say which fires are missing
        wait_for("every fire through the restart", caught_up, timeout_s=30)
    items = second.http.get(f"/jobs/{job['id']}/runs", params={"limit": "100"}).json()["items"]
    fires = sorted(r["scheduled_for"] for r in items)
    assert len(fires) == len(set(fires))  # one run per fire
    done = sorted(r["scheduled_for"] for r in items if r["status"] == "succeeded")
    seconds = [_ms(f) for f in done if _ms(f) < restarted_ms - 1000]
    assert seconds and seconds[0] < killed_ms - 2000 and seconds[-1] > killed_ms + 2000, fires  # the downtime
    missing = sorted(set(range(seconds[0], seconds[-1] + 1, 1000)) - set(seconds))
    assert missing == [], (
        f"fires not run: {[_iso(m) for m in missing]}; runs: {[(r['scheduled_for'], r['status']) for r in items]}"
    )


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
