"""GET /runs through the handler on the in-memory fakes (design §3.4): the caller's runs across their jobs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jobsched.domain.runs import new_run
from jobsched.models import RunKind, RunStatus
from jobsched.ports.tries import TryRecord

HOUR = 3_600_000


def put(http: Any, job: dict[str, Any], offset_h: int, status: RunStatus, **fields: Any) -> str:
    """A run of ``job`` at NOW - ``offset_h`` hours, recorded under its owner; returns its id."""
    row = new_run(
        job["id"], http.NOW_MS - offset_h * HOUR, now_ms=http.NOW_MS, retention_days=90, status=status,
        owner=job["owner"], **fields,
    )  # fmt: skip
    assert http.api.service.runs.put_new(row) is None
    return row.run_id


@pytest.fixture
def team(http: Any) -> dict[str, Any]:
    """alice's two jobs with five runs between them, and bob's job with one."""
    a, b = http.create("ledger"), http.create("report")
    theirs = http.create("theirs", caller="bob")
    ids = {
        "a_ok": put(http, a, 1, RunStatus.SUCCEEDED),
        "b_dead": put(http, b, 2, RunStatus.DEAD, error="boom"),
        "a_skipped": put(http, a, 3, RunStatus.SKIPPED, error="missed"),
        "b_manual": put(http, b, 4, RunStatus.SUCCEEDED, kind=RunKind.MANUAL),
        "a_dead": put(http, a, 5, RunStatus.DEAD, error="boom"),
        "bob_dead": put(http, theirs, 1, RunStatus.DEAD),
    }
    return {"a": a, "b": b, "ids": ids}


def ids(reply: Any) -> list[str]:
    assert reply.status == 200, reply.body
    return [run["id"] for run in reply.body["items"]]


def test_all_runs_merge_the_callers_jobs_newest_first_and_page(http, team):
    first = http("GET", "/runs", query={"limit": "3"})
    rest = http("GET", "/runs", query={"limit": "3", "cursor": first.body["next_cursor"]})

    want = team["ids"]
    assert ids(first) == [want["a_ok"], want["b_dead"], want["a_skipped"]]
    assert ids(rest) == [want["b_manual"], want["a_dead"]] and rest.body["next_cursor"] is None


def test_failed_runs_come_from_the_failures_index_newest_first(http, team):
    dead = http("GET", "/runs", query={"status": "dead"})
    skipped = http("GET", "/runs", query={"status": "skipped"})

    assert ids(dead) == [team["ids"]["b_dead"], team["ids"]["a_dead"]]
    assert ids(skipped) == [team["ids"]["a_skipped"]]


def test_a_deleted_jobs_failed_runs_stay_listed(http, team):
    assert http("DELETE", f"/jobs/{team['b']['id']}").status == 204

    assert ids(http("GET", "/runs", query={"status": "dead"})) == [
        team["ids"]["b_dead"],
        team["ids"]["a_dead"],
    ]


def test_since_until_job_and_kind_narrow_the_listing(http, team):
    window = {"since": "2026-03-02T05:30:00Z", "until": "2026-03-02T08:30:00Z"}

    in_window = [team["ids"]["b_dead"], team["ids"]["a_skipped"], team["ids"]["b_manual"]]
    assert ids(http("GET", "/runs", query=window)) == in_window
    assert ids(http("GET", "/runs", query={**window, "status": "dead"})) == [team["ids"]["b_dead"]]
    assert ids(http("GET", "/runs", query={"job_id": team["a"]["id"], "status": "dead"})) == [
        team["ids"]["a_dead"]
    ]
    assert ids(http("GET", "/runs", query={"kind": "manual"})) == [team["ids"]["b_manual"]]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"since": "2026-03-02T08:00:00Z", "until": "2026-03-02T08:00:00Z"}, "until"),
        ({"since": "2026-03-02T08:00:00"}, "since"),
        ({"until": "yesterday"}, "until"),
        ({"status": "exploded"}, "status"),
        ({"job_id": "nope"}, "job_id"),
        ({"kind": "sometimes"}, "kind"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(http, team, query, field):
    reply = http("GET", "/runs", query=query)

    assert reply.status == 400 and reply.error["field"] == field, reply.body


def test_another_teams_runs_and_jobs_are_not_listed(http, team):
    mine = http("GET", "/runs", caller="bob")
    theirs = http("GET", "/runs", query={"job_id": team["a"]["id"]}, caller="bob")

    assert [run["job_id"] for run in mine.body["items"]] != [] and team["ids"]["bob_dead"] in ids(mine)
    assert all(run["job_id"] not in (team["a"]["id"], team["b"]["id"]) for run in mine.body["items"])
    assert theirs.status == 404


def test_a_cursor_only_resumes_the_listing_and_filters_it_came_from(http, team):
    cursor = http("GET", "/runs", query={"limit": "1", "status": "dead"}).body["next_cursor"]

    assert http("GET", "/runs", query={"cursor": cursor}).status == 404
    assert http("GET", "/runs", query={"cursor": cursor, "status": "dead"}).status == 200
    assert http("GET", "/runs", query={"cursor": cursor, "status": "dead"}, caller="bob").status == 404


def test_merging_more_jobs_than_the_bound_asks_for_a_narrower_listing(http, team, monkeypatch):
    monkeypatch.setattr("jobsched.api.runs_listing.MAX_FANOUT_JOBS", 1)

    merged = http("GET", "/runs")
    failed = http("GET", "/runs", query={"status": "dead"})

    assert merged.status == 400 and merged.error["field"] == "status"
    assert failed.status == 200 and len(failed.body["items"]) == 2


@pytest.mark.parametrize("value", ["1772445600", "1772445600000", "-1", "1.5e9"])
@pytest.mark.parametrize("name", ["since", "until"])
def test_a_number_for_since_or_until_is_a_400_naming_it_not_read_as_epoch_seconds(http, team, name, value):
    # since/until are ISO 8601 date-times with an offset (as body instants, which refuse numbers): a number is
    # not read as epoch seconds or milliseconds, whose choice pydantic makes by the number's size
    reply = http("GET", "/runs", query={name: value})

    assert reply.status == 400 and reply.error["field"] == name, reply.body


def test_a_dead_runs_lateness_is_given_for_its_first_try_and_for_the_try_that_ended_it(http):
    # Given a dead run whose first try started 2 s late and whose last (third) try 95 s after its fire
    job = http.create("flaky")
    fire = http.NOW_MS - HOUR
    tries = tuple(
        TryRecord(n, fire + late, fire + late + 500, "w", "boom")
        for n, late in ((1, 2_000), (2, 35_000), (3, 95_000))
    )
    row = replace(
        new_run(job["id"], fire, now_ms=http.NOW_MS, retention_days=90, status=RunStatus.DEAD, owner=job["owner"]),
        attempt=3, lateness_ms=2_000, tries=tries, error="boom",
    )  # fmt: skip
    assert http.api.service.runs.put_new(row) is None
    put(http, job, 2, RunStatus.SUCCEEDED)
    # Then the failed runs' listing gives both; a run tried once gives its lateness alone
    [dead] = http("GET", "/runs", query={"status": "dead"}).body["items"]
    assert (dead["lateness_ms"], dead["last_try_lateness_ms"]) == (2_000, 95_000)
    runs = http("GET", f"/jobs/{job['id']}/runs").body["items"]
    assert [(r["status"], r["last_try_lateness_ms"]) for r in runs] == [("dead", 95_000), ("succeeded", None)]
