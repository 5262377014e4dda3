"""Local mode's run queue (``jobsched.sqlite.queue.SqliteSqsQueue``) keeps SQS's semantics: delays, visibility,
receipt handles, receive counts, the dead-letter queue after ``max_receive_count``, long polls; and it serves
the run queue's adapter (``RunQueue``) as an SQS client would."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from jobsched.aws.queue import RunQueue
from jobsched.aws.wire import parse_run_message
from jobsched.clock import FakeClock
from jobsched.ports.run_messages import RunMessage
from jobsched.sqlite.queue import SqliteSqsQueue, queue_arn

URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobsched-RunQueue"
T0 = 1_767_578_400_000


def _queue(clock: FakeClock, max_receive_count: int = 3, path: Path | None = None) -> SqliteSqsQueue:
    def wait(condition: threading.Condition, seconds: float) -> None:
        clock.advance(max(1, int(seconds * 1000)))  # a long poll's wait passes in simulated time

    return SqliteSqsQueue(
        URL,
        queue_arn(URL),
        visibility_timeout_s=30,
        max_receive_count=max_receive_count,
        clock=clock,
        wait=wait,
        path=path,
    )


def _receive(queue: SqliteSqsQueue, wait_s: int = 0, n: int = 10) -> list[dict]:
    return list(
        queue.receive_message(QueueUrl=URL, MaxNumberOfMessages=n, WaitTimeSeconds=wait_s).get("Messages", [])
    )


def test_the_arn_is_the_queues() -> None:
    assert queue_arn(URL) == "arn:aws:sqs:eu-west-1:123456789012:jobsched-RunQueue"


def test_a_delayed_message_is_invisible_until_its_delay_and_a_long_poll_waits_for_it() -> None:
    clock = FakeClock(T0)
    queue = _queue(clock)
    RunQueue(queue, URL).send([RunMessage("j_a", T0, delay_s=5), RunMessage("j_b", T0)])
    first = _receive(queue)
    assert [parse_run_message(m["Body"]).job_id for m in first] == ["j_b"]
    late = _receive(queue, wait_s=20)  # waits 5 s (simulated) for the delayed one, not 20
    assert [parse_run_message(m["Body"]).job_id for m in late] == ["j_a"] and clock() - T0 < 6_000
    assert _receive(queue, wait_s=2) == [] and clock() - T0 >= 7_000  # nothing more: the wait runs out


def test_a_received_message_is_hidden_for_the_visibility_timeout_then_redelivered_with_a_new_handle() -> None:
    clock = FakeClock(T0)
    queue = _queue(clock)
    RunQueue(queue, URL).send([RunMessage("j_a", T0)])
    (first,) = _receive(queue)
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    clock.advance(29_999)
    assert _receive(queue) == []
    clock.advance(1)
    (second,) = _receive(queue)
    assert (
        second["Attributes"]["ApproximateReceiveCount"] == "2"
        and second["ReceiptHandle"] != first["ReceiptHandle"]
    )
    # the old handle neither extends nor deletes it; the new one does
    with pytest.raises(ClientError) as refused:
        RunQueue(queue, URL).change_visibility(first["ReceiptHandle"], 60)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    queue.delete_message(QueueUrl=URL, ReceiptHandle=first["ReceiptHandle"])
    RunQueue(queue, URL).change_visibility(second["ReceiptHandle"], 0)  # visible again at once
    (third,) = _receive(queue)
    queue.delete_message_batch(QueueUrl=URL, Entries=[{"Id": "0", "ReceiptHandle": third["ReceiptHandle"]}])
    clock.advance(60_000)
    assert _receive(queue) == []


def test_a_message_received_max_receive_count_times_goes_to_the_dead_letter_queue() -> None:
    clock = FakeClock(T0)
    queue = _queue(clock, max_receive_count=2)
    RunQueue(queue, URL).send([RunMessage("j_a", T0)])
    for _ in range(2):
        assert len(_receive(queue)) == 1
        clock.advance(30_000)
    assert _receive(queue) == []  # the third receive moves it instead of delivering it
    assert [parse_run_message(b).job_id for b in queue.dead_lettered()] == ["j_a"]


def test_a_failed_batch_entry_is_reported_and_bad_calls_are_refused_as_sqs_refuses_them() -> None:
    clock = FakeClock(T0)
    queue = _queue(clock)
    RunQueue(queue, URL).send([RunMessage("j_a", T0)])
    (message,) = _receive(queue)
    changed = queue.change_message_visibility_batch(
        QueueUrl=URL,
        Entries=[
            {"Id": "ok", "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 10},
            {"Id": "gone", "ReceiptHandle": "nope", "VisibilityTimeout": 10},
        ],
    )
    assert [e["Id"] for e in changed["Successful"]] == ["ok"] and [e["Id"] for e in changed["Failed"]] == [
        "gone"
    ]
    for call, code in (
        (lambda: queue.receive_message(QueueUrl=URL + "-other"), "AWS.SimpleQueueService.NonExistentQueue"),
        (lambda: queue.receive_message(QueueUrl=URL, MaxNumberOfMessages=11), "InvalidParameterValue"),
        (
            lambda: queue.send_message(QueueUrl=URL, MessageBody="{}", DelaySeconds=901),
            "InvalidParameterValue",
        ),
        (
            lambda: queue.change_message_visibility(
                QueueUrl=URL, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=43_201
            ),
            "InvalidParameterValue",
        ),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == code
    attributes = queue.get_queue_attributes(QueueUrl=URL, AttributeNames=["All"])["Attributes"]
    assert (
        attributes["QueueArn"] == queue_arn(URL)
        and attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
    )


def test_messages_outlive_the_process_and_what_it_held_is_visible_again(tmp_path: Path) -> None:
    # Given a queue in a file: one message waiting, one received and not deleted, one delayed
    clock = FakeClock(T0)
    first = _queue(clock, path=tmp_path / "queue.sqlite3")
    RunQueue(first, URL).send([RunMessage("j_a", T0), RunMessage("j_b", T0)])
    (held,) = _receive(first, n=1)
    RunQueue(first, URL).send([RunMessage("j_c", T0, delay_s=60)])

    # When the process is gone and a new one opens the same file
    second = _queue(clock, path=tmp_path / "queue.sqlite3")

    # Then the waiting and the held messages are delivered at once, the delayed one after its delay
    delivered = _receive(second)
    bodies = sorted(parse_run_message(m["Body"]).job_id for m in delivered)
    assert bodies == ["j_a", "j_b"] and parse_run_message(held["Body"]).job_id in bodies
    for message in delivered:
        second.delete_message(QueueUrl=URL, ReceiptHandle=message["ReceiptHandle"])
    clock.advance(60_000)
    assert [parse_run_message(m["Body"]).job_id for m in _receive(second)] == ["j_c"]
