"""Chains through the API (design §2.1): ``after`` on create and PATCH, its refusals, the chain on
``GET /jobs/{id}``, and a deleted upstream pausing the jobs that run after it."""

from __future__ import annotations

from typing import Any

import pytest


def after_body(name: str, upstream: str, **fields: Any) -> dict[str, Any]:
    """A POST /jobs body of a job that runs after ``upstream`` (its id or name): no schedule."""
    return {"name": name, "command": "echo", "after": {"job": upstream, **fields}}


def create_after(http: Any, name: str, upstream: str, caller: str = "alice", **fields: Any) -> dict[str, Any]:
    reply = http("POST", "/jobs", body=after_body(name, upstream, **fields), caller=caller)
    assert reply.status == 201, reply.body
    return dict(reply.body)


def test_a_job_after_another_named_by_name_stores_its_id_and_has_no_schedule(http):
    extract = http.create("extract")

    load = create_after(http, "load", "extract", on=["succeeded", "dead"])

    assert load["after"] == {"job": extract["id"], "on": ["succeeded", "dead"]}
    assert load["schedule"] is None and load["next_run_at"] is None
    assert http.state(load["id"]).due is None  # never due: its runs come from its upstream's
    assert http("GET", f"/jobs/{load['id']}/fires").body == {
        "items": [],
        "reason": "runs after another job (after): it has no schedule of its own",
    }


def test_get_shows_a_jobs_upstream_and_downstream_jobs(http):
    extract = http.create("extract")
    load = create_after(http, "load", extract["id"])
    report = create_after(http, "report", load["id"], on=["any"])
    audit = create_after(http, "audit", load["id"], on=["dead"])

    middle = http("GET", f"/jobs/{load['id']}").body
    top = http("GET", f"/jobs/{extract['id']}").body

    assert middle["upstream"] == {"id": extract["id"], "name": "extract", "on": None}
    assert middle["downstream"] == [
        {"id": audit["id"], "name": "audit", "on": ["dead"]},
        {"id": report["id"], "name": "report", "on": ["any"]},
    ]
    assert top["upstream"] is None
    assert top["downstream"] == [{"id": load["id"], "name": "load", "on": ["succeeded"]}]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"name": "both", "command": "echo", "schedule": "0 2 * * *", "after": {"job": "extract"}},
            "after",
            "give either schedule or after",
        ),
        ({"name": "neither", "command": "echo"}, "schedule", "schedule is required"),
        ({"name": "null", "command": "echo", "schedule": None}, "schedule", "cannot be null"),
        (
            {"name": "bad-on", "command": "echo", "after": {"job": "extract", "on": ["skipped"]}},
            "after.on",
            "",
        ),
        ({"name": "no-on", "command": "echo", "after": {"job": "extract", "on": []}}, "after.on", ""),
    ],
)
def test_a_job_needs_exactly_one_of_schedule_and_after(http, body, field, message):
    http.create("extract")

    reply = http("POST", "/jobs", body=body)

    assert reply.status == 400 and reply.error["field"] == field, reply.body
    assert message in reply.error["message"]


def test_an_upstream_of_another_owner_is_404_naming_after_job_like_an_absent_one(http):
    theirs = http.create("extract", caller="bob")

    by_id = http("POST", "/jobs", body=after_body("load", theirs["id"]))
    by_name = http("POST", "/jobs", body=after_body("load", "extract"))
    absent = http("POST", "/jobs", body=after_body("load", "j_0000000000000000dead"))

    for reply in (by_id, by_name, absent):
        assert reply.status == 404 and reply.error["field"] == "after.job", reply.body
    assert http("GET", "/jobs").body["items"] == []  # nothing was created
    # and the same on PATCH
    mine = http.create("mine")
    patched = http("PATCH", f"/jobs/{mine['id']}", body={"after": {"job": theirs["id"]}})
    assert patched.status == 404 and patched.error["field"] == "after.job"


def test_a_patch_closing_a_loop_is_refused_naming_after(http):
    extract = http.create("extract")
    load = create_after(http, "load", extract["id"])
    report = create_after(http, "report", load["id"])

    into_itself = http("PATCH", f"/jobs/{load['id']}", body={"after": {"job": load["id"]}})
    round_the_loop = http("PATCH", f"/jobs/{extract['id']}", body={"after": {"job": report["id"]}})

    for reply in (into_itself, round_the_loop):
        assert reply.status == 400 and reply.error["field"] == "after", reply.body
        assert "chains cannot loop" in reply.error["message"]
    assert http("GET", f"/jobs/{extract['id']}").body["after"] is None  # unchanged


