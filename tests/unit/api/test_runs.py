"""POST /jobs/{id}/trigger and GET /jobs/{id}/runs through the handler on the in-memory fakes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from jobsched.aws.wire import parse_run_message, run_message_body
from jobsched.clock import to_ms
from jobsched.models import RunKind, RunStatus


def drain_queue(http: Any) -> list[dict[str, Any]]:
    """Every message body now on the run queue (taken off it), decoded."""
    return [json.loads(run_message_body(message)) for message in http.backend.queue.take()]


def test_trigger_saves_a_manual_run_now_and_enqueues_it(http):
    job = http.create()
    drain_queue(http)

    reply = http("POST", f"/jobs/{job['id']}/trigger")

    assert reply.status == 202
    run = reply.body
    assert run["id"] == f"{job['id']}@{http.NOW_MS}"
    assert run["scheduled_for"] == "2026-03-02T10:00:00Z"
    assert run["status"] == "queued" and run["kind"] == "manual" and run["attempt"] == 0
    assert drain_queue(http) == [
        {"job_id": job["id"], "scheduled_for": http.NOW_MS, "enqueued_at": http.NOW_MS}
    ]
    row = http.api.service.runs.get(job["id"], http.NOW_MS)
    assert row.owner == http.alice_owner and row.sweep_at is not None  # in the sweeper's index
    assert row.sweep_at == http.NOW_MS + http.settings.sweep_queued_after_s * 1000


def test_triggers_in_the_same_millisecond_get_distinct_runs(http):
    job = http.create()

    first = http("POST", f"/jobs/{job['id']}/trigger").body
    second = http("POST", f"/jobs/{job['id']}/trigger").body

    assert first["id"] == f"{job['id']}@{http.NOW_MS}"
    assert second["id"] == f"{job['id']}@{http.NOW_MS - 1}"  # the previous free millisecond: never after now


def test_a_paused_job_can_still_be_triggered(http):
    job = http.create()
    http("POST", f"/jobs/{job['id']}/pause")

    assert http("POST", f"/jobs/{job['id']}/trigger").status == 202


def test_runs_are_listed_newest_first_and_filtered_by_status(http):
    job = http.create()
    base = http.NOW_MS - 10 * 86_400_000
    statuses = [
        RunStatus.SUCCEEDED,
        RunStatus.DEAD,
        RunStatus.SUCCEEDED,
        RunStatus.SKIPPED,
        RunStatus.SUCCEEDED,
    ]
    for day, status in enumerate(statuses):
        http.put_run(job["id"], base + day * 86_400_000, status)
    manual = http("POST", f"/jobs/{job['id']}/trigger").body

    everything = http("GET", f"/jobs/{job['id']}/runs").body
    succeeded = http.invoke(http.sample("list_runs", path_id=job["id"])).body  # ?status=succeeded&limit=10

    assert everything["items"][0]["id"] == manual["id"]
    times = [r["scheduled_for"] for r in everything["items"]]
    assert times == sorted(times, reverse=True) and len(times) == 6
    assert [r["status"] for r in succeeded["items"]] == ["succeeded"] * 3
    assert succeeded["next_cursor"] is None


def test_runs_page_with_cursors(http):
    job = http.create()
    for i in range(7):
        http.put_run(job["id"], http.NOW_MS - i * 60_000, RunStatus.SUCCEEDED if i % 2 else RunStatus.DEAD)

    def walk(query: dict[str, str]) -> list[str]:
        seen, cursor = [], None
        while True:
            page = http(
                "GET", f"/jobs/{job['id']}/runs", query={**query, **({"cursor": cursor} if cursor else {})}
            )
            assert page.status == 200
            seen += [r["scheduled_for"] for r in page.body["items"]]
            cursor = page.body["next_cursor"]
            if cursor is None:
                return seen

    all_runs = walk({"limit": "3"})
    dead_runs = walk({"limit": "2", "status": "dead"})

    assert len(all_runs) == 7 and all_runs == sorted(all_runs, reverse=True)
    assert len(dead_runs) == 4 and dead_runs == sorted(dead_runs, reverse=True)


def test_a_manual_run_is_marked_as_such_in_the_history(http):
    job = http.create()
    http("POST", f"/jobs/{job['id']}/trigger")

    (run,) = http("GET", f"/jobs/{job['id']}/runs").body["items"]

    assert run["kind"] == RunKind.MANUAL.value


def test_the_queue_message_is_the_run_key(http):
    job = http.create()
    drain_queue(http)

    run = http("POST", f"/jobs/{job['id']}/trigger").body
    (body,) = drain_queue(http)

    message = parse_run_message(json.dumps(body))
    assert f"{message.job_id}@{message.scheduled_for}" == run["id"]
    assert message.enqueued_at == to_ms(datetime.fromisoformat(run["enqueued_at"]))  # the round it is for


def test_a_filter_a_job_s_run_listing_does_not_take_is_a_400_naming_it_not_ignored(http):
    # GET /runs takes kind; GET /jobs/{id}/runs does not. Ignoring it answers the whole history as if it were
    # the kind asked for: the caller cannot tell the filter was dropped
    job = http.create()
    for days in (1, 2, 3):
        http.put_run(job["id"], http.NOW_MS - days * 86_400_000, RunStatus.SUCCEEDED)

    for name, value in (("kind", "manual"), ("stauts", "dead")):
        reply = http("GET", f"/jobs/{job['id']}/runs", query={name: value})
        assert reply.status == 400 and reply.error["field"] == name, (name, reply.body)


def test_a_job_s_run_listing_takes_a_window_and_keeps_to_it(http):
    job = http.create()
    for days in (1, 2, 3):
        http.put_run(job["id"], http.NOW_MS - days * 86_400_000, RunStatus.SUCCEEDED)
    since = datetime.fromtimestamp((http.NOW_MS - 2 * 86_400_000 - 1) / 1000, tz=UTC).isoformat()
    until = datetime.fromtimestamp((http.NOW_MS - 86_400_000) / 1000, tz=UTC).isoformat()
    reply = http("GET", f"/jobs/{job['id']}/runs", query={"since": since, "until": until})
    assert reply.status == 200
    assert [to_ms(datetime.fromisoformat(r["scheduled_for"])) for r in reply.body["items"]] == [
        http.NOW_MS - 2 * 86_400_000
    ]
    refused = http("GET", f"/jobs/{job['id']}/runs", query={"since": until, "until": since})
    assert refused.status == 400 and refused.error["field"] == "until"


def test_a_body_sent_to_trigger_is_a_400_not_ignored(http):
    # A trigger is one run now: a body asking for another instant must not be dropped and the run made now
    job = http.create()

    reply = http("POST", f"/jobs/{job['id']}/trigger", body={"scheduled_for": "2030-01-01T00:00:00Z"})

    assert reply.status == 400 and reply.error["field"] in ("body", "scheduled_for"), reply.body
    assert http.backend.queue.sent == []
