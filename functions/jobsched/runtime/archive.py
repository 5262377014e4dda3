"""One invocation of the archive Lambda (design §11): fed by the runs table's stream through a filter that lets
only TTL deletions of runs through (``jobsched.dynamodb.stream.TTL_DELETION_FILTER``), and by the jobs table's
through one that lets only TTL deletions of audit events through (``AUDIT_TTL_DELETION_FILTER``), it writes the
batch's runs and audit events to the archive bucket (``jobsched.domain.archive.archive_batch``), or keeps them in the spill queue when the bucket
refuses them. An operator's ``{"action": "redrive"}`` event writes the spilled objects to the bucket."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from jobsched.aws.archive import (
    ARCHIVE_BUCKET_ENV,
    ARCHIVE_SPILL_ENV,
    S3ArchiveObjects,
    SqsArchiveSpill,
    redrive,
)
from jobsched.aws.clients import DEFAULT_CALLS, new_session
from jobsched.domain.archive import archive_batch
from jobsched.dynamodb.stream import expired_runs
from jobsched.observability import COUNT, MetricName, add_metric, logger

REDRIVE_ACTION = "redrive"


class ArchiveConfigError(RuntimeError):
    """The archive function's environment lacks a variable it needs; the message names it."""


@dataclass(frozen=True)
class ArchiveRuntime:
    """The archive function's components: the bucket (``store``), the spill queue (``spill``)."""

    store: S3ArchiveObjects
    spill: SqsArchiveSpill

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> ArchiveRuntime:
        """From ``ARCHIVE_BUCKET`` and ``ARCHIVE_SPILL_URL`` (of ``environ``, default the process's), with clients
        bounded by ``DEFAULT_CALLS``. Raises ``ArchiveConfigError`` naming a missing variable."""
        env = os.environ if environ is None else environ
        missing = [name for name in (ARCHIVE_BUCKET_ENV, ARCHIVE_SPILL_ENV) if not env.get(name)]
        if missing:
            raise ArchiveConfigError(f"environment variable {missing[0]} is not set")
        session = new_session()
        config = DEFAULT_CALLS.config()
        return cls(
            S3ArchiveObjects(session.client("s3", config=config), env[ARCHIVE_BUCKET_ENV]),
            SqsArchiveSpill(session.client("sqs", config=config), env[ARCHIVE_SPILL_ENV]),
        )

    def serve(self, event: dict[str, Any]) -> dict[str, Any]:
        """One invocation. A stream batch (``Records``): its TTL-deleted runs and audit events archived; returns the
        ``ArchiveReport`` as a dict (``ArchiveRows``, ``ArchiveSpilled``, ``ArchiveQuarantined`` metrics). ``{"action": "redrive"}``: one
        pass of ``aws.archive.redrive``. Raises ``ValueError`` for any other event; any error of the batch
        propagates (Lambda retries the batch, then sends it to the mapping's on-failure destination)."""
        if "Records" in event:
            found = expired_runs(event["Records"])
            report = archive_batch(
                found.rows,
                self.store,
                self.spill,
                events=found.events,
                ignored=found.ignored,
                malformed=found.malformed,
            )
            add_metric(MetricName.ARCHIVE_ROWS, COUNT, report.rows)
            if report.quarantined:
                add_metric(MetricName.ARCHIVE_QUARANTINED, COUNT, report.quarantined)
                logger.error(
                    "expired images that are no run row or audit event: kept under quarantine/",
                    extra=report.as_dict(),
                )
            if report.spilled:
                add_metric(MetricName.ARCHIVE_SPILLED, COUNT, report.spilled)
                logger.warning("archive bucket refused a batch: spilled", extra=report.as_dict())
            return report.as_dict()
        if event.get("action") == REDRIVE_ACTION:
            spill = self.spill
            return redrive(spill.client, spill.queue_url, self.store)
        raise ValueError("event is neither a stream batch (Records) nor {'action': 'redrive'}")
