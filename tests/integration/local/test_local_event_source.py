"""The local SQS event source (Lambda's SQS trigger with batch item failures) and the printers, on moto."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from moto import mock_aws

from jobsched.aws.clients import Aws, provision
from jobsched.local.embedded_aws import serialize_dynamodb
from jobsched.local.event_source import LocalLambdaContext, SqsEventSource
from jobsched.local.printer import AlertPrinter, RunPrinter, format_alert, format_run
from jobsched.local.state import TableMirror, WriteJournal
from jobsched.resources import TABLES


@pytest.fixture
def queue(aws: Aws) -> str:
    return str(aws.sqs.create_queue(QueueName="runs", Attributes={"VisibilityTimeout": "600"})["QueueUrl"])


def send(aws: Aws, url: str, *bodies: str) -> None:
    for body in bodies:
        aws.sqs.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={"kind": {"DataType": "String", "StringValue": "run"}},
        )


def depth(aws: Aws, url: str) -> tuple[int, int]:
    """(visible, in flight) messages."""
    attributes = aws.sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


class Recorder:
    """A handler that records its events and fails the records whose body is in ``fail``; with ``sqs`` and
    ``url``, it first sets each failed record's visibility to ``back_off_s``, as the worker's give-back does."""

    def __init__(
        self,
        fail: set[str] | None = None,
        reply: Any = None,
        error: Exception | None = None,
        *,
        sqs: Any = None,
        url: str = "",
        back_off_s: int = 0,
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self.contexts: list[Any] = []
        self.fail = fail or set()
        self.reply = reply
        self.error = error
        self.sqs, self.url, self.back_off_s = sqs, url, back_off_s

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.events.append(event)
        self.contexts.append(context)
        if self.error:
            raise self.error
        if self.reply is not None:
            return self.reply
        if self.sqs is not None:
            for r in event["Records"]:
                if r["body"] in self.fail:
                    self.sqs.change_message_visibility(
                        QueueUrl=self.url, ReceiptHandle=r["receiptHandle"], VisibilityTimeout=self.back_off_s
                    )
        return {
            "batchItemFailures": [
                {"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] in self.fail
            ]
        }


def source(aws: Aws, url: str, handler: Any) -> SqsEventSource:
    return SqsEventSource(aws.sqs, url, handler, function_name="worker", wait_s=0, failure_visibility_s=0)


def test_records_look_like_lambda_sqs_events(aws: Aws, queue: str) -> None:
    send(aws, queue, '{"job_id": "j_1", "scheduled_for": 1}')
    handler = Recorder()

    assert source(aws, queue, handler).poll_once() == (1, 0)

    (record,) = handler.events[0]["Records"]
    assert record["body"] == '{"job_id": "j_1", "scheduled_for": 1}'
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith(":runs")
    assert record["awsRegion"] == "us-east-1"
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert record["messageAttributes"]["kind"]["stringValue"] == "run"
    assert record["messageAttributes"]["kind"]["dataType"] == "String"
    assert {"messageId", "receiptHandle", "md5OfBody"} <= set(record)
    context = handler.contexts[0]
    assert context.function_name == "worker" and context.get_remaining_time_in_millis() > 0
    assert depth(aws, queue) == (0, 0)  # a success is deleted


def test_batch_item_failures_stay_on_the_queue_the_rest_are_deleted(aws: Aws, queue: str) -> None:
    send(aws, queue, "ok-1", "bad", "ok-2")
    events = source(aws, queue, Recorder(fail={"bad"}, sqs=aws.sqs, url=queue, back_off_s=0))

    received, failed = 0, 0
    while received < 3:
        got, lost = events.poll_once()
        received, failed = received + got, failed + lost

    assert failed == 1
    # the failure becomes visible again when its handler said (at once here) and is delivered a second time
    again = Recorder()
    assert source(aws, queue, again).poll_once() == (1, 0)
    (record,) = again.events[0]["Records"]
    assert record["body"] == "bad" and record["attributes"]["ApproximateReceiveCount"] == "2"


def test_a_reported_failure_keeps_the_visibility_its_handler_set(aws: Aws, queue: str) -> None:
    # Given a handler that hands a record back for 300 s (the worker's give-back back-off) and reports it failed
    send(aws, queue, "given-back")
    handler = Recorder(fail={"given-back"}, sqs=aws.sqs, url=queue, back_off_s=300)

    # When the event source (failed batches visible again at once: failure_visibility_s=0) handles it
    assert source(aws, queue, handler).poll_once() == (1, 1)

    # Then the record stays hidden for its back-off: it is neither visible nor received again
    assert depth(aws, queue) == (0, 1)
    assert source(aws, queue, Recorder()).poll_once() == (0, 0)


@pytest.mark.parametrize(
    "handler",
    [
        Recorder(error=RuntimeError("boom")),  # the function raised: the whole batch again
        Recorder(
            reply={"batchItemFailures": [{"itemIdentifier": "not-a-message-id"}]}
        ),  # Lambda: whole batch
        Recorder(reply={"batchItemFailures": [{"itemIdentifier": ""}]}),
    ],
)
def test_a_raising_handler_or_unknown_ids_fail_the_whole_batch(
    aws: Aws, queue: str, handler: Recorder
) -> None:
    send(aws, queue, "a", "b")
    events = source(aws, queue, handler)
    total = 0
    while total < 2:
        got, failed = events.poll_once()
        assert failed == got
        total += got
    assert depth(aws, queue)[0] + depth(aws, queue)[1] == 2


def test_run_loop_stops_when_told(aws: Aws, queue: str) -> None:
    stop = threading.Event()
    handler = Recorder()
    events = source(aws, queue, lambda event, context: (stop.set(), handler(event, context))[1])
    send(aws, queue, "only")
    thread = threading.Thread(target=events.run, args=(stop,))
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert [r["body"] for e in handler.events for r in e["Records"]] == ["only"]


def test_context_counts_down() -> None:
    context = LocalLambdaContext("f", timeout_s=0)
    assert context.get_remaining_time_in_millis() == 0
    assert context.invoked_function_arn.endswith(":function:f")


def test_run_lines_name_the_job_and_each_outcome_once(aws_credentials: None) -> None:
    wrapper = serialize_dynamodb()
    assert wrapper is not None
    with mock_aws():
        try:
            lines = print_run_story(wrapper, Aws())
        finally:
            wrapper.observer = None
    assert lines == [
        "run  nightly                       2027-01-15T08:00:00Z  retrying   try 1  late -  error: exit status 1",
        "run  nightly                       2027-01-15T08:00:00Z  succeeded  try 2  late 0.25s",
        "run  j_gone                        1970-01-01T00:00:00.005Z  skipped    try 0  late -  (3 fires)",
    ]


def print_run_story(wrapper: Any, aws: Aws) -> list[str]:
    """A run's life written to the runs table, with the printer listening; returns the printed lines."""
    env = provision(aws, prefix="print")
    tables = {t.id: env[t.env_var] for t in TABLES}
    journal = WriteJournal(Aws().dynamodb, tables)
    wrapper.observer = journal.record
    mirror = TableMirror(journal, aws.dynamodb, tables)
    lines: list[str] = []
    mirror.listeners.append(RunPrinter(mirror, lines.append))
    jobs, runs = aws.table(tables["Jobs"]), aws.table(tables["Runs"])
    jobs.put_item(Item={"pk": "job#j_1", "sk": "spec", "job_id": "j_1", "name": "nightly", "doc": "{}"})
    key = {"job_id": "j_1", "scheduled_for": 1_800_000_000_000}

    runs.put_item(Item={**key, "status": "queued", "attempt": 0})
    runs.update_item(Key=key, UpdateExpression="SET #s = :s, attempt = :a", ExpressionAttributeNames={"#s": "status"},
                     ExpressionAttributeValues={":s": "running", ":a": 1})  # fmt: skip
    runs.update_item(Key=key, UpdateExpression="SET #s = :s, #e = :e", ExpressionAttributeNames={"#s": "status", "#e": "error"},
                     ExpressionAttributeValues={":s": "retrying", ":e": "exit status 1"})  # fmt: skip
    runs.update_item(Key=key, UpdateExpression="SET #s = :s, attempt = :a, lateness_ms = :l",
                     ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues={":s": "succeeded", ":a": 2, ":l": 250})  # fmt: skip
    runs.update_item(Key=key, UpdateExpression="SET heartbeat_at = :h", ExpressionAttributeValues={":h": 5})
    runs.put_item(Item={"job_id": "j_gone", "scheduled_for": 5, "status": "skipped", "skipped_count": 3})
    mirror.poll()
    return lines


