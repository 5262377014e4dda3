"""Run messages carry their owner as ``MessageGroupId`` on the standard run queue (SQS fair queues, design §4.10):
moto accepts it there and delivers it back; an owner SQS would refuse as a group id is sent as a stable hash."""

from __future__ import annotations

import pytest

from jobsched.aws.clients import Aws
from jobsched.aws.queue import MESSAGE_GROUP_MAX, RunQueue, message_group_id
from jobsched.ports.run_messages import RunMessage

T0 = 1_772_445_600_000


@pytest.mark.parametrize(
    "owner",
    [
        "team-a",
        "arn:aws:iam::123456789012:role/billing",
        "x" * MESSAGE_GROUP_MAX,
        "x" * 200,
        "team a",
        "équipe",
    ],
)
def test_every_owner_becomes_a_group_id_sqs_takes_the_same_each_time(aws: Aws, owner: str) -> None:
    url = aws.sqs.create_queue(QueueName="runs")["QueueUrl"]

    RunQueue(aws.sqs, url).send([RunMessage("j_1", T0, owner=owner), RunMessage("j_2", T0)])
    received = aws.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )["Messages"]

    group = message_group_id(owner)
    assert group == message_group_id(owner) and 1 <= len(group) <= MESSAGE_GROUP_MAX
    assert all(33 <= ord(c) <= 126 for c in group)
    assert group == owner or not (len(owner) <= MESSAGE_GROUP_MAX and owner.isascii() and " " not in owner)
    groups = sorted((m["Attributes"].get("MessageGroupId") or "") for m in received)
    assert groups == sorted([group, ""])
