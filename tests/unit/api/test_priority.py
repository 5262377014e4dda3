"""A job's ``priority`` through the API (design §4.10): ``normal`` by default, set on create and by PATCH, where
it moves the job's due entry into its priority's lane; a bad value is a 400 naming the field."""

from __future__ import annotations

from jobsched.models import Priority
from jobsched.ports.jobs import HIGH_LANES, HIGH_SHARD


def _state(http, job_id):
    return http.backend.jobs.scheduling_states([job_id])[job_id]


def test_a_job_is_normal_unless_it_says_otherwise(http):
    job = http.create("report", schedule="0 2 * * *")

    assert job["priority"] == "normal"
    state = _state(http, job["id"])
    assert state.priority is Priority.NORMAL and state.due.lane not in HIGH_LANES


def test_a_high_job_is_filed_in_the_high_lanes_of_the_high_shard_with_its_owner(http):
    job = http.create("invoices", schedule="0 0 * * *", priority="high")

    assert job["priority"] == "high"
    due = _state(http, job["id"]).due
    assert due.lane in HIGH_LANES and due.shard == HIGH_SHARD
    assert (due.priority, due.owner) == (Priority.HIGH, http.alice_owner)


def test_a_patch_of_the_priority_refiles_the_job_and_keeps_its_next_fire(http):
    job = http.create("invoices", schedule="0 0 * * *", priority="high")

    changed = http("PATCH", f"/jobs/{job['id']}", body={"priority": "low"}).body

    assert changed["priority"] == "low" and changed["next_run_at"] == job["next_run_at"]
    state = _state(http, job["id"])
    assert state.priority is Priority.LOW
    assert state.due.lane not in HIGH_LANES and state.due.priority is Priority.LOW


def test_an_unknown_priority_is_a_400_naming_the_field_on_create_and_patch(http):
    created = http(
        "POST", "/jobs", body={"name": "x", "schedule": "0 2 * * *", "command": "echo", "priority": "urgent"}
    )
    job = http.create("report", schedule="0 2 * * *")
    patched = http("PATCH", f"/jobs/{job['id']}", body={"priority": "urgent"})
    nulled = http("PATCH", f"/jobs/{job['id']}", body={"priority": None})

    for reply in (created, patched, nulled):
        assert reply.status == 400, reply.body
        assert reply.error["field"] == "priority" and reply.error["code"] == "invalid_input"
    assert "high" in created.error["message"]
