"""What the API's use cases on one owner's job start from (``JobService`` and its collaborators ``Triggers``,
``Reruns``): the job read for its owner, another owner's job being "not found" (design §3), and the idempotency
keys a request with an ``Idempotency-Key`` runs under."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jobsched.api.audit import AuditTrail
from jobsched.api.exceptions import JobNotFound
from jobsched.api.idempotency import IdempotencyKeys
from jobsched.clock import Clock
from jobsched.ports.errors import NotFound
from jobsched.ports.jobs import JobRepository, StoredJob
from jobsched.ports.run_stores import RunHistory, RunSender
from jobsched.settings import Settings

JOB_ID_PATTERN = re.compile(r"^j_[0-9a-f]{20}$")
"""Ids made by ``registration.new_job_id``; anything else is "not found" without a read."""


def is_job_id(value: Any) -> bool:
    """Whether ``value`` is a string spelled as a job id (:data:`JOB_ID_PATTERN`)."""
    return isinstance(value, str) and JOB_ID_PATTERN.match(value) is not None


@dataclass(frozen=True)
class OwnedJobs:
    """The owners' jobs in ``jobs``; ``idempotency``: the keys store, needed only by calls given a key."""

    jobs: JobRepository
    idempotency: IdempotencyKeys | None = None

    def load(self, owner: str, job_id: str) -> StoredJob:
        """The owner's job, read strongly consistent (a job just created is found). Raises ``JobNotFound``
        (a malformed id, an absent job or another owner's)."""
        if not is_job_id(job_id):
            raise JobNotFound(job_id)
        try:
            stored = self.jobs.get(job_id)
        except NotFound:
            raise JobNotFound(job_id) from None
        if stored.job.owner != owner:
            raise JobNotFound(job_id)
        return stored

    def keys(self) -> IdempotencyKeys:
        """The idempotency keys. Raises RuntimeError when built without them (a wiring error: a call got an
        ``Idempotency-Key`` the deployment cannot keep)."""
        if self.idempotency is None:
            raise RuntimeError("JobService was built without IdempotencyKeys but got an Idempotency-Key")
        return self.idempotency


@dataclass(frozen=True)
class OwnersRuns:
    """What the API's actions on the runs of the owners' jobs (``owned``) work with (``Triggers``, ``Reruns``):
    the run store ``runs`` and queue ``queue``, the ``audit`` trail they are recorded in, ``settings`` for the
    retention and the sweeper's delay, ``clock`` for epoch ms (UTC)."""

    settings: Settings
    owned: OwnedJobs
    runs: RunHistory
    queue: RunSender
    audit: AuditTrail
    clock: Clock
