"""Labels through the Lambda handler on the in-memory fakes: validated on create and PATCH (400 naming
``labels``), returned on the job, replaced by a PATCH without moving the schedule, and selecting jobs in
``GET /jobs?label=k=v`` (every label must match)."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.labels import MAX_LABELS


def list_with(http: Any, *terms: str, caller: str = "alice", **query: str) -> Any:
    """GET /jobs with ``label`` repeated once per term (and the other query parameters given)."""
    event = http.event("GET", "/jobs", caller=caller, query={**query, "label": terms[-1]} if terms else query)
    if terms:
        event["multiValueQueryStringParameters"] = {
            **{k: [v] for k, v in query.items()},
            "label": list(terms),
        }
    return http.invoke(event)


def names(reply: Any) -> list[str]:
    assert reply.status == 200, reply.body
    return [job["name"] for job in reply.body["items"]]


def test_labels_are_returned_on_create_get_and_list(http):
    job = http.create("invoices", labels={"team": "billing", "app.example.com/tier": "gold"})

    assert job["labels"] == {"team": "billing", "app.example.com/tier": "gold"}
    assert http("GET", f"/jobs/{job['id']}").body["labels"] == job["labels"]
    assert http("GET", "/jobs").body["items"][0]["labels"] == job["labels"]
    assert http.create("plain")["labels"] == {}


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ({"has space": "x"}, "label key 'has space'"),
        ({"": "x"}, "label key ''"),
        ({"k" * 64: "x"}, "1-63 characters"),
        ({"team": "v" * 64}, "the value of label 'team'"),
        ({"team": "a=b"}, "the value of label 'team'"),
        ({"team": 5}, "labels"),
        ({f"k{n}": "v" for n in range(MAX_LABELS + 1)}, f"at most {MAX_LABELS} labels"),
    ],
)
def test_a_bad_label_is_refused_naming_labels(http, labels, says):
    for reply in (
        http("POST", "/jobs", body=http.job_body("bad", labels=labels)),
        http("PATCH", f"/jobs/{http.create('good')['id']}", body={"labels": labels}),
    ):
        assert reply.status == 400, reply.body
        assert reply.error["field"].startswith("labels")
        assert says in reply.error["message"]


def test_sixteen_labels_of_63_characters_are_accepted(http):
    labels = {f"{n:02d}" + "k" * 61: "v" * 63 for n in range(MAX_LABELS)}
    assert http.create("full", labels=labels)["labels"] == labels


def test_a_patch_replaces_the_labels_and_keeps_the_schedule(http):
    job = http.create("invoices", labels={"team": "billing", "tier": "gold"})
    http.set_state(job["id"], next_run_at=http.NOW_MS + 60_000)
    http.clock.advance(1000)

    changed = http("PATCH", f"/jobs/{job['id']}", body={"labels": {"team": "ops"}}).body

    assert changed["labels"] == {"team": "ops"}
    assert changed["next_run_at"] == "2026-03-02T10:01:00Z"  # not recomputed: labels are not timing
    cleared = http("PATCH", f"/jobs/{job['id']}", body={"labels": {}}).body
    assert cleared["labels"] == {}
    refused = http("PATCH", f"/jobs/{job['id']}", body={"labels": None})
    assert refused.status == 400 and refused.error["field"] == "labels"


def test_labels_are_not_copied_onto_the_scheduling_state(http):
    job = http.create("invoices", labels={"label-key-q7": "label-value-q7"})
    state = http.state(job["id"])
    assert state.due is not None
    assert "-q7" not in repr(state)


def test_a_listing_keeps_the_jobs_carrying_every_label_given(http):
    http.create("a-gold-billing", labels={"team": "billing", "tier": "gold"})
    http.create("b-billing", labels={"team": "billing"})
    http.create("c-gold-ops", labels={"team": "ops", "tier": "gold"})
    http.create("d-none")
    http.create("e-gold-billing", labels={"tier": "gold", "team": "billing"})
    http.create("z-other-owner", caller="bob", labels={"team": "billing", "tier": "gold"})

    assert names(list_with(http, "team=billing", "tier=gold")) == ["a-gold-billing", "e-gold-billing"]
    assert names(list_with(http, "team=billing")) == ["a-gold-billing", "b-billing", "e-gold-billing"]
    assert names(list_with(http, "team=billing", "team=billing")) == names(list_with(http, "team=billing"))
    assert names(list_with(http, "team=billing", "team=ops")) == []  # one key, two values: none
    assert names(list_with(http, "team=nobody")) == []


def test_a_filtered_listing_pages_with_its_cursor(http):
    for n in range(7):
        http.create(f"job-{n}", labels={"team": "billing" if n % 2 == 0 else "ops"})
    found: list[str] = []
    cursor: dict[str, str] = {}
    for _ in range(10):
        reply = list_with(http, "team=billing", limit="2", **cursor)
        found += names(reply)
        assert len(reply.body["items"]) <= 2
        if not reply.body["next_cursor"]:
            break
        cursor = {"cursor": reply.body["next_cursor"]}
    assert found == ["job-0", "job-2", "job-4", "job-6"]


@pytest.mark.parametrize("term", ["team", "bad key=x", "team=a,b", "=x", f"k={'v' * 64}"])
def test_a_bad_label_selector_is_refused_naming_label(http, term):
    reply = list_with(http, term)
    assert reply.status == 400, reply.body
    assert reply.error["field"] == "label"
    assert "[A-Za-z0-9._/-]{1,63}=[A-Za-z0-9._/-]{0,63}" in reply.error["message"]


def test_more_selector_terms_than_labels_are_refused(http):
    reply = list_with(http, *(f"k{n}=v" for n in range(MAX_LABELS + 1)))
    assert reply.status == 400 and reply.error["field"] == "label"
