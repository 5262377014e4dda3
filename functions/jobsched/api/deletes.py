"""``DELETE /jobs/{id}`` (``Deletes``): the job leaves the due index, its name is free again, a tombstone keeps its
run history and events readable by its owner until retention, and its owner's quota usage loses what the job
was counted with (design §4.11: nothing for a job never counted).

The delete is written only while the job still holds the count it was read with (``Job.quota_rate``): when the
recount or an edit counted it meanwhile, the job is read again and the delete retried."""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.api.audit import AuditTrail
from jobsched.api.exceptions import ConcurrentChange, JobNotFound
from jobsched.api.owned import OwnedJobs
from jobsched.api.quotas import Quotas
from jobsched.clock import Clock, to_ms
from jobsched.models import Job, JobEventKind
from jobsched.observability import logger
from jobsched.ports.errors import Conflict, NotFound
from jobsched.ports.jobs import JobRepository

DELETE_ATTEMPTS = 3
"""Read-and-delete attempts before a job whose count keeps changing is a 409."""


@dataclass(frozen=True)
class Deletes:
    """Deletes of the owners' jobs (``owned``: their reads, ``jobs``: the job store), recorded in ``audit``, with
    the usage ``quotas`` takes away; ``clock`` in epoch ms; tombstones kept ``retention_days``."""

    owned: OwnedJobs
    jobs: JobRepository
    audit: AuditTrail
    quotas: Quotas
    clock: Clock
    retention_days: int | None

    def delete(self, owner: str, job_id: str, actor: str) -> Job:
        """Delete the owner's job ``job_id`` (a ``deleted`` event by ``actor``) and return it as it was. Raises
        ``JobNotFound`` (also when another request deleted it first), ``ConcurrentChange`` when its quota count
        changed at each of ``DELETE_ATTEMPTS``."""
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            stored = self.owned.load(owner, job_id)
            now_ms = self.clock()
            version = (stored.state.version or 0) + 1 if stored.state else 1
            # after the job's last change, as an edit stamps a change: an edit of this millisecond (or of an API
            # environment whose clock runs ahead) may be stamped later than this request's clock
            at_ms = max(now_ms, to_ms(stored.job.updated_at) + 1)
            event = self.audit.change(job_id, at_ms, version, JobEventKind.DELETED, actor)
            try:
                self.jobs.delete(
                    stored.job,
                    deleted_at_ms=now_ms,
                    retention_days=self.retention_days,
                    event=event,
                    usage=self.quotas.for_delete(owner, stored.job),
                )
            except NotFound:
                raise JobNotFound(job_id) from None
            except Conflict:
                logger.info("job counted during a delete; retrying", job_id=job_id, attempt=attempt)
                continue
            logger.info("job deleted", job_id=job_id, owner=owner)
            return stored.job
        raise ConcurrentChange(f"job {job_id} kept changing while being deleted; retry the request")
