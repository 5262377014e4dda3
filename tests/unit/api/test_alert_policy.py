"""A job's ``alerts`` policy through the handler on the in-memory fakes: defaults, validation, PATCH merging."""

from __future__ import annotations

import pytest


def test_a_new_job_alerts_on_dead_runs_only_and_patch_merges_the_policy_field_by_field(http):
    job = http.create()
    assert job["alerts"] == {
        "on_dead": True,
        "on_skipped": False,
        "on_cancelled": False,
        "late_after_s": None,
        "after_consecutive_failures": None,
        "pause_after_consecutive_dead": None,
    }

    first = http("PATCH", f"/jobs/{job['id']}", body={"alerts": {"late_after_s": 120}})
    second = http("PATCH", f"/jobs/{job['id']}", body={"alerts": {"pause_after_consecutive_dead": 3}})

    assert first.status == second.status == 200
    assert second.body["alerts"] == {**job["alerts"], "late_after_s": 120, "pause_after_consecutive_dead": 3}


@pytest.mark.parametrize(
    ("alerts", "field"),
    [
        ({"late_after_s": 0}, "alerts.late_after_s"),
        ({"after_consecutive_failures": 101}, "alerts.after_consecutive_failures"),
        ({"pause_after_consecutive_dead": "3"}, "alerts.pause_after_consecutive_dead"),
        ({"on_dead": "no"}, "alerts.on_dead"),
        ({"page_me": True}, "alerts.page_me"),
    ],
)
def test_a_bad_policy_is_a_400_naming_its_field(http, alerts, field):
    created = http("POST", "/jobs", body=http.job_body("bad-policy", alerts=alerts))
    job = http.create()
    patched = http("PATCH", f"/jobs/{job['id']}", body={"alerts": alerts})

    assert created.status == patched.status == 400
    assert created.error["field"] == patched.error["field"] == field
