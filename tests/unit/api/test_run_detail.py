"""GET /jobs/{id}/runs/{run_id} (one run with its tries) and POST /jobs/{id}/runs/{run_id}/retry (re-run a dead or
skipped run), design §5.7, through the handler on the in-memory fakes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from jobsched.aws.wire import run_message_body
from jobsched.models import RunStatus
from jobsched.ports.tries import TryRecord


def _dead_run(http: Any, job: dict[str, Any], at: int | None = None, **changes: Any) -> str:
    """A dead run of ``job`` at ``at`` (default: an hour ago) with two failed tries; returns its id."""
    at = at if at is not None else http.NOW_MS - 3_600_000
    http.put_run(job["id"], at, RunStatus.DEAD)
    tries = (
        TryRecord(1, at + 100, at + 200, "w-1", "HTTP 500 from POST https://example.com/", "HTTP 500\ndown"),
        TryRecord(2, at + 60_300, at + 60_400, "w-2", "HTTP 503 from POST https://example.com/", "HTTP 503"),
    )
    runs = http.backend.runs
    runs.force(
        job["id"], at, attempt=2, tries=tries, error="HTTP 503 from POST https://example.com/", **changes
    )
    return f"{job['id']}@{at}"


def _queue(http: Any) -> list[dict[str, Any]]:
    return [json.loads(run_message_body(message)) for message in http.backend.queue.take()]


def test_a_run_shows_its_tries_and_their_output(http):
    job = http.create()
    run_id = _dead_run(http, job)

    reply = http("GET", f"/jobs/{job['id']}/runs/{run_id}")

    assert reply.status == 200, reply.body
    run = reply.body
    assert run["id"] == run_id and run["status"] == "dead" and run["reruns"] == 0
    assert [a["attempt"] for a in run["attempts"]] == [1, 2]
    first = run["attempts"][0]
    assert first == {
        "attempt": 1,
        "started_at": "2026-03-02T09:00:00.100000Z",
        "finished_at": "2026-03-02T09:00:00.200000Z",
        "worker": "w-1",
        "error": "HTTP 500 from POST https://example.com/",
        "output": "HTTP 500\ndown",
        "round": 0,
    }
    assert run["previous_attempts"] == []
    # the listing keeps its shape: no tries
    (listed,) = http("GET", f"/jobs/{job['id']}/runs").body["items"]
    assert "attempts" not in listed and listed["id"] == run_id


@pytest.mark.parametrize(
    "run_id",
    [
        "nonsense",
        "{job}@",
        "{job}@12x",
        "j_ffffffffffffffffffff@1772445600000",  # another job's id
        "{job}@1772445600001",  # no such run
    ],
)
def test_an_absent_or_malformed_run_is_404(http, run_id):
    job = http.create()
    _dead_run(http, job, at=http.NOW_MS - 3_600_000)

    reply = http("GET", f"/jobs/{job['id']}/runs/{run_id.format(job=job['id'])}")

    assert reply.status == 404 and reply.error["code"] == "not_found"


def test_another_teams_run_is_404_to_read_and_to_retry(http):
    job = http.create()
    run_id = _dead_run(http, job)

    read = http("GET", f"/jobs/{job['id']}/runs/{run_id}", caller="bob")
    retried = http("POST", f"/jobs/{job['id']}/runs/{run_id}/retry", caller="bob")

    assert (read.status, retried.status) == (404, 404)
    assert http.backend.runs.get(job["id"], int(run_id.split("@")[1])).status is RunStatus.DEAD


def test_a_re_run_of_a_run_near_its_retention_is_kept_the_retention_from_the_re_run(http):
    # Given a run that died 89 days and 23 hours ago: its row expires (DynamoDB TTL) within the hour
    job = http.create()
    retention_s = http.settings.retention_days * 86400
    at = http.NOW_MS - retention_s * 1000 + 3_600_000
    run_id = _dead_run(http, job, at, expires_at_s=at // 1000 + retention_s)
    # When its owner re-runs it
    assert http("POST", f"/jobs/{job['id']}/runs/{run_id}/retry").status == 202
    # Then the new round is kept the retention from now: it cannot expire mid-run and be recreated by a claim
    row = http.backend.runs.get(job["id"], at)
    assert row.expires_at_s == http.clock() // 1000 + retention_s


def test_a_dead_run_is_queued_again_with_its_id_and_a_fresh_set_of_attempts(http):
    job = http.create()
    run_id = _dead_run(http, job)
    _queue(http)
    http.clock.advance(1_000)

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/retry", caller="carol")

    assert reply.status == 202, reply.body
    run = reply.body
    assert run["id"] == run_id and run["status"] == "queued" and run["attempt"] == 0
    assert run["reruns"] == 1 and run["attempts"] == [] and run["error"] is None
    assert [a["attempt"] for a in run["previous_attempts"]] == [1, 2]
    assert all(a["round"] == 0 for a in run["previous_attempts"])
    scheduled_for = int(run_id.split("@")[1])
    # its message names the round it is for: sent as the re-run queued it (a dead letter of an earlier round is
    # told apart by it)
    assert _queue(http) == [
        {"job_id": job["id"], "scheduled_for": scheduled_for, "enqueued_at": http.clock()}
    ]
    row = http.backend.runs.get(job["id"], scheduled_for)
    assert row.enqueued_at == http.clock()
    assert (
        row.sweep_at == http.clock() + http.settings.sweep_queued_after_s * 1000
    )  # the sweeper's safety net
    (event, *_) = http("GET", f"/jobs/{job['id']}/events").body["items"]
    assert event["kind"] == "run_retried" and event["actor"] == http.carol
    assert event["detail"] == {"run_id": run_id}


def test_a_skipped_run_can_be_retried(http):
    job = http.create()
    at = http.NOW_MS - 60_000
    http.put_run(job["id"], at, RunStatus.SKIPPED)

    reply = http("POST", f"/jobs/{job['id']}/runs/{job['id']}@{at}/retry")

    assert reply.status == 202 and reply.body["status"] == "queued"


@pytest.mark.parametrize("status", ["succeeded", "queued", "running", "retrying"])
def test_a_run_that_is_not_dead_or_skipped_is_409(http, status):
    job = http.create()
    at = http.NOW_MS - 60_000
    http.put_run(job["id"], at, RunStatus(status))

    reply = http("POST", f"/jobs/{job['id']}/runs/{job['id']}@{at}/retry")

    assert reply.status == 409 and reply.error["code"] == "conflict"
    assert f"is {status}; only a dead or skipped run can be retried" in reply.error["message"]
    assert "retry-after" not in reply.headers  # final: asking again cannot succeed
    assert http.backend.runs.get(job["id"], at).status is RunStatus(status)


def test_a_dead_run_still_owing_its_alert_and_a_summary_of_skipped_fires_are_409(http):
    job = http.create()
    owing = _dead_run(http, job, notify_pending=True)
    at = http.NOW_MS - 60_000
    http.put_run(job["id"], at, RunStatus.SKIPPED)
    http.backend.runs.force(job["id"], at, skipped_count=12, skipped_through=at + 11_000)

    first = http("POST", f"/jobs/{job['id']}/runs/{owing}/retry")
    second = http("POST", f"/jobs/{job['id']}/runs/{job['id']}@{at}/retry")

    assert first.status == 409 and "notification is still being sent" in first.error["message"]
    assert first.headers["retry-after"] == "60"  # temporary: the notification goes out within a minute
    assert second.status == 409 and "stands for 12 skipped fires" in second.error["message"]
    assert "retry-after" not in second.headers


def test_a_second_retry_without_a_key_is_409_and_with_the_same_key_replays(http):
    job = http.create()
    run_id = _dead_run(http, job)
    path = f"/jobs/{job['id']}/runs/{run_id}/retry"
    _queue(http)

    first = http("POST", path, headers={"Idempotency-Key": "rerun-1"})
    again = http("POST", path, headers={"Idempotency-Key": "rerun-1"})
    plain = http("POST", path)

    assert (first.status, again.status) == (202, 202)
    assert again.headers.get("idempotent-replayed") == "true" and again.body == first.body
    assert len(_queue(http)) == 1  # one message: the repeat did nothing twice
    events = http("GET", f"/jobs/{job['id']}/events").body["items"]
    assert [e["kind"] for e in events].count("run_retried") == 1
    assert plain.status == 409


def test_a_repeat_after_the_keys_record_was_lost_still_names_the_same_rerun(http):
    # Given a retry whose write landed but whose key record was never completed (the invocation died)
    job = http.create()
    run_id = _dead_run(http, job)
    path = f"/jobs/{job['id']}/runs/{run_id}/retry"
    assert http("POST", path, headers={"Idempotency-Key": "rerun-2"}).status == 202
    http.backend.key_records.records.clear()
    _queue(http)
    # When the client repeats it with its key
    again = http("POST", path, headers={"Idempotency-Key": "rerun-2"})
    # Then it is the same re-run (202, still queued: its message is sent again), not a conflict nor a second one
    assert again.status == 202 and again.body["reruns"] == 1
    assert len(_queue(http)) == 1
    other = http("POST", path, headers={"Idempotency-Key": "rerun-3"})
    assert other.status == 409


def test_a_rerun_then_its_new_tries_are_told_apart_from_the_earlier_ones(http):
    job = http.create()
    run_id = _dead_run(http, job)
    assert http("POST", f"/jobs/{job['id']}/runs/{run_id}/retry").status == 202
    scheduled_for = int(run_id.split("@")[1])
    row = http.backend.runs.get(job["id"], scheduled_for)
    new_try = TryRecord(1, http.NOW_MS, http.NOW_MS + 5, "w-3", None, '{"ok": true}', round=1)
    http.backend.runs.force(
        job["id"], scheduled_for, status=RunStatus.SUCCEEDED, attempt=1, tries=(*row.tries, new_try)
    )

    run = http("GET", f"/jobs/{job['id']}/runs/{run_id}").body

    assert [(a["attempt"], a["round"], a["output"]) for a in run["attempts"]] == [(1, 1, '{"ok": true}')]
    assert [(a["attempt"], a["round"]) for a in run["previous_attempts"]] == [(1, 0), (2, 0)]
    assert dataclasses.asdict(new_try)["round"] == 1


def test_a_deleted_jobs_run_is_readable_but_not_retried(http):
    job = http.create()
    run_id = _dead_run(http, job)
    assert http("DELETE", f"/jobs/{job['id']}").status == 204

    assert http("GET", f"/jobs/{job['id']}/runs/{run_id}").status == 200
    assert http("POST", f"/jobs/{job['id']}/runs/{run_id}/retry").status == 404


def test_a_bad_idempotency_key_is_400_and_a_key_reused_for_another_run_is_422(http):
    job = http.create()
    first = _dead_run(http, job, at=http.NOW_MS - 3_600_000)
    second = _dead_run(http, job, at=http.NOW_MS - 7_200_000)

    empty = http("POST", f"/jobs/{job['id']}/runs/{first}/retry", headers={"Idempotency-Key": ""})
    assert (
        http("POST", f"/jobs/{job['id']}/runs/{first}/retry", headers={"Idempotency-Key": "k"}).status == 202
    )
    reused = http("POST", f"/jobs/{job['id']}/runs/{second}/retry", headers={"Idempotency-Key": "k"})

    assert empty.status == 400 and empty.error["field"] == "Idempotency-Key"
    assert reused.status == 422 and reused.error["code"] == "idempotency_key_reused"
    assert http.backend.runs.get(job["id"], http.NOW_MS - 7_200_000).status is RunStatus.DEAD


def _digits_from(zero: int):
    """Spells an ASCII number with the ten digits from code point ``zero`` on (``str.isdigit`` takes them all)."""
    return lambda ms: "".join(chr(zero + int(digit)) for digit in ms)


@pytest.mark.parametrize(
    "spell",
    [
        _digits_from(0x0660),
        _digits_from(0xFF10),
        lambda ms: "0" + ms,
    ],
    ids=["arabic-indic digits", "fullwidth digits", "leading zero"],
)
def test_another_spelling_of_a_run_id_is_malformed_so_404_to_read_and_to_retry(http, spell):
    # A run id is the job id, '@' and the scheduled_for epoch ms in ASCII digits as the API writes it: another
    # spelling of the same number names no run (no alias of a run that answers with a different id)
    job = http.create()
    run_id = _dead_run(http, job)
    at = run_id.split("@")[1]
    alias = f"{job['id']}@{spell(at)}"

    read = http("GET", f"/jobs/{job['id']}/runs/{alias}")
    retried = http("POST", f"/jobs/{job['id']}/runs/{alias}/retry")

    assert (read.status, retried.status) == (404, 404), (read.body, retried.body)
    assert http.backend.runs.get(job["id"], int(at)).status is RunStatus.DEAD


def test_a_dead_run_owing_its_alert_says_to_ask_again_once_the_sweeper_has_resent_it(http):
    from jobsched.domain.retries import NOTIFY_RETRY_MS

    # Given a run recorded dead a second ago whose worker could not send its notification: the sweeper resends it
    # once the row's sweep_at is due, NOTIFY_RETRY_MS (120 s) after the dead write, at its next pass (each minute)
    job = http.create()
    died_at = http.NOW_MS - 1_000
    owing = _dead_run(http, job, notify_pending=True, finished_at=died_at, sweep_at=died_at + NOTIFY_RETRY_MS)

    # When its owner asks to re-run it
    reply = http("POST", f"/jobs/{job['id']}/runs/{owing}/retry")

    # Then the 409's Retry-After is not before the resend (expected at least 119 s; 60 s invited a second 409)
    resend_in_s = (died_at + NOTIFY_RETRY_MS - http.NOW_MS) / 1000
    assert reply.status == 409 and "notification is still being sent" in reply.error["message"]
    assert int(reply.headers["retry-after"]) >= resend_in_s, reply.headers["retry-after"]
