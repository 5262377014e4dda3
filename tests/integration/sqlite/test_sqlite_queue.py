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


def _send(queue: SqliteSqsQueue, owner: str | None, count: int, first: int = 0) -> None:
    """``count`` run messages of ``owner`` (its ``MessageGroupId``, as the tick sends them), jobs ``<owner>-<n>``."""
    RunQueue(queue, URL).send(
        [RunMessage(f"{owner}-{n}", T0, owner=owner) for n in range(first, first + count)]
    )


def _owners(messages: list[dict]) -> list[str | None]:
    return [m["Attributes"].get("MessageGroupId") for m in messages]


def test_a_message_keeps_its_group_and_a_group_sqs_would_refuse_is_refused() -> None:
    queue = _queue(FakeClock(T0))
    _send(queue, "team-a", 1)
    RunQueue(queue, URL).send([RunMessage("j_none", T0)])

    assert _owners(_receive(queue)) == ["team-a", None]
    with pytest.raises(ClientError) as refused:
        queue.send_message_batch(
            QueueUrl=URL, Entries=[{"Id": "0", "MessageBody": "{}", "MessageGroupId": "x" * 129}]
        )
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_while_one_owner_is_noisy_the_quiet_owners_messages_are_received_first() -> None:
    # Given a noisy owner with 100 messages, 40 of them received and in flight (all of those in flight: noisy),
    # and then a quiet owner's 5 messages, sent after the noisy owner's 60 others
    clock = FakeClock(T0)
    queue = _queue(clock)
    _send(queue, "noisy", 100)
    in_flight = [m for _ in range(4) for m in _receive(queue)]
    clock.advance(1)
    _send(queue, "quiet", 5)

    # When a worker receives a batch
    batch = _receive(queue)

    # Then the quiet owner's 5 come first, then the noisy owner's oldest
    assert len(in_flight) == 40
    assert _owners(batch) == ["quiet"] * 5 + ["noisy"] * 5
    assert [parse_run_message(m["Body"]).job_id for m in batch[5:]] == [f"noisy-{n}" for n in range(40, 45)]


def test_an_owner_under_30_in_flight_or_under_a_tenth_of_them_is_not_noisy() -> None:
    # Given 29 of owner a's messages in flight (under 30: not noisy), and 10 more of a before 3 of b
    clock = FakeClock(T0)
    queue = _queue(clock)
    _send(queue, "a", 29)
    assert len([m for _ in range(3) for m in _receive(queue)]) == 29
    _send(queue, "a", 10, first=29)
    clock.advance(1)
    _send(queue, "b", 3)

    # Then the queue stays in sending order: a's 10 first
    assert _owners(_receive(queue)) == ["a"] * 10
    assert _owners(_receive(queue)) == ["b"] * 3


def test_a_queue_file_written_before_groups_were_kept_opens_and_serves_its_messages(tmp_path: Path) -> None:
    # Given a queue file of the schema without the group column, holding one message
    import sqlite3

    path = tmp_path / "queue.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, queue TEXT NOT"
            " NULL, body TEXT NOT NULL, sent_at INTEGER NOT NULL, visible_at INTEGER NOT NULL, receive_count"
            " INTEGER NOT NULL, first_received_at INTEGER, receipt TEXT)"
        )
        conn.execute(
            "INSERT INTO messages (id, queue, body, sent_at, visible_at, receive_count)"
            " VALUES ('m1', 'main', '{\"job_id\": \"j_old\", \"scheduled_for\": 1}', ?, ?, 0)",
            (T0, T0),
        )

    # When the queue opens it, then is sent a message with a group
    queue = _queue(FakeClock(T0), path=path)
    _send(queue, "team-a", 1)

    # Then both are received, the old one without a group
    assert _owners(_receive(queue)) == [None, "team-a"]
