"""Who did what (design §3.2) through the handler on the in-memory fakes: ``updated_by``, the pause's who/when/why, and
``GET /jobs/{id}/events``."""

from __future__ import annotations

from datetime import datetime

from jobsched.ports.errors import StoreUnavailable
from tests.support.api import without_chain


def kinds(reply) -> list[str]:
    return [event["kind"] for event in reply.body["items"]]


def test_every_change_records_its_caller_and_the_events_list_them_newest_first(http):
    job = http.create()
    assert job["updated_by"] == http.alice
    http.clock.advance(1_000)
    patched = http("PATCH", f"/jobs/{job['id']}", body={"input": {"n": 2}, "timeout_s": 60}, caller="carol")
    assert patched.body["updated_by"] == http.carol
    http.clock.advance(1_000)
    paused = http("POST", f"/jobs/{job['id']}/pause", body={"reason": "billing freeze"}, caller="carol")
    http.clock.advance(1_000)
    trigger = http("POST", f"/jobs/{job['id']}/trigger")
    http.clock.advance(1_000)
    assert http("POST", f"/jobs/{job['id']}/resume").status == 200

    events = http("GET", f"/jobs/{job['id']}/events")

    assert paused.status == 200
    assert kinds(events) == ["resumed", "triggered", "paused", "updated", "created"]
    resumed, triggered, pause, updated, created = events.body["items"]
    assert pause == {
        "at": "2026-03-02T10:00:02Z",
        "kind": "paused",
        "actor": http.carol,
        "detail": {"reason": "billing freeze"},
    }
    assert updated["detail"] == {"fields": ["input", "timeout_s"]} and updated["actor"] == http.carol
    assert triggered["detail"] == {"run_id": trigger.body["id"]}
    assert created["actor"] == resumed["actor"] == http.alice


def test_a_paused_job_shows_who_paused_it_when_and_why_until_it_is_resumed(http):
    job = http.create()

    paused = http(
        "POST", f"/jobs/{job['id']}/pause", body={"reason": "waiting for the Q3 close"}, caller="carol"
    )
    read = http("GET", f"/jobs/{job['id']}")
    resumed = http("POST", f"/jobs/{job['id']}/resume")

    assert paused.body["paused_by"] == http.carol
    assert paused.body["paused_at"] == "2026-03-02T10:00:00Z"
    assert paused.body["paused_reason"] == "waiting for the Q3 close"
    assert without_chain(read.body) == paused.body
    assert (resumed.body["paused_by"], resumed.body["paused_at"], resumed.body["paused_reason"]) == (
        None,
    ) * 3


def test_a_pause_without_a_body_records_who_and_no_reason(http):
    job = http.create()

    paused = http("POST", f"/jobs/{job['id']}/pause")

    assert paused.status == 200, paused.body
    assert (paused.body["paused_by"], paused.body["paused_reason"]) == (http.alice, None)
    assert http("GET", f"/jobs/{job['id']}/events").body["items"][0]["detail"] == {}


def test_pausing_a_paused_job_changes_nothing_and_records_no_event(http):
    job = http.create()
    first = http("POST", f"/jobs/{job['id']}/pause", body={"reason": "first"})

    again = http("POST", f"/jobs/{job['id']}/pause", body={"reason": "second"}, caller="carol")

    assert again.body == first.body
    assert kinds(http("GET", f"/jobs/{job['id']}/events")) == ["paused", "created"]


def test_a_bad_pause_reason_is_a_400_naming_reason(http):
    job = http.create()
    bad = (
        {"reason": ""},
        {"reason": "x" * 501},
        {"reason": 7},
        {"why": "x"},
        {"reason": "   "},
        {"reason": "a\x00b"},
    )
    for body in (*bad, {"reason": "line\nbreak"}, {"reason": "bell\x07"}):
        reply = http("POST", f"/jobs/{job['id']}/pause", body=body)
        assert reply.status == 400, (body, reply.body)
        assert reply.error["field"] in ("reason", "why"), reply.error
    assert http("GET", f"/jobs/{job['id']}").body["paused"] is False


