"""What local mode prints: one line per run outcome (from the SQLite run store's writes, or the moto backend's
write journal) and one per alert.

Run line: ``run  <job name>  <scheduled_for>  <status>  try <attempt>  late <lateness>  [error]``, printed
when a run reaches ``succeeded``, ``retrying``, ``dead`` or ``skipped``. Alert line: ``ALERT`` and what the
alerts topic carried (subject, job, run, error), read from an SQS queue subscribed to the topic, the
way a team would subscribe with a filter policy.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from jobsched.local.state import Change, TableMirror
from jobsched.observability import logger
from jobsched.ports.runs import RunRow

Emit = Callable[[str], None]
OUTCOMES = ("succeeded", "retrying", "dead", "skipped")
_deserializer = TypeDeserializer()


def _plain(image: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in image.items()}


def _iso(ms: Any) -> str:
    """Epoch ms -> ISO 8601 UTC, with milliseconds only when there are some."""
    try:
        value = int(ms)
        text = datetime.fromtimestamp(value / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (TypeError, ValueError, OverflowError):
        return str(ms)
    return text + (f".{value % 1000:03d}Z" if value % 1000 else "Z")


def format_run(run: dict[str, Any], job_name: str) -> str:
    """One line for a run row (plain values): job, scheduled_for (UTC), status, attempt, lateness, error."""
    parts = [f"run  {job_name:<28}", _iso(run.get("scheduled_for")), f"{run.get('status', '?'):<9}"]
    parts.append(f"try {int(run.get('attempt') or 0)}")
    lateness = run.get("lateness_ms")
    parts.append(f"late {int(lateness) / 1000:.2f}s" if lateness is not None else "late -")
    if run.get("skipped_count"):
        parts.append(f"({int(run['skipped_count'])} fires)")
    if run.get("kind") == "manual":
        parts.append("(manual)")
    if run.get("error") and run.get("status") != "succeeded":
        parts.append(f"error: {' '.join(str(run['error']).split())[:160]}")
    return "  ".join(parts)


class RunPrinter:
    """A ``TableMirror`` listener printing each run outcome; job names come from the mirror's jobs table."""

    def __init__(self, mirror: TableMirror, emit: Emit) -> None:
        self.mirror = mirror
        self.emit = emit

    def job_name(self, job_id: str) -> str:
        key = json.dumps([{"S": f"job#{job_id}"}, {"S": "spec"}], sort_keys=True, separators=(",", ":"))
        item = self.mirror.items.get("Jobs", {}).get(key)
        return str(item["name"]["S"]) if item and "name" in item else job_id

    def __call__(self, changes: list[Change]) -> None:
        for change in changes:
            if change.table_id != "Runs" or change.new is None:
                continue
            new = _plain(change.new)
            if is_new_outcome(_plain(change.old) if change.old else {}, new):
                self.emit(format_run(new, self.job_name(str(new.get("job_id")))))


def is_new_outcome(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a run row's write from ``old`` to ``new`` (plain values; ``{}``: a new row) is an outcome to
    print: it reached one of ``OUTCOMES``, or a further try of ``retrying``."""
    status = new.get("status")
    return status in OUTCOMES and (
        status != old.get("status") or (status == "retrying" and new.get("attempt") != old.get("attempt"))
    )


def _row_fields(row: RunRow) -> dict[str, Any]:
    return {**asdict(row), "status": row.status.value, "kind": row.kind.value}


class RowPrinter:
    """A ``jobsched.sqlite.database.SqliteDatabase`` run listener printing each run outcome (the SQLite
    backend's counterpart of :class:`RunPrinter`); ``job_name(job_id)`` names the job (the id when gone)."""

    def __init__(self, job_name: Callable[[str], str], emit: Emit) -> None:
        self.job_name = job_name
        self.emit = emit

    def __call__(self, before: RunRow | None, after: RunRow) -> None:
        new = _row_fields(after)
        if is_new_outcome(_row_fields(before) if before else {}, new):
            self.emit(format_run(new, self.job_name(after.job_id)))


_TEXT_KEYS = {"owner": "owner", "run id": "run_id", "attempts": "attempt"}


def _text_facts(message: str) -> dict[str, str]:
    """Facts of the worker's plain-text alert (``owner:``, ``run id:``, ``attempts:`` lines) and ``error``,
    the line after ``last error:``."""
    facts: dict[str, str] = {}
    lines = [line.strip() for line in message.splitlines()]
    for index, line in enumerate(lines):
        key, sep, value = (part.strip() for part in line.partition(":"))
        if key == "last error" and sep:
            facts["error"] = next((rest for rest in lines[index + 1 :] if rest), "")
        elif sep and key in _TEXT_KEYS and value:
            facts[_TEXT_KEYS[key]] = value
    return facts


def format_alert(body: str) -> str:
    """One line for an SNS notification as delivered to SQS (not raw): the subject, then owner, job, run
    and last error from the message attributes and the message (JSON or the worker's plain text)."""
    try:
        envelope = json.loads(body)
    except ValueError:
        return f"ALERT  {' '.join(body.split())[:300]}"
    subject = envelope.get("Subject") or "alert"
    message = str(envelope.get("Message", ""))
    facts = {
        k: str(v.get("Value"))
        for k, v in (envelope.get("MessageAttributes") or {}).items()
        if isinstance(v, dict)
    }
    try:
        detail = json.loads(message)
    except ValueError:
        detail = None
    if isinstance(detail, dict):
        facts.update({k: str(v) for k, v in detail.items() if v is not None})
    else:
        facts.update(_text_facts(message))
    keys = ("owner", "job_name", "job_id", "run_id", "status", "attempt", "error")
    fields = [f"{k}={' '.join(facts[k].split())[:160]}" for k in keys if facts.get(k)]
    if not fields:
        fields = [" ".join(message.split())[:300]]
    return f"ALERT  {subject}  " + "  ".join(fields)


class AlertPrinter:
    """Subscribes an SQS queue to the alerts topic and prints what arrives."""

    def __init__(self, sqs: Any, sns: Any, topic_arn: str, queue_name: str, emit: Emit) -> None:
        self.sqs = sqs
        self.emit = emit
        self.queue_url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)

    def poll_once(self, wait_s: int = 1) -> int:
        """Print the alerts waiting (long poll up to ``wait_s``); returns how many."""
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_s
        ).get("Messages", [])
        for message in messages:
            self.emit(format_alert(message["Body"]))
        if messages:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
            )
        return len(messages)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception:
                logger.exception("alert printer failed; retrying")
                stop.wait(1.0)
