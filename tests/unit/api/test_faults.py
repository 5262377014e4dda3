"""Failure paths forced on purpose, on the in-memory fakes: lost races with the scheduler and other requests, a run
key taken in every slot, an unexpected exception. (Store and queue failures of the AWS adapters, end to end:
``tests/integration/api/test_faults.py``.)"""

from __future__ import annotations

from typing import Any

from jobsched.ports.errors import Conflict
from jobsched.ports.jobs import DueEntry, Move


def test_an_unexpected_exception_is_500_with_a_generic_message_and_a_logged_stack(http, caplog, monkeypatch):
    job = http.create()

    def boom(owner: str, job_id: str) -> Any:
        raise RuntimeError("secret detail: table arn:aws:dynamodb:...")

    monkeypatch.setattr(http.api.service, "get_job", boom)
    caplog.clear()
    reply = http("GET", f"/jobs/{job['id']}")

    assert reply.status == 500
    assert "secret" not in reply.error["message"]
    (record,) = [r for r in caplog.records if r.getMessage() == "unhandled error"]
    assert record.levelname == "ERROR"
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)


def test_a_run_key_taken_in_every_slot_is_409(http, monkeypatch):
    job = http.create()
    monkeypatch.setattr(http.api.service.runs, "put_new", lambda row: row)  # every slot taken

    reply = http("POST", f"/jobs/{job['id']}/trigger")

    assert reply.status == 409 and reply.error["code"] == "conflict"


def test_a_scheduler_move_between_read_and_write_is_retried_and_kept(http):
    # Given: the scheduler moves the job (a fire at 02:00 tomorrow) just after the pause read it
    job = http.create()
    jobs = http.api.service.jobs
    replace = jobs.replace
    calls: list[Any] = []

    def racing_replace(*args: Any, **kwargs: Any) -> None:
        if not calls:
            jobs.move(
                Move(
                    job["id"],
                    expected_next_run_at=1_772_503_200_000,
                    expected_version=1,
                    partition=jobs.get(job["id"]).state.partition,
                    term=3,
                    next_run_at=1_772_589_600_000,
                    due=DueEntry(job["id"], 0, 0, 0, 1_772_589_600_000),
                )
            )
        calls.append(args[0].expected_state)
        replace(*args, **kwargs)

    jobs.replace = racing_replace  # type: ignore[method-assign]

    reply = http("POST", f"/jobs/{job['id']}/pause")

    # Then: the first write is refused, the retry keeps the scheduler's move and its term
    assert reply.status == 200
    assert calls == [(1_772_503_200_000, 0), (1_772_589_600_000, 3)]
    assert reply.body["next_run_at"] == "2026-03-04T02:00:00Z"
    state = http.state(job["id"])
    assert state.term == 3 and state.paused is True and state.due is None


def test_a_job_that_keeps_changing_is_409_after_bounded_retries(http):
    job = http.create()
    attempts: list[int] = []

    def always_conflict(*args: Any, **kwargs: Any) -> None:
        attempts.append(1)
        raise Conflict("changed")

    http.api.service.jobs.replace = always_conflict  # type: ignore[method-assign]

    reply = http("PATCH", f"/jobs/{job['id']}", body={"input": 2})

    assert reply.status == 409 and reply.error["code"] == "conflict"
    assert reply.headers["retry-after"] == "1"
    assert len(attempts) == 3


def test_a_name_lock_without_its_job_is_409_conflict(http):
    # Given: a name lock whose job is being deleted by another request
    http.backend.jobs.names[(http.alice_owner, "orphan")] = "j_00000000000000000bad"

    reply = http("POST", "/jobs", body=http.job_body("orphan"))

    assert reply.status == 409 and reply.error["code"] == "conflict"


def test_a_create_transaction_lost_to_a_race_is_409(http, monkeypatch):
    def raced(spec: dict[str, Any], sched: dict[str, Any], event: Any = None, usage: Any = None) -> None:
        raise Conflict("job creation raced; retry")

    monkeypatch.setattr(http.api.service.jobs, "create", raced)

    reply = http("POST", "/jobs", body=http.job_body())

    assert reply.status == 409 and "retry" in reply.error["message"]