def test_a_patch_swaps_a_schedule_for_an_after_and_back(http):
    extract = http.create("extract")
    job = http.create("load")

    chained = http("PATCH", f"/jobs/{job['id']}", body={"after": {"job": "extract"}})
    scheduled = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "0 5 * * *"})
    both = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "0 5 * * *", "after": {"job": "extract"}})
    null = http("PATCH", f"/jobs/{job['id']}", body={"after": None})

    assert chained.status == 200, chained.body
    assert chained.body["schedule"] is None and chained.body["after"]["job"] == extract["id"]
    assert chained.body["next_run_at"] is None and http.state(job["id"]) is not None
    assert scheduled.status == 200 and scheduled.body["after"] is None
    assert scheduled.body["schedule"] == "0 5 * * *" and scheduled.body["next_run_at"] is not None
    assert both.status == 400 and both.error["field"] == "after"
    assert null.status == 400 and null.error["field"] == "after"


def test_deleting_an_upstream_pauses_the_jobs_that_run_after_it_with_a_reason(http):
    extract = http.create("extract")
    load = create_after(http, "load", extract["id"])
    already = create_after(http, "already-paused", extract["id"])
    http("POST", f"/jobs/{already['id']}/pause", body={"reason": "maintenance"})
    elsewhere = http.create("elsewhere")

    assert http("DELETE", f"/jobs/{extract['id']}").status == 204

    paused = http("GET", f"/jobs/{load['id']}").body
    assert paused["paused"] is True and paused["paused_by"] == "jobsched"
    assert paused["paused_reason"] == f"upstream extract ({extract['id']}) was deleted"
    assert paused["upstream"] is None  # its upstream is gone
    assert (
        http("GET", f"/jobs/{already['id']}").body["paused_reason"] == "maintenance"
    )  # its own pause stands
    assert http("GET", f"/jobs/{elsewhere['id']}").body["paused"] is False
    kinds = [e["kind"] for e in http("GET", f"/jobs/{load['id']}/events").body["items"]]
    assert kinds[0] == "paused"


def test_a_job_whose_upstream_was_deleted_can_still_be_edited_and_relinked(http):
    extract = http.create("extract")
    load = create_after(http, "load", extract["id"])
    assert http("DELETE", f"/jobs/{extract['id']}").status == 204

    # an edit that leaves after alone is kept (the broken link stays, the job stays paused)
    edited = http("PATCH", f"/jobs/{load['id']}", body={"labels": {"team": "data"}})
    assert edited.status == 200, edited.body
    assert edited.body["labels"] == {"team": "data"} and edited.body["after"]["job"] == extract["id"]
    assert edited.body["paused"] is True
    # a resume through PATCH still names the missing upstream (it would wait for runs that never come)
    resumed = http("PATCH", f"/jobs/{load['id']}", body={"paused": False})
    assert resumed.status == 404 and resumed.error["field"] == "after.job"
    resumed = http("POST", f"/jobs/{load['id']}/resume")
    assert resumed.status == 404 and resumed.error["field"] == "after.job"
    assert http("GET", f"/jobs/{load['id']}").body["paused"] is True
    # pointing after at a live job relinks it
    again = http.create("extract-2")
    relinked = http("PATCH", f"/jobs/{load['id']}", body={"after": {"job": "extract-2"}, "paused": False})
    assert relinked.status == 200, relinked.body
    assert relinked.body["after"]["job"] == again["id"] and relinked.body["paused"] is False


def test_a_job_after_another_has_no_fires_to_backfill_but_can_be_triggered(http):
    http.create("extract")
    load = create_after(http, "load", "extract")

    backfill = http(
        "POST",
        f"/jobs/{load['id']}/backfill",
        body={"start": "2026-03-01T00:00:00Z", "end": "2026-03-02T00:00:00Z"},
    )
    triggered = http("POST", f"/jobs/{load['id']}/trigger")

    assert backfill.status == 400 and backfill.error["field"] == "schedule"
    assert triggered.status == 202 and triggered.body["kind"] == "manual"
    assert triggered.body["upstream_run_id"] is None
