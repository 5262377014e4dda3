"""Who did what (design §3.2): the audit events of a job's changes and acts, and the pause's who/when/why.

``AuditTrail`` builds the events the use cases write (a change's event goes into the change's own write, an
act that changes no job records its event after it) and reads a job's trail for ``GET /jobs/{id}/events``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobsched.api.cursor import encode_cursor, history_before
from jobsched.api.exceptions import JobNotFound
from jobsched.api.schemas import JobEvent, Page
from jobsched.clock import from_ms
from jobsched.models import JobEventKind
from jobsched.observability import logger
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.jobs import AuditEvent, JobRepository, change_key


@dataclass(eq=False)
class AuditTrail:
    """A job's audit events on ``jobs`` (the job store), each kept ``retention_days`` (as long as run history)."""

    jobs: JobRepository
    retention_days: int

    def event(
        self,
        job_id: str,
        at_ms: int,
        key: str,
        kind: JobEventKind,
        actor: str,
        detail: dict[str, Any] | None = None,
    ) -> AuditEvent:
        """An event at ``at_ms`` (epoch ms) expiring ``retention_days`` later; ``key`` as ``AuditEvent.key``."""
        expires_at = at_ms // 1000 + self.retention_days * 86400
        return AuditEvent(job_id, at_ms, key, kind, actor, detail or {}, expires_at)

    def change(
        self,
        job_id: str,
        at_ms: int,
        version: int,
        kind: JobEventKind,
        actor: str,
        detail: dict[str, Any] | None = None,
    ) -> AuditEvent:
        """The event of a job change, keyed by the job's ``version`` after it (so one millisecond's changes
        sort in order), to be written in the change's own write."""
        return self.event(job_id, at_ms, change_key(version), kind, actor, detail)

    def record(self, event: AuditEvent) -> None:
        """Write the event of an act that changes no job, after the act (its own record, e.g. the run, stands
        on its own): a store failure is logged, never raised, so the act still answers its caller."""
        try:
            self.jobs.record_event(event)
        except StoreUnavailable as error:
            logger.error(
                "audit event not recorded", job_id=event.job_id, kind=event.kind.value, error=str(error)
            )

    def listing(self, owner: str, job_id: str, *, limit: int, cursor: str | None) -> Page[JobEvent]:
        """A page of the job's events, newest first (a deleted job's too, until retention). Raises
        ``JobNotFound`` (absent, or not the owner's), ``InvalidInput``/``CursorNotFound`` (a cursor that is
        malformed or not of this job's event listing)."""
        if self.jobs.history_owner(job_id) != owner:
            raise JobNotFound(job_id)
        before = history_before(cursor, "events", owner, job_id, str)
        events, last = self.jobs.list_events(job_id, limit, before)
        items = [JobEvent(at=from_ms(e.at), kind=e.kind, actor=e.actor, detail=e.detail) for e in events]
        next_cursor = encode_cursor("events", owner, {"job": job_id, "before": last}) if last else None
        return Page[JobEvent](items=items, next_cursor=next_cursor)
