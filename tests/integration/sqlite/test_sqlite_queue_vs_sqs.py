"""Local mode's run queue (``SqliteSqsQueue``) against moto's SQS on the same sequences of operations: sends with
delays, receives with visibility timeouts, visibility changes and deletes by the latest receipt handle, the
redrive to the dead-letter queue after ``maxReceiveCount`` receives, and time passing. Both run on one injected
clock (moto's SQS reads the time through ``moto.sqs.models.unix_time*``; SQS's time never steps back when the
host's clock does), and after each step both must hold the same messages, hand out the same ones with the same
receive counts, and count them alike.

Left out where moto is not SQS: a delete or visibility change by an older receipt handle (moto honours any
handle the message ever had; SQS deletes only by the latest, which ``test_sqlite_queue`` checks), and a
visibility change of a message no longer in flight (moto accepts it), and one to 0 s (moto shows the message
only a millisecond later)."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import boto3
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from moto import mock_aws

from jobsched.clock import FakeClock
from jobsched.sqlite.queue import SqliteSqsQueue, queue_arn
from tests.support.aws import FAKE_CREDENTIALS

T0 = 1_767_578_400_000
VISIBILITY_S = 30
MAX_RECEIVES = 3
MAX_MESSAGES = 8
"""Fewer than a receive's 10: every receive hands out every visible message, so which ones is not a choice."""


class QueueVersusSqs(RuleBasedStateMachine):
    """One queue and its dead-letter queue on moto and on SQLite, driven alike."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(T0)
        self.latest = T0
        self._patches: list[Any] = [
            mock.patch.dict("os.environ", FAKE_CREDENTIALS),
            mock.patch("moto.sqs.models.unix_time_millis", lambda *_: float(self.sqs_time())),
            mock.patch("moto.sqs.models.unix_time", lambda *_: self.sqs_time() / 1000),
        ]
        for patch in self._patches:
            patch.start()
        self._aws = mock_aws()
        self._aws.start()
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        dlq = self.sqs.create_queue(QueueName="runs-dlq")["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.moto = {
            "main": self.sqs.create_queue(
                QueueName="runs",
                Attributes={
                    "VisibilityTimeout": str(VISIBILITY_S),
                    "RedrivePolicy": json.dumps(
                        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVES)}
                    ),
                },
            )["QueueUrl"],
            "dead": dlq,
        }
        self.sqlite = SqliteSqsQueue(
            self.moto["main"],
            queue_arn(self.moto["main"]),
            visibility_timeout_s=VISIBILITY_S,
            max_receive_count=MAX_RECEIVES,
            clock=self.clock,
            dead_letter_url=dlq,
        )
        self.sent = 0
        self.handles: dict[str, tuple[str, str, str]] = {}  # body -> (queue, moto's latest handle, SQLite's)
        self.hidden_until: dict[str, int] = {}  # body -> end of its visibility timeout (in flight until)
        self.gone: set[str] = set()

    def sqs_time(self) -> int:
        """SQS's own time: the host's clock as it went, but never back (SQS does not see a host's clock step
        back)."""
        self.latest = max(self.latest, self.clock())
        return self.latest

    def teardown(self) -> None:
        self._aws.stop()
        for patch in reversed(self._patches):
            patch.stop()

    def _receive_both(self, queue: str, visibility_s: int | None) -> None:
        extra: dict[str, Any] = {} if visibility_s is None else {"VisibilityTimeout": visibility_s}
        url = self.moto[queue]
        from_moto = self.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], **extra
        ).get("Messages", [])
        from_sqlite = self.sqlite.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **extra).get(
            "Messages", []
        )

        def seen(messages: list[dict[str, Any]]) -> dict[str, str]:
            return {m["Body"]: m["Attributes"]["ApproximateReceiveCount"] for m in messages}

        assert seen(from_sqlite) == seen(from_moto), f"receive from {queue} at +{self.clock() - T0} ms"
        by_body = {m["Body"]: m["ReceiptHandle"] for m in from_moto}
        hidden = (VISIBILITY_S if visibility_s is None else visibility_s) * 1000
        for message in from_sqlite:
            self.handles[message["Body"]] = (queue, by_body[message["Body"]], message["ReceiptHandle"])
            self.hidden_until[message["Body"]] = self.sqs_time() + hidden

    @precondition(lambda self: self.sent < MAX_MESSAGES)
    @rule(delay_s=st.sampled_from([0, 0, 1, 5, 40]))
    def send(self, delay_s: int) -> None:
        body = json.dumps({"n": self.sent, "text": "nächtlich ✓"})
        self.sent += 1
        self.sqs.send_message(QueueUrl=self.moto["main"], MessageBody=body, DelaySeconds=delay_s)
        self.sqlite.send_message(QueueUrl=self.moto["main"], MessageBody=body, DelaySeconds=delay_s)

    @rule(visibility_s=st.sampled_from([None, None, 5, 60]))
    def receive(self, visibility_s: int | None) -> None:
        self._receive_both("main", visibility_s)

    @rule()
    def receive_dead_letters(self) -> None:
        self._receive_both("dead", None)

    @rule(ms=st.sampled_from([1_001, 4_001, 29_001, 30_001, 61_001]))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)
        self.sqs_time()

    @rule()
    def clock_steps_back(self) -> None:
        """The host's clock going back a little (corrected by NTP): SQS's time does not."""
        self.clock.advance(-250)  # with the 1 ms of each step forward, no instant lands on a visibility edge

    def _in_flight(self) -> list[str]:
        now = self.sqs_time()
        return sorted(b for b, until in self.hidden_until.items() if until > now and b not in self.gone)

    @precondition(lambda self: bool(self._in_flight()))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        body = data.draw(st.sampled_from(self._in_flight()))
        queue, on_moto, on_sqlite = self.handles[body]
        self.sqs.delete_message(QueueUrl=self.moto[queue], ReceiptHandle=on_moto)
        self.sqlite.delete_message(QueueUrl=self.moto[queue], ReceiptHandle=on_sqlite)
        self.gone.add(body)

    @precondition(lambda self: bool(self._in_flight()))
    @rule(data=st.data(), seconds=st.sampled_from([10, 100]))
    def change_visibility(self, data: st.DataObject, seconds: int) -> None:
        body = data.draw(st.sampled_from(self._in_flight()))
        queue, on_moto, on_sqlite = self.handles[body]
        self.sqs.change_message_visibility(
            QueueUrl=self.moto[queue], ReceiptHandle=on_moto, VisibilityTimeout=seconds
        )
        self.sqlite.change_message_visibility(
            QueueUrl=self.moto[queue], ReceiptHandle=on_sqlite, VisibilityTimeout=seconds
        )
        self.hidden_until[body] = self.sqs_time() + seconds * 1000

    @invariant()
    def counted_alike(self) -> None:
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        url = self.moto["main"]
        on_moto = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        on_sqlite = self.sqlite.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        assert {n: on_sqlite[n] for n in names} == {n: on_moto[n] for n in names}


QueueVersusSqs.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_the_sqlite_queue_answers_as_sqs_does = QueueVersusSqs.TestCase
