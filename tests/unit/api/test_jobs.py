"""Job routes through the Lambda handler on the in-memory fakes: create, read, list, change, delete, pause,
resume. (What the DynamoDB adapters store, end to end: ``tests/integration/api/test_jobs.py``.)"""

from __future__ import annotations

import pytest

from jobsched.models import RunStatus
from jobsched.ports.errors import NotFound
from tests.support.api import without_chain

# --- create ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("public_path", "location_prefix"),
    [
        ("/v1/jobs", "/v1"),  # the execute-api URL: the stage comes first
        ("/scheduler/jobs", "/scheduler"),  # a custom domain with a base path mapping
        ("/jobs", ""),  # a custom domain mapped at its root
    ],
)
def test_location_is_the_path_the_caller_used_to_reach_the_api(http, public_path, location_prefix):
    event = http.event("POST", "/jobs", body=http.job_body("located"))
    event["requestContext"]["path"] = public_path

    reply = http.invoke(event)

    assert reply.status == 201
    assert reply.headers["location"] == f"{location_prefix}/jobs/{reply.body['id']}"


def test_the_sample_create_event_registers_the_billing_job(http):
    reply = http.invoke(http.sample("create_job"))

    assert reply.status == 201
    assert reply.body["name"] == "nightly-billing"
    assert reply.body["retry"] == {"max_attempts": 3, "backoff_s": 60, "max_backoff_s": 900}
    assert reply.body["jitter_s"] == 300
    assert reply.body["owner"] == http.alice_owner


def test_a_rate_is_anchored_at_creation_and_fires_first_at_once(http):
    job = http.create("heartbeat", schedule="rate(5 minutes)")

    assert job["next_run_at"] == "2026-03-02T10:00:00Z"
    # Given: the scheduler has run 10:00 and 10:05 (next_run_at moved to 10:10), and it is 10:07
    http.set_state(job["id"], next_run_at=http.NOW_MS + 10 * 60_000)
    http.clock.advance(7 * 60_000)
    changed = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "every 10 minutes"}).body
    assert changed["next_run_at"] == "2026-03-02T10:10:00Z"  # still on the creation-time grid


def test_a_retimed_job_keeps_a_fire_the_scheduler_has_not_run_yet(http):
    # Given: a rate job whose first fire (10:00, at creation) the scheduler has not run by 10:07
    job = http.create("heartbeat", schedule="rate(5 minutes)")
    http.clock.advance(7 * 60_000)

    changed = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "every 10 minutes"}).body

    # Then: it stays due (the scheduler applies the job's missed policy; see test_with_scheduler)
    assert changed["next_run_at"] == "2026-03-02T10:00:00Z"


def test_a_late_one_off_retimed_before_it_ran_gets_no_fire_from_before_the_job_existed(http):
    # Given: a one-off accepted 30 s late at 10:00 (its instant 09:59:30 is not run yet), re-timed at 10:00:01
    job = http.create("just-missed", schedule="at 2026-03-02T09:59:30")
    http.clock.advance(1000)

    changed = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "*/10 * * * * *"}).body

    # Then: the new schedule fires from the PATCH on, not at 09:59:30, 09:59:40, 09:59:50 nor 10:00:00 (fires of
    # a schedule the job did not have when they fell due)
    assert changed["next_run_at"] == "2026-03-02T10:00:10Z"
    assert http.state(job["id"]).next_run_at == 1_772_445_610_000


def test_a_late_one_off_retimed_to_another_one_off_keeps_its_instant(http):
    job = http.create("just-missed", schedule="at 2026-03-02T09:59:30")
    http.clock.advance(1000)

    changed = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "at 2026-03-02T09:59:40"}).body

    assert changed["next_run_at"] == "2026-03-02T09:59:40Z"


def test_a_rate_with_start_at_is_anchored_there(http):
    job = http.create("later", schedule="rate(1 hour)", start_at="2026-03-05T08:30:00Z")

    assert job["next_run_at"] == "2026-03-05T08:30:00Z"
    assert http.state(job["id"]).anchor_at == 1_772_699_400_000


def test_a_one_off_less_than_a_minute_in_the_past_runs_once_now(http):
    job = http.create("just-missed", schedule="at 2026-03-02T09:59:30")

    assert job["next_run_at"] == "2026-03-02T09:59:30Z"


def test_a_paused_create_stays_out_of_the_due_index(http):
    job = http.create("dormant", paused=True)

    state = http.state(job["id"])
    assert job["paused"] is True
    assert state.due is None and state.next_run_at == 1_772_503_200_000