def test_a_deleted_job_s_events_stay_readable_by_its_owner_only(http):
    job = http.create()
    assert http("DELETE", f"/jobs/{job['id']}").status == 204

    mine = http("GET", f"/jobs/{job['id']}/events")
    theirs = http("GET", f"/jobs/{job['id']}/events", caller="bob")

    assert kinds(mine) == ["deleted", "created"]
    assert theirs.status == 404


def test_events_page_with_a_cursor_that_only_this_listing_accepts(http):
    job = http.create()
    other = http.create("other-job")
    for _ in range(3):
        http.clock.advance(1)
        http("POST", f"/jobs/{job['id']}/trigger")

    first = http("GET", f"/jobs/{job['id']}/events", query={"limit": "2"})
    rest = http("GET", f"/jobs/{job['id']}/events", query={"cursor": first.body["next_cursor"]})
    foreign = http("GET", f"/jobs/{other['id']}/events", query={"cursor": first.body["next_cursor"]})

    assert kinds(first) == ["triggered", "triggered"] and kinds(rest) == ["triggered", "created"]
    assert rest.body["next_cursor"] is None
    assert foreign.status == 404


def test_a_trigger_whose_event_cannot_be_written_still_answers_its_run(http, monkeypatch):
    job = http.create()

    def unavailable(event):
        raise StoreUnavailable("jobs table throttled")

    monkeypatch.setattr(http.api.service.jobs, "record_event", unavailable)
    reply = http("POST", f"/jobs/{job['id']}/trigger")

    assert reply.status == 202 and reply.body["kind"] == "manual"
    assert [e["kind"] for e in http("GET", f"/jobs/{job['id']}/events").body["items"]] == ["created"]


def test_a_patch_that_pauses_or_resumes_is_recorded_as_a_pause_or_a_resume(http):
    # the events are how an operator finds who paused a job: a PATCH of `paused` must not hide as "updated"
    job = http.create()
    assert http("PATCH", f"/jobs/{job['id']}", body={"paused": True}, caller="carol").status == 200
    assert http("PATCH", f"/jobs/{job['id']}", body={"paused": False, "timeout_s": 60}).status == 200
    assert http("PATCH", f"/jobs/{job['id']}", body={"paused": False}).status == 200  # no change of state

    events = http("GET", f"/jobs/{job['id']}/events").body["items"]

    assert [(e["kind"], e["actor"], e["detail"]) for e in events[:3]] == [
        ("updated", http.alice, {"fields": ["paused"]}),
        ("resumed", http.alice, {"fields": ["paused", "timeout_s"]}),
        ("paused", http.carol, {"fields": ["paused"]}),
    ]


def test_a_delete_is_listed_first_after_changes_stamped_later_in_the_same_millisecond(http):
    # Given: two edits in one millisecond (the second is stamped a millisecond on, so that it sorts after the first)
    job = http.create()
    for n in (2, 3):
        assert http("PATCH", f"/jobs/{job['id']}", body={"input": {"n": n}}).status == 200

    # When: the job is deleted in that same millisecond
    assert http("DELETE", f"/jobs/{job['id']}").status == 204

    # Then: the events, newest first, start with the deletion, and no event is later than it
    events = http("GET", f"/jobs/{job['id']}/events").body["items"]
    assert [event["kind"] for event in events] == ["deleted", "updated", "updated", "created"], events
    instants = [datetime.fromisoformat(event["at"]) for event in events]
    assert instants == sorted(instants, reverse=True), instants


def test_a_pause_reason_with_a_unicode_line_break_or_c1_control_is_a_400_naming_reason(http):
    # A reason is "one line of text, without control characters" (it is shown in tables, alerts and the terminal):
    # NEL (U+0085) and LINE/PARAGRAPH SEPARATOR break lines, and C1 controls such as CSI (U+009B) drive terminals.
    job = http.create()
    for reason in ("first\x85second", "first\u2028second", "first\u2029second", "\x9b31mred"):
        reply = http("POST", f"/jobs/{job['id']}/pause", body={"reason": reason})
        assert reply.status == 400, (reason, reply.body)
        assert reply.error["field"] == "reason", reply.error
    assert http("GET", f"/jobs/{job['id']}").body["paused"] is False
