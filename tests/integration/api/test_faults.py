"""Failure paths of the AWS adapters forced on purpose, end to end through the handler on moto: throttling, a
failing idempotency store, a failing queue. (Lost races and the other failure paths of the use cases run on
the fakes: ``tests/unit/api/test_faults.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from jobsched.aws.queue import RunQueue
from jobsched.ports.run_messages import QueueSendError, RunMessage


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


# --- lost races -----------------------------------------------------------------------------------