def test_shell_targets_are_accepted_where_the_deployment_allows_them(http):
    http.reconfigure(http.settings, allow_shell_targets=True)

    job = http.create("local-script", target={"type": "shell", "command": "echo hi"})

    assert job["target"] == {"type": "shell", "command": "echo hi"}


# --- name uniqueness ------------------------------------------------------------------------------


def test_a_repeat_with_the_same_name_and_spec_returns_200_and_the_existing_job(http):
    first = http.create("report")

    http.clock.advance(5_000)
    again = http("POST", "/jobs", body=http.job_body("report"), caller="carol")  # same team, other session

    assert again.status == 200
    assert again.body == first
    assert "location" not in again.headers


def test_the_same_name_with_a_different_spec_is_409_naming_the_field(http):
    first = http.create("report")

    reply = http("POST", "/jobs", body=http.job_body("report", schedule="0 3 * * *"))

    assert reply.status == 409
    assert reply.error["code"] == "name_taken" and reply.error["field"] == "name"
    assert first["id"] in reply.error["message"]


def test_names_are_unique_per_owner_only(http):
    mine = http.create("report")
    theirs = http.create("report", caller="bob")

    assert mine["id"] != theirs["id"] and theirs["owner"] == http.bob_owner


# --- read and list --------------------------------------------------------------------------------


def test_get_returns_the_job_as_created(http):
    job = http.create()

    reply = http.invoke(http.sample("get_job", path_id=job["id"]))

    assert reply.status == 200 and without_chain(reply.body) == job
    assert reply.body["upstream"] is None and reply.body["downstream"] == []


def test_get_of_an_unknown_or_malformed_id_is_404(http):
    for job_id in ("j_00000000000000000000", "nope", "j_" + "f" * 300):
        reply = http("GET", f"/jobs/{job_id}")
        assert reply.status == 404, job_id
        assert reply.error["code"] == "not_found"


def test_list_pages_through_the_owners_jobs_by_name_with_opaque_cursors(http):
    for name in ("e", "a", "d", "b", "c"):
        http.create(name)

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        reply = http("GET", "/jobs", query=query)
        assert reply.status == 200
        seen += [job["name"] for job in reply.body["items"]]
        pages += 1
        cursor = reply.body["next_cursor"]
        if cursor is None:
            break
        assert "billing" not in cursor and "name" not in cursor  # opaque

    assert seen == ["a", "b", "c", "d", "e"]
    assert pages == 3


def test_the_sample_list_event_uses_limit_from_the_query(http):
    for name in ("x1", "x2", "x3"):
        http.create(name)

    reply = http.invoke(http.sample("list_jobs"))

    assert [j["name"] for j in reply.body["items"]] == ["x1", "x2"]
    assert reply.body["next_cursor"]


def test_list_defaults_to_50(http):
    reply = http("GET", "/jobs")

    assert reply.status == 200 and reply.body == {"items": [], "next_cursor": None}


# --- PATCH ----------------------------------------------------------------------------------------


def test_patch_of_the_schedule_recomputes_next_run_at_from_now(http):
    job = http.create()
    http.clock.advance(3_600_000)  # 11:00

    reply = http.invoke(http.sample("update_job", path_id=job["id"]))  # schedule 30 3 * * *

    assert reply.status == 200
    assert reply.body["schedule"] == "30 3 * * *"
    assert reply.body["next_run_at"] == "2026-03-03T03:30:00Z"
    assert reply.body["updated_at"] == "2026-03-02T11:00:00Z"
    assert reply.body["created_at"] == job["created_at"]
    assert http.state(job["id"]).next_run_at == 1_772_508_600_000


def test_patch_of_other_fields_keeps_next_run_at_and_merges_retry(http):
    job = http.create(retry={"max_attempts": 2, "backoff_s": 10})
    # Given: the scheduler is behind (a due fire in the past waits for catch-up)
    http.set_state(job["id"], next_run_at=1_772_416_800_000)  # 2026-03-02T02:00Z

    reply = http("PATCH", f"/jobs/{job['id']}", body={"input": {"n": 2}, "retry": {"max_attempts": 5}})

    assert reply.status == 200
    assert reply.body["input"] == {"n": 2}
    assert reply.body["retry"] == {"max_attempts": 5, "backoff_s": 10, "max_backoff_s": 900}
    assert reply.body["next_run_at"] == "2026-03-02T02:00:00Z"  # the pending fire is not lost


