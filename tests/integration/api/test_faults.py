"""Failure paths forced on purpose: throttling, lost races with the scheduler, queue and store failures."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from jobsched.adapters.queue import RunQueue
from jobsched.ports.errors import Conflict
from jobsched.ports.jobs import DueEntry
from jobsched.ports.runs import QueueSendError, RunMessage
from jobsched.store.layout import SCHED_SK, job_pk, name_key


def client_error(code: str, operation: str = "Query") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


# --- throttling and unexpected errors -------------------------------------------------------------


def test_dynamodb_throttling_is_429_with_retry_after(http):
    job = http.create()
    client = http.api.service.jobs.table.meta.client

    with Stubber(client) as stubber:
        stubber.add_client_error("query", "ProvisionedThroughputExceededException", http_status_code=400)
        reply = http("GET", f"/jobs/{job['id']}")

    assert reply.status == 429
    assert reply.error["code"] == "throttled" and reply.headers["retry-after"] == "1"


def test_idempotency_store_throttling_is_429(http):
    client = http.aws.dynamodb  # the idempotency layer's client

    with Stubber(client) as stubber:
        stubber.add_client_error("put_item", "ThrottlingException", http_status_code=400)
        reply = http("POST", "/jobs", body=http.job_body(), headers={"Idempotency-Key": "k-throttle"})

    assert reply.status == 429


def test_an_idempotency_store_failure_is_a_generic_500(http):
    with Stubber(http.aws.dynamodb) as stubber:
        stubber.add_client_error("put_item", "InternalServerError", http_status_code=500)
        reply = http("POST", "/jobs", body=http.job_body(), headers={"Idempotency-Key": "k-broken"})

    assert reply.status == 500
    assert reply.error == {
        "code": "internal_error",
        "message": "internal error; retry later or contact the operators",
        "field": None,
    }


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


# --- queue failures on trigger --------------------------------------------------------------------


class FailingQueue:
    """A run queue whose sends SQS refuses."""

    def __init__(self) -> None:
        self.sent: list[RunMessage] = []

    def send(self, messages: list[RunMessage]) -> None:
        self.sent.extend(messages)
        raise QueueSendError(list(messages))


class FailingSqs:
    """An SQS client whose SendMessageBatch fails outright (an AWS error after the SDK's retries)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message_batch(self, **kwargs: Any) -> Any:
        self.sent.extend(kwargs["Entries"])
        raise client_error("AWS.SimpleQueueService.NonExistentQueue", "SendMessageBatch")


@pytest.mark.parametrize("failure", ["refused", "aws-error"])
def test_a_trigger_whose_enqueue_fails_still_saves_the_run_for_the_sweeper(http, failure):
    job = http.create()
    # SQS refusing the message, or the request failing outright: the queue adapter raises QueueSendError
    queue = FailingQueue() if failure == "refused" else RunQueue(FailingSqs(), "https://sqs/q")
    http.api.service.queue = queue

    reply = http("POST", f"/jobs/{job['id']}/trigger")

    assert reply.status == 202 and reply.body["status"] == "queued"
    sent = queue.sent if isinstance(queue, FailingQueue) else queue.sqs.sent
    assert len(sent) == 1
    row = http.aws.table(http.settings.runs_table).get_item(
        Key={"job_id": job["id"], "scheduled_for": http.NOW_MS}
    )["Item"]
    assert row["status"] == "queued" and "sweep_pk" in row  # the sweeper's index will find it


def test_a_run_key_taken_in_every_slot_is_409(http, monkeypatch):
    job = http.create()
    monkeypatch.setattr(http.api.service.runs, "put_new", lambda row: row)  # every slot taken

    reply = http("POST", f"/jobs/{job['id']}/trigger")

    assert reply.status == 409 and reply.error["code"] == "conflict"


# --- lost races -----------------------------------------------------------------------------------


def test_a_scheduler_move_between_read_and_write_is_retried_and_kept(http):
    # Given: the scheduler moves the job (a fire at 02:00 tomorrow) just after the pause read it
    job = http.create()
    jobs = http.api.service.jobs
    replace = jobs.replace
    calls: list[Any] = []

    def racing_replace(*args: Any, **kwargs: Any) -> None:
        if not calls:
            jobs.move(
                job["id"],
                expected_next_run_at=1_772_503_200_000,
                expected_version=1,
                partition=jobs.get(job["id"]).state.partition,
                term=3,
                next_run_at=1_772_589_600_000,
                due=DueEntry(job["id"], 0, 0, 0, 1_772_589_600_000),
            )
        calls.append(kwargs.get("expected_state"))
        replace(*args, **kwargs)

    jobs.replace = racing_replace  # type: ignore[method-assign]

    reply = http("POST", f"/jobs/{job['id']}/pause")

    # Then: the first write is refused, the retry keeps the scheduler's move and its term
    assert reply.status == 200
    assert calls == [(1_772_503_200_000, 0), (1_772_589_600_000, 3)]
    assert reply.body["next_run_at"] == "2026-03-04T02:00:00Z"
    item = http.aws.table(http.settings.jobs_table).get_item(Key={"pk": job_pk(job["id"]), "sk": SCHED_SK})[
        "Item"
    ]
    assert int(item["term"]) == 3 and item["paused"] is True and "due_pk" not in item


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
    http.aws.table(http.settings.jobs_table).put_item(
        Item={**name_key(http.alice_owner, "orphan"), "job_id": "j_00000000000000000bad"}
    )

    reply = http("POST", "/jobs", body=http.job_body("orphan"))

    assert reply.status == 409 and reply.error["code"] == "conflict"


def test_a_create_transaction_lost_to_a_race_is_409(http, monkeypatch):
    def raced(spec: dict[str, Any], sched: dict[str, Any], event: Any = None) -> None:
        raise Conflict("job creation raced; retry")

    monkeypatch.setattr(http.api.service.jobs, "create", raced)

    reply = http("POST", "/jobs", body=http.job_body())

    assert reply.status == 409 and "retry" in reply.error["message"]
