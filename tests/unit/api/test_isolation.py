"""Team isolation: another owner's job is 404 on every route, indistinguishable from an absent one."""

from __future__ import annotations

import pytest

from tests.support.api import without_chain

ABSENT = "j_0000000000000000dead"

ROUTES = [
    ("GET", "/jobs/{id}", None),
    ("PATCH", "/jobs/{id}", {"schedule": "0 5 * * *"}),
    ("DELETE", "/jobs/{id}", None),
    ("POST", "/jobs/{id}/pause", None),
    ("POST", "/jobs/{id}/resume", None),
    ("POST", "/jobs/{id}/trigger", None),
    ("GET", "/jobs/{id}/runs", None),
    ("GET", "/jobs/{id}/fires", None),
    ("GET", "/jobs/{id}/events", None),
    ("POST", "/jobs/{id}/backfill", {"start": "2026-03-01T00:00:00Z", "end": "2026-03-02T00:00:00Z"}),
]


@pytest.mark.parametrize(("method", "template", "body"), ROUTES)
def test_another_owners_job_is_404_like_an_absent_one(http, method, template, body):
    job = http.create()

    theirs = http(method, template.format(id=job["id"]), body=body, caller="bob")
    absent = http(method, template.format(id=ABSENT), body=body, caller="bob")

    assert theirs.status == absent.status == 404
    assert theirs.error == {**absent.error, "message": absent.error["message"].replace(ABSENT, job["id"])}
    assert theirs.headers.keys() == absent.headers.keys()


def test_another_owners_calls_change_nothing(http):
    job = http.create()

    for method, template, body in ROUTES:
        http(method, template.format(id=job["id"]), body=body, caller="bob")

    assert without_chain(http("GET", f"/jobs/{job['id']}").body) == job
    assert http("GET", f"/jobs/{job['id']}/runs").body["items"] == []


def test_a_list_shows_only_the_callers_jobs(http):
    http.create("alpha")
    http.create("beta", caller="bob")

    mine = http("GET", "/jobs").body["items"]
    theirs = http("GET", "/jobs", caller="bob").body["items"]

    assert [j["name"] for j in mine] == ["alpha"]
    assert [j["name"] for j in theirs] == ["beta"]


def test_sessions_of_one_role_share_its_jobs(http):
    job = http.create()

    assert without_chain(http("GET", f"/jobs/{job['id']}", caller="carol").body) == job
    assert http("POST", f"/jobs/{job['id']}/pause", caller="carol").status == 200


def test_a_cursor_cannot_be_used_by_another_owner(http):
    for name in ("a", "b", "c"):
        http.create(name)
        http.create(name, caller="bob")
    cursor = http("GET", "/jobs", query={"limit": "1"}).body["next_cursor"]

    reply = http("GET", "/jobs", query={"limit": "1", "cursor": cursor}, caller="bob")

    assert reply.status == 404 and reply.error["field"] == "cursor"
    assert http("GET", "/jobs", query={"limit": "1", "cursor": cursor}).body["items"][0]["name"] == "b"


def test_a_runs_cursor_is_bound_to_its_job(http):
    first, second = http.create("first"), http.create("second")
    for _ in range(3):
        http("POST", f"/jobs/{first['id']}/trigger")
        http.clock.advance(1_000)
    cursor = http("GET", f"/jobs/{first['id']}/runs", query={"limit": "1"}).body["next_cursor"]

    assert http("GET", f"/jobs/{second['id']}/runs", query={"cursor": cursor}).status == 404
    assert http("GET", f"/jobs/{first['id']}/runs", query={"cursor": cursor}, caller="bob").status == 404
