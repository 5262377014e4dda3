"""POST /jobs/{id}/runs/{run_id}/cancel (design §5.8) through the handler on the in-memory fakes: what each status
answers, what the answer says of the try, idempotency, the audit event, the alert, bad input."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.memory.queue import MemoryAlerts
from jobsched.models import RunStatus

AT_OFFSET_MS = 3_600_000


def _run(http: Any, job: dict[str, Any], status: RunStatus, **changes: Any) -> tuple[str, int]:
    """A run of ``job`` an hour ago in ``status`` (``changes`` forced on the row); its id and instant."""
    at = http.NOW_MS - AT_OFFSET_MS
    http.put_run(job["id"], at, status)
    if changes:
        http.backend.runs.force(job["id"], at, **changes)
    return f"{job['id']}@{at}", at


RUNNING = {"attempt": 1, "worker": "w-1", "started_at": 1, "heartbeat_at": 1}


@pytest.mark.parametrize(
    ("status", "changes", "stop"),
    [
        (RunStatus.QUEUED, {}, "not_started"),
        (RunStatus.RETRYING, {"attempt": 1, "retry_at": 5, "sweep_at": 9}, "not_started"),
        (RunStatus.RUNNING, RUNNING, "terminated"),
    ],
)
def test_an_unfinished_run_ends_cancelled_with_who_and_why(http, status, changes, stop):
    job = http.create(target={"type": "command", "name": "sleep"}, cancel_grace_s=7)
    run_id, at = _run(http, job, status, **changes)

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel", body={"reason": "wrong input"})

    assert reply.status == 200, reply.body
    assert reply.body["status"] == "cancelled" and reply.body["stop"] == stop
    assert reply.body["cancelled_by"] == http.alice and reply.body["cancel_reason"] == "wrong input"
    assert reply.body["finished_at"] is not None
    row = http.backend.runs.get(job["id"], at)
    assert row.status is RunStatus.CANCELLED and row.cancelled_from is status
    assert row.sweep_at is None and row.retry_at is None  # the sweeper will not bring it back
    if stop == "terminated":
        assert "7 s later" in reply.body["note"]
    # the audit trail names the caller
    events = http("GET", f"/jobs/{job['id']}/events").body["items"]
    (event,) = [e for e in events if e["kind"] == "run_cancelled"]
    assert event["actor"] == http.alice
    assert event["detail"] == {"run_id": run_id, "reason": "wrong input"}


@pytest.mark.parametrize(
    ("target", "stop"),
    [
        ({"type": "http", "url": "https://example.com/hook"}, "aborted"),
        ({"type": "lambda", "function": "arn:aws:lambda:us-east-1:123456789012:function:f"}, "not_recalled"),
        ({"type": "sqs", "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q"}, "not_recalled"),
    ],
)
def test_the_answer_says_what_becomes_of_a_running_try_by_target(http, target, stop):
    job = http.create(target=target)
    run_id, _ = _run(http, job, RunStatus.RUNNING, **RUNNING)

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel")

    assert reply.status == 200, reply.body
    assert reply.body["stop"] == stop and reply.body["cancel_reason"] is None
    if stop == "not_recalled":
        assert "may still finish" in reply.body["note"]


def test_a_second_cancel_answers_as_the_first_and_writes_nothing(http):
    job = http.create()
    run_id, at = _run(http, job, RunStatus.RUNNING, **RUNNING)
    first = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel", body={"reason": "stop"})
    stored = http.backend.runs.get(job["id"], at)
    http.clock.advance(5_000)

    second = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel", caller="carol")

    assert first.status == second.status == 200
    assert second.body == first.body  # the first canceller, reason and instant stand
    assert http.backend.runs.get(job["id"], at) == stored
    kinds = [e["kind"] for e in http("GET", f"/jobs/{job['id']}/events").body["items"]]
    assert kinds.count("run_cancelled") == 1


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.SKIPPED])
def test_a_finished_run_is_409_and_unchanged(http, status):
    job = http.create()
    run_id, at = _run(http, job, status)
    before = http.backend.runs.get(job["id"], at)

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel")

    assert reply.status == 409 and reply.error["code"] == "conflict"
    assert status.value in reply.error["message"]
    assert http.backend.runs.get(job["id"], at) == before


@pytest.mark.parametrize(
    "run_id",
    ["nonsense", "{job}@1772445600001", "j_ffffffffffffffffffff@1772445600000"],
)
def test_an_absent_or_malformed_run_is_404(http, run_id):
    job = http.create()

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id.format(job=job['id'])}/cancel")

    assert reply.status == 404 and reply.error["code"] == "not_found"


def test_another_owners_run_is_404_and_stays_running(http):
    job = http.create()
    run_id, at = _run(http, job, RunStatus.RUNNING, **RUNNING)

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel", caller="bob")

    assert reply.status == 404
    assert http.backend.runs.get(job["id"], at).status is RunStatus.RUNNING


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": ""}, "reason"),
        ({"reason": "   "}, "reason"),
        ({"reason": "two\nlines"}, "reason"),
        ({"reason": "x" * 501}, "reason"),
        ({"why": "typo"}, "why"),
    ],
)
def test_a_bad_reason_is_400_naming_the_field(http, body, field):
    job = http.create()
    run_id, at = _run(http, job, RunStatus.QUEUED)

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel", body=body)

    assert reply.status == 400, reply.body
    assert reply.error["field"] == field
    assert http.backend.runs.get(job["id"], at).status is RunStatus.QUEUED


def test_an_on_cancelled_alert_goes_out_only_when_the_policy_asks(http):
    alerts = MemoryAlerts()
    http.api.service.alerts = alerts
    quiet = http.create("quiet")
    loud = http.create("loud", alerts={"on_cancelled": True})
    for job in (quiet, loud):
        run_id, _ = _run(http, job, RunStatus.QUEUED)
        assert http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel", body={"reason": "why"}).status == 200

    (alert,) = alerts.published
    assert alert.kind == "cancelled" and alert.job_id == loud["id"]
    assert "cancelled by" in alert.body and "(why)" in alert.body


def test_a_failed_alert_does_not_fail_the_cancel(http):
    class Down:
        def publish(self, alert: Any) -> None:
            raise ConnectionError("SNS unreachable")

    http.api.service.alerts = Down()
    job = http.create(alerts={"on_cancelled": True})
    run_id, at = _run(http, job, RunStatus.QUEUED)

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel")

    assert reply.status == 200 and http.backend.runs.get(job["id"], at).status is RunStatus.CANCELLED


def test_a_deleted_jobs_run_can_still_be_cancelled(http):
    job = http.create()
    run_id, _at = _run(http, job, RunStatus.RUNNING, **RUNNING)
    assert http("DELETE", f"/jobs/{job['id']}").status == 204

    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel")

    assert reply.status == 200 and reply.body["stop"] == "terminated"


def test_cancelled_runs_are_listed_and_filtered(http):
    job = http.create()
    run_id, at = _run(http, job, RunStatus.QUEUED)
    http.put_run(job["id"], at + 1, RunStatus.SUCCEEDED)
    http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel")

    mine = http("GET", "/runs", query={"status": "cancelled"}).body["items"]
    theirs = http("GET", f"/jobs/{job['id']}/runs", query={"status": "cancelled"}).body["items"]

    assert [r["id"] for r in mine] == [r["id"] for r in theirs] == [run_id]
    assert mine[0]["cancelled_by"] == http.alice


def test_cancel_grace_s_has_a_default_and_bounds(http):
    job = http.create()
    assert job["cancel_grace_s"] == 5
    too_long = http("PATCH", f"/jobs/{job['id']}", body={"cancel_grace_s": 301})
    assert too_long.status == 400 and too_long.error["field"] == "cancel_grace_s"
    ok = http("PATCH", f"/jobs/{job['id']}", body={"cancel_grace_s": 0})
    assert ok.status == 200 and ok.body["cancel_grace_s"] == 0


def test_a_store_error_is_500_and_cancels_nothing(http, monkeypatch):
    from jobsched.ports.errors import StoreUnavailable

    job = http.create()
    run_id, at = _run(http, job, RunStatus.QUEUED)

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("runs table unreachable")

    monkeypatch.setattr(http.backend.runs, "cancel", down)
    reply = http("POST", f"/jobs/{job['id']}/runs/{run_id}/cancel")

    assert reply.status == 500, reply.body
    assert http.backend.runs.get(job["id"], at).status is RunStatus.QUEUED
    kinds = [e["kind"] for e in http("GET", f"/jobs/{job['id']}/events").body["items"]]
    assert "run_cancelled" not in kinds


def test_the_apis_alert_sink_is_made_at_its_first_alert_only():
    from jobsched.domain.alerting import alert
    from jobsched.runtime.wiring import LazyAlerts

    made: list[MemoryAlerts] = []

    def make() -> MemoryAlerts:
        made.append(MemoryAlerts())
        return made[-1]

    lazy = LazyAlerts(make)
    assert made == []  # building the API makes no SNS client
    for n in range(2):
        lazy.publish(alert("cancelled", "j_1", "team-a", f"run {n} cancelled", "body"))
    (sink,) = made
    assert [a.subject for a in sink.published] == ["jobsched: run 0 cancelled", "jobsched: run 1 cancelled"]