def test_patch_keeps_the_fencing_term(http):
    job = http.create()
    http.set_state(job["id"], term=7)

    http("PATCH", f"/jobs/{job['id']}", body={"schedule": "0 5 * * *"})

    assert http.state(job["id"]).term == 7


def test_patch_can_clear_end_at_and_input(http):
    job = http.create(end_at="2026-12-31T00:00:00Z")

    reply = http("PATCH", f"/jobs/{job['id']}", body={"end_at": None, "input": None})

    assert reply.status == 200 and reply.body["end_at"] is None and reply.body["input"] is None


def test_an_empty_patch_changes_nothing(http):
    job = http.create()
    http.clock.advance(1_000)

    reply = http("PATCH", f"/jobs/{job['id']}", body={})

    assert reply.status == 200 and reply.body == job


def test_patch_validates_the_merged_job(http):
    job = http.create()

    for body, field in (
        ({"schedule": None}, "schedule"),
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"timezone": "PST"}, "timezone"),
        ({"timeout_s": 100_000}, "timeout_s"),
        ({"target": {"type": "shell", "command": "rm -rf /"}}, "target"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"name": "renamed"}, "name"),
        ({"start_at": "2026-04-01T00:00:00"}, "start_at"),
        ({"end_at": "2026-03-01T00:00:00Z"}, "end_at"),
        ({"start_at": "9999-12-31T23:59:59Z"}, "start_at"),
    ):
        reply = http("PATCH", f"/jobs/{job['id']}", body=body)
        assert reply.status == 400, body
        assert reply.error["field"] == field, (body, reply.error)


def test_patch_names_start_at_when_moving_it_leaves_no_fire_before_end_at(http):
    # Given: a daily 02:00 job that ends on 2026-03-10
    job = http.create(end_at="2026-03-10T00:00:00Z")

    for body, field, hint in (
        ({"start_at": "2026-03-11T00:00:00Z"}, "start_at", "before end_at"),
        ({"start_at": "2026-03-09T03:00:00Z"}, "start_at", "no fire of the schedule before end_at"),
        ({"start_at": "2026-03-09T03:00:00Z", "end_at": "2026-03-09T04:00:00Z"}, "end_at", "never run"),
        ({"end_at": "2026-03-02T11:00:00Z"}, "end_at", "never run"),
    ):
        reply = http("PATCH", f"/jobs/{job['id']}", body=body)

        assert reply.status == 400, body
        assert reply.error["field"] == field and hint in reply.error["message"], (body, reply.error)
    assert http("PATCH", f"/jobs/{job['id']}", body={"start_at": "2026-03-09T01:00:00Z"}).status == 200


# --- DELETE ---------------------------------------------------------------------------------------


def test_delete_answers_204_then_the_job_is_gone_from_every_route(http):
    job = http.create()

    reply = http.invoke(http.sample("delete_job", path_id=job["id"]))

    assert reply.status == 204 and reply.body is None
    for method, path in (
        ("GET", f"/jobs/{job['id']}"),
        ("PATCH", f"/jobs/{job['id']}"),
        ("DELETE", f"/jobs/{job['id']}"),
        ("POST", f"/jobs/{job['id']}/pause"),
        ("POST", f"/jobs/{job['id']}/resume"),
        ("POST", f"/jobs/{job['id']}/trigger"),
    ):
        gone = http(method, path, body={"input": 1} if method == "PATCH" else None)
        assert gone.status == 404 and gone.error["code"] == "not_found", (method, path, gone.body)
    assert http("GET", "/jobs").body["items"] == []


def test_delete_keeps_the_run_history_readable_by_its_owner_until_retention(http):
    # Given: a job with a manual run and a succeeded run
    job = http.create()
    manual = http("POST", f"/jobs/{job['id']}/trigger").body
    http.put_run(job["id"], http.NOW_MS - 60_000, RunStatus.SUCCEEDED)

    assert http("DELETE", f"/jobs/{job['id']}").status == 204

    # Then: GET /jobs/{id}/runs still lists the history (newest first), filters and pages it
    runs = http("GET", f"/jobs/{job['id']}/runs")
    assert runs.status == 200, runs.body
    assert [r["id"] for r in runs.body["items"]] == [manual["id"], f"{job['id']}@{http.NOW_MS - 60_000}"]
    succeeded = http("GET", f"/jobs/{job['id']}/runs", query={"status": "succeeded"}).body["items"]
    assert [r["status"] for r in succeeded] == ["succeeded"]
    first = http("GET", f"/jobs/{job['id']}/runs", query={"limit": "1"}).body
    rest = http("GET", f"/jobs/{job['id']}/runs", query={"limit": "1", "cursor": first["next_cursor"]}).body
    assert [r["id"] for r in first["items"] + rest["items"]] == [r["id"] for r in runs.body["items"]]
    # ... and to no one else: another team gets the same 404 as for a job that never existed
    theirs = http("GET", f"/jobs/{job['id']}/runs", caller="bob")
    absent = http("GET", "/jobs/j_0000000000000000dead/runs", caller="bob")
    assert theirs.status == absent.status == 404
    assert theirs.error == {
        **absent.error,
        "message": absent.error["message"].replace("j_0000000000000000dead", job["id"]),
    }
    assert http("GET", f"/jobs/{job['id']}/runs", caller="carol").status == 200  # same role, same owner


