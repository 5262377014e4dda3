"""The alerts port: a message for a job's owner on the alerts topic (design §5.6), and what publishes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Alert:
    """One message for a job's owner: ``kind`` (``late``, ``skipped``, ``failures``, ``auto_paused``), a one-line
    ``subject`` (at most 100 characters) and a ``body`` written for a person."""

    kind: str
    job_id: str
    owner: str
    subject: str
    body: str


class AlertSink(Protocol):
    """Publishes alerts (``jobsched.aws.alerts.AlertPublisher`` on SNS). Raises on failure."""

    def publish(self, alert: Alert) -> None: ...
