"""Dead runs: the dead-run queue (SQS) and the owner alert (SNS).

When a run is out of attempts (design §5.3) its envelope, with the job's owner, name and last error, goes
to the dead-run queue (``Settings.dead_run_queue_url``), and an alert is published on the alerts topic
(``Settings.alerts_topic_arn``) with String message attributes ``owner`` and ``job_id``, so each team
subscribes with a filter policy such as ``{"owner": ["team-a"]}``. The alert's subject is short; its body
is written for a person (job name and id, schedule, scheduled_for, attempts, last error).
"""

from __future__ import annotations

import json
from typing import Any

from jobsched.aws.wire import dead_run_envelope
from jobsched.clock import iso_utc
from jobsched.ports.alerts import Alert
from jobsched.ports.run_messages import DeadRun

SUBJECT_LIMIT = 100  # SNS subject limit (characters)
UNKNOWN_OWNER = "unknown"


def alert_subject(dead: DeadRun) -> str:
    """One line, at most 100 characters: ``jobsched: <job> dead after N attempts``."""
    subject = f"jobsched: {dead.job_name or dead.job_id} dead after {dead.attempts} attempt(s)"
    subject = "".join(c if c.isprintable() and c.isascii() else "?" for c in subject)
    return subject if len(subject) <= SUBJECT_LIMIT else subject[: SUBJECT_LIMIT - 3] + "..."


def alert_body(dead: DeadRun) -> str:
    """The alert text a person reads (plain text, one fact per line, the last error at the end)."""
    name = dead.job_name or "(deleted job)"
    schedule = dead.schedule or "-"
    if dead.schedule and dead.timezone:
        schedule = f"{dead.schedule} ({dead.timezone})"
    lines = [
        f'The run of job "{name}" scheduled for {iso_utc(dead.scheduled_for_ms)} failed '
        f"{dead.attempts} time(s) and will not be retried.",
        "",
        f"job:           {name} ({dead.job_id})",
        f"owner:         {dead.owner or UNKNOWN_OWNER}",
        f"schedule:      {schedule}",
        f"target:        {dead.target_type or '-'}",
        f"scheduled_for: {iso_utc(dead.scheduled_for_ms)}",
        f"attempts:      {dead.attempts}",
        f"run id:        {dead.run_id}",
        f"dead at:       {iso_utc(dead.dead_at_ms)}",
        "",
        "last error:",
        dead.error,
        "",
        "The run's envelope is on the dead-run queue. To run it again, trigger the job "
        "(POST /jobs/{id}/trigger) once the cause is fixed.",
    ]
    return "\n".join(lines)


class DeadRunNotifier:
    """SQS + SNS adapter: ``notify`` sends the dead-run message, then publishes the alert (2 requests).

    ``sqs`` and ``sns`` are boto3 clients. Errors propagate (botocore ClientError): the caller leaves the run
    marked ``notify_pending`` and the sweeper sends again, so delivery is at least once.
    """

    def __init__(self, sqs: Any, sns: Any, *, dead_run_queue_url: str, topic_arn: str) -> None:
        self.sqs = sqs
        self.sns = sns
        self.dead_run_queue_url = dead_run_queue_url
        self.topic_arn = topic_arn

    def notify(self, dead: DeadRun) -> None:
        """The dead-run message, then the alert unless the job's policy turned it off (``dead.alert``)."""
        self.send_dead_letter(dead)
        if dead.alert:
            self.publish_alert(dead)

    def send_dead_letter(self, dead: DeadRun) -> None:
        """The envelope (``jobsched.aws.wire.dead_run_envelope``) as JSON to the dead-run queue, with the
        same attributes."""
        self.sqs.send_message(
            QueueUrl=self.dead_run_queue_url,
            MessageBody=json.dumps(dead_run_envelope(dead), separators=(",", ":"), default=str),
            MessageAttributes=_attributes(dead.owner or UNKNOWN_OWNER, dead.job_id),
        )

    def publish_alert(self, dead: DeadRun) -> None:
        """The alert on the topic, with ``owner``, ``job_id`` and ``kind`` (``dead``) message attributes."""
        self.sns.publish(
            TopicArn=self.topic_arn,
            Subject=alert_subject(dead),
            Message=alert_body(dead),
            MessageAttributes=_attributes(dead.owner or UNKNOWN_OWNER, dead.job_id, "dead"),
        )


class AlertPublisher:
    """SNS adapter of ``domain.alerting.AlertSink``: an alert policy's alert on the alerts topic, with ``owner``,
    ``job_id`` and ``kind`` message attributes (``late``, ``skipped``, ``failures``, ``auto_paused``). 1 request;
    errors propagate (botocore ClientError)."""

    def __init__(self, sns: Any, *, topic_arn: str) -> None:
        self.sns = sns
        self.topic_arn = topic_arn

    def publish(self, alert: Alert) -> None:
        self.sns.publish(
            TopicArn=self.topic_arn,
            Subject=alert.subject,
            Message=alert.body,
            MessageAttributes=_attributes(alert.owner, alert.job_id, alert.kind),
        )


def _attributes(owner: str, job_id: str, kind: str | None = None) -> dict[str, dict[str, str]]:
    attributes = {
        "owner": {"DataType": "String", "StringValue": owner},
        "job_id": {"DataType": "String", "StringValue": job_id},
    }
    if kind is not None:
        attributes["kind"] = {"DataType": "String", "StringValue": kind}
    return attributes