def test_a_deleted_jobs_name_can_be_used_again_and_each_keeps_its_history(http):
    first = http.create("report")
    old_run = http("POST", f"/jobs/{first['id']}/trigger").body
    assert http("DELETE", f"/jobs/{first['id']}").status == 204

    second = http.create("report", schedule="0 4 * * *")

    assert second["id"] != first["id"]
    assert [j["id"] for j in http("GET", "/jobs").body["items"]] == [second["id"]]
    assert [r["id"] for r in http("GET", f"/jobs/{first['id']}/runs").body["items"]] == [old_run["id"]]
    assert http("GET", f"/jobs/{second['id']}/runs").body["items"] == []


def test_a_late_repeat_of_a_delete_is_404_and_leaves_the_names_new_job_alone(http):
    # Given: a job read by a DELETE that lost the race to another DELETE, and a new job of the same name since
    job = http.create("report")
    stale = http.api.service.jobs.get(job["id"]).job
    assert http("DELETE", f"/jobs/{job['id']}").status == 204
    newer = http.create("report", schedule="0 4 * * *")

    # When: the stale delete is written
    with pytest.raises(NotFound):
        http.api.service.jobs.delete(stale, deleted_at_ms=http.NOW_MS, retention_days=1)

    # Then: it changed nothing: the new job keeps its name
    assert http.api.service.jobs.job_id_by_name(http.alice_owner, "report") == newer["id"]
    assert http("GET", f"/jobs/{newer['id']}").status == 200


# --- pause / resume -------------------------------------------------------------------------------


def test_pause_takes_the_job_out_of_the_due_index_and_resume_returns_it(http):
    job = http.create()

    paused = http.invoke(http.sample("pause_job", path_id=job["id"]))
    assert paused.status == 200 and paused.body["paused"] is True
    assert http.state(job["id"]).due is None
    assert paused.body["next_run_at"] == job["next_run_at"]

    resumed = http("POST", f"/jobs/{job['id']}/resume")
    state = http.state(job["id"])
    assert resumed.status == 200 and resumed.body["paused"] is False
    assert state.due is not None and state.due.due_at == state.next_run_at == 1_772_503_200_000


def test_pause_and_resume_are_idempotent(http):
    job = http.create()

    first = http("POST", f"/jobs/{job['id']}/pause").body
    http.clock.advance(1_000)
    second = http("POST", f"/jobs/{job['id']}/pause").body

    assert first == second
    assert http("POST", f"/jobs/{job['id']}/resume").body["paused"] is False
    assert http("POST", f"/jobs/{job['id']}/resume").body["paused"] is False


def test_patch_of_a_paused_job_keeps_it_out_of_the_index(http):
    job = http.create()
    http("POST", f"/jobs/{job['id']}/pause")

    reply = http("PATCH", f"/jobs/{job['id']}", body={"schedule": "0 6 * * *"})

    assert reply.body["paused"] is True and reply.body["next_run_at"] == "2026-03-03T06:00:00Z"
    assert http.state(job["id"]).due is None


# --- routing --------------------------------------------------------------------------------------


def test_openapi_json_carries_this_deployments_limits(http):
    http.reconfigure(http.settings, worker_timeout_cap_s=120, allow_shell_targets=True)

    properties = http("GET", "/openapi.json", caller=None).body["components"]["schemas"]["JobCreate"][
        "properties"
    ]
    too_long = http("POST", "/jobs", body=http.job_body("long", timeout_s=121))

    assert properties["timeout_s"]["maximum"] == 120 and too_long.status == 400
    assert "ShellTarget" in str(properties["target"])
