"""``jobsched local`` end to end, over HTTP: runs on time, retries and dead letters in the history, two
competing schedulers without duplicates, and jobs and history across a graceful restart and a SIGKILL.

One story in three processes (each start costs seconds of imports and provisioning)."""

from __future__ import annotations

import itertools
import json
import re
import signal
from collections.abc import Callable
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from jobsched.cli import register
from tests.e2e.support import LocalProcess, create, instant, runs_of, wait_for

pytestmark = pytest.mark.e2e


def test_runs_retries_dead_letters_two_schedulers_restart_and_sigkill(
    local: Callable[..., LocalProcess],
) -> None:
    # Given local mode with two competing scheduler loops
    first = local("--schedulers", "2", "--workers", "2")
    assert "2 scheduler loop(s)" in first.output()

    # When a job fires every second and a failing job is triggered (2 tries, 1 s apart)
    tick = create(first, {"name": "tick", "schedule": "every 1 second", "command": "echo", "input": {"n": 1}})
    doomed = create(
        first,
        {
            "name": "doomed",
            "schedule": "@yearly",
            "command": "fail",
            "retry": {"max_attempts": 2, "backoff_s": 1},
        },
    )
    trigger = first.http.post(f"/jobs/{doomed['id']}/trigger")
    assert trigger.status_code in (200, 201, 202), trigger.text

    # Then tick runs each second, once each, on time
    wait_for("4 tick runs", lambda: len(runs_of(first, tick["id"], "succeeded")) >= 4)
    # and the failing run retries, then dies: dead in its history, an alert printed
    dead = wait_for("the dead run", lambda: runs_of(first, doomed["id"], "dead"))
    assert dead[0]["attempt"] == 2 and dead[0]["error"]
    wait_for("the alert line", lambda: "ALERT" in first.output())
    assert re.search(r"run  doomed\s+\S+\s+retrying\s+try 1", first.output())
    assert re.search(r"run  doomed\s+\S+\s+dead\s+try 2", first.output())

    # the CLI reads the same history from the running API
    cli = typer.Typer()
    register(cli)
    listed = CliRunner().invoke(cli, ["runs", "tick", "--json", "--api", first.url, "--token", first.token])
    assert listed.exit_code == 0, listed.stderr
    assert {r["job_id"] for r in json.loads(listed.stdout)} == {tick["id"]}

    before = runs_of(first, tick["id"])
    # When it stops gracefully and starts again (one scheduler) on the same data dir
    assert first.stop() == 0
    assert "state saved" in first.output()
    second = local("--workers", "2")
    assert "restored 2 job(s)" in second.output()

    # Then the jobs and their history are there, and fires missed while stopped were caught up
    assert {j["name"] for j in second.http.get("/jobs").json()["items"]} == {"tick", "doomed"}
    assert runs_of(second, doomed["id"], "dead")[0]["id"] == dead[0]["id"]
    stopped_at = max(instant(r["scheduled_for"]) for r in before)
    settled_through = stopped_at + 6

    def settled() -> list[dict[str, Any]] | None:
        # A scheduled run has a row from its claim on (design §4.2): a fire whose message still waits for a
        # worker is listed queued, or not at all when dispatched before the restart. So wait until the fires
        # through settled_through are all listed and succeeded; a fire that never runs keeps a hole, and this
        # times out.
        rows = runs_of(second, tick["id"])
        upto = [r for r in rows if instant(r["scheduled_for"]) <= settled_through]
        fires = sorted({instant(r["scheduled_for"]) for r in upto})
        listed = bool(fires) and round(fires[-1] - settled_through, 3) == 0
        whole = listed and len(fires) == round(fires[-1] - fires[0]) + 1
        return rows if whole and all(r["status"] == "succeeded" for r in upto) else None

    after = wait_for("every fire through 6 s after the restart to have run", settled, timeout_s=40)
    assert {r["id"] for r in before} <= {r["id"] for r in after}
    # one run per fire across both processes and both schedulers: consecutive seconds, no gap, no duplicate
    fires = sorted(
        instant(r["scheduled_for"]) for r in after if instant(r["scheduled_for"]) <= settled_through
    )
    assert len(fires) == len(set(fires))
    assert [round(b - a, 3) for a, b in itertools.pairwise(fires)] == [1.0] * (len(fires) - 1)
    finished = [r for r in after if r["status"] == "succeeded"]
    assert all(r["attempt"] == 1 for r in finished)
    printed = re.findall(r"run  tick\s+(\S+)\s+succeeded", first.output() + "\n" + second.output())
    assert len(printed) == len(set(printed))

    # When a job is registered and the process is SIGKILLed at once (a write is committed before its answer)
    survivor = create(second, {"name": "survivor", "schedule": "@daily", "command": "echo"})
    assert second.stop(signal.SIGKILL) == -signal.SIGKILL
    third = local("--workers", "1")

    # Then nothing acknowledged before the kill is lost
    reply = third.http.get(f"/jobs/{survivor['id']}")
    assert reply.status_code == 200
    assert reply.json()["next_run_at"] == survivor["next_run_at"]
    assert {r["id"] for r in after} <= {r["id"] for r in runs_of(third, tick["id"])}