def test_format_run_marks_manual_runs() -> None:
    line = format_run(
        {"scheduled_for": 0, "status": "dead", "attempt": 4, "kind": "manual", "error": "a\nb"}, "x"
    )
    assert line.endswith("try 4  late -  (manual)  error: a b")


def test_alerts_from_the_topic_are_printed(aws: Aws) -> None:
    topic = aws.sns.create_topic(Name="alerts")["TopicArn"]
    lines: list[str] = []
    printer = AlertPrinter(aws.sqs, aws.sns, topic, "alerts-local", lines.append)
    aws.sns.publish(
        TopicArn=topic,
        Subject="jobsched: nightly dead",
        Message=json.dumps({"job_id": "j_1", "run_id": "j_1@5", "owner": "billing", "error": "boom"}),
    )
    aws.sns.publish(TopicArn=topic, Message="plain text alert")
    aws.sns.publish(
        TopicArn=topic,
        Subject="jobsched: report dead after 2 attempt(s)",
        Message="The run failed.\n\nowner:         billing\nrun id:        j_2@9\nattempts:      2\n\nlast error:\nexit 1\n",
        MessageAttributes={"job_id": {"DataType": "String", "StringValue": "j_2"}},
    )

    printed = 0
    for _ in range(5):
        printed += printer.poll_once(wait_s=0)
        if printed == 3:
            break

    assert sorted(lines) == [
        "ALERT  alert  plain text alert",
        "ALERT  jobsched: nightly dead  owner=billing  job_id=j_1  run_id=j_1@5  error=boom",
        "ALERT  jobsched: report dead after 2 attempt(s)  owner=billing  job_id=j_2  run_id=j_2@9  attempt=2  error=exit 1",
    ]
    assert format_alert("not json") == "ALERT  not json"
