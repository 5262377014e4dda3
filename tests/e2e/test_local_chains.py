"""``jobsched local`` end to end: a chain of three jobs (design §2.1) runs in order, once per upstream run."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.support import LocalProcess, create, instant, runs_of, wait_for

pytestmark = pytest.mark.e2e


def test_a_chain_of_three_jobs_runs_in_order_once_per_upstream_run(
    local: Callable[..., LocalProcess],
) -> None:
    process = local("--workers", "2")
    extract = create(process, {"name": "extract", "schedule": "every 2 seconds", "command": "echo"})
    load = create(process, {"name": "load", "command": "echo", "after": {"job": "extract"}})
    report = create(
        process, {"name": "report", "command": "echo", "after": {"job": load["id"], "on": ["any"]}}
    )
    assert process.http.get(f"/jobs/{load['id']}").json()["downstream"] == [
        {"id": report["id"], "name": "report", "on": ["any"]}
    ]

    # When the upstream has run three times, it is paused, and the chain is let finish
    wait_for(
        "three runs of extract",
        lambda: len([r for r in runs_of(process, extract["id"]) if r["status"] == "succeeded"]) >= 3,
    )
    assert process.http.post(f"/jobs/{extract['id']}/pause").status_code == 200
    ended = wait_for(
        "extract's runs to end",
        lambda: (
            (runs := runs_of(process, extract["id"]))
            and all(r["status"] == "succeeded" for r in runs)
            and runs
        ),
    )
    wait_for(
        "every chained run to succeed",
        lambda: len([r for r in runs_of(process, report["id"]) if r["status"] == "succeeded"]) == len(ended),
    )

    # Then each extract run made exactly one load run, and each load run exactly one report run, in order
    loads = {r["upstream_run_id"]: r for r in runs_of(process, load["id"])}
    reports = {r["upstream_run_id"]: r for r in runs_of(process, report["id"])}
    assert len(loads) == len(runs_of(process, load["id"])) == len(ended)
    assert len(reports) == len(runs_of(process, report["id"])) == len(ended)
    for upstream in ended:
        middle = loads[upstream["id"]]
        last = reports[middle["id"]]
        assert middle["kind"] == last["kind"] == "chained"
        assert middle["scheduled_for"] == last["scheduled_for"] == upstream["scheduled_for"]
        assert instant(middle["started_at"]) >= instant(upstream["finished_at"])
        assert instant(last["started_at"]) >= instant(middle["finished_at"])
