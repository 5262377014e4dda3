"""The API's side of chains (design §2.1): a job's ``after`` checked and stored as its upstream's id, the chain
shown on ``GET /jobs/{id}``, and the dependents of a deleted job paused.

Rules:
- ``after.job`` names one of the owner's live jobs, by id or by name; it is stored as the id. Another owner's
  job, like an absent one, is a 404 naming ``after.job`` (design §3: never told apart).
- A job runs after one job at most, so chains form trees; an ``after`` that would close a loop (the job itself,
  or a job downstream of it) is refused, 400 naming ``after``. Two PATCHes racing to close a loop can both pass
  this check; such a loop makes no run it should not: a chained run is keyed by the first upstream run's
  ``scheduled_for``, so going round the loop meets that key again and stops.
- Deleting a job pauses the jobs that run after it (reason ``upstream <name> (<id>) was deleted``): their chain
  is broken, which their owner sees on the job, instead of it waiting silently for runs that never come.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from jobsched.api.exceptions import InvalidInput, JobNotFound, UpstreamNotFound
from jobsched.api.owned import OwnedJobs, is_job_id
from jobsched.api.schemas import JobDetail, JobLink
from jobsched.models import Job, JobSettings
from jobsched.observability import logger
from jobsched.ports.errors import NotFound

Settings = TypeVar("Settings", bound=JobSettings)

MAX_CHAIN_DEPTH = 100
"""Most upstream links the loop check follows; a longer chain is refused (400 naming ``after``)."""


@dataclass(frozen=True)
class ChainLinks:
    """Chains of the owners' jobs in ``owned`` (see the module docstring)."""

    owned: OwnedJobs

    def resolve(self, owner: str, settings: Settings, job_id: str | None = None) -> Settings:
        """``settings`` with ``after.job`` as the upstream's id (unchanged without ``after``). ``job_id``: the job
        being changed (None on create: a new job has no downstream jobs, so no loop can form). Raises
        ``UpstreamNotFound`` (404, ``after.job``), ``InvalidInput`` naming ``after`` for a loop."""
        if settings.after is None:
            return settings
        upstream = self._upstream(owner, settings.after.job)
        seen = upstream
        for _ in range(MAX_CHAIN_DEPTH):
            if seen.id == job_id:
                raise InvalidInput(
                    "after",
                    f"after names {upstream.name!r}, which runs after this job: chains cannot loop",
                )
            if seen.after is None:
                after = settings.after.model_copy(update={"job": upstream.id})
                return settings.model_copy(update={"after": after})
            try:
                seen = self.owned.load(owner, seen.after.job).job
            except JobNotFound:  # its upstream was deleted: the chain ends there
                after = settings.after.model_copy(update={"job": upstream.id})
                return settings.model_copy(update={"after": after})
        raise InvalidInput("after", f"a chain may be at most {MAX_CHAIN_DEPTH} jobs long")

    def edited(self, owner: str, settings: Settings, job_id: str, *, recheck: bool) -> Settings:
        """``settings`` of an edit of job ``job_id``: as ``resolve`` makes them when ``recheck`` (the edit sets
        ``after``, or resumes the job: a resumed job must have a live upstream), else as they are: an ``after``
        the edit leaves alone names the upstream it named, even one deleted since (the job was paused then),
        so other fields of such a job can be edited. Raises as ``resolve``."""
        return self.resolve(owner, settings, job_id) if recheck else settings

    def _upstream(self, owner: str, reference: str) -> Job:
        """The owner's live job ``reference`` (an id, else a name). Raises ``UpstreamNotFound``."""
        job_id = reference if is_job_id(reference) else self.owned.jobs.job_id_by_name(owner, reference)
        if job_id is None:
            raise UpstreamNotFound(reference)
        try:
            return self.owned.load(owner, job_id).job
        except JobNotFound:
            raise UpstreamNotFound(reference) from None

    def detail(self, job: Job) -> JobDetail:
        """``job`` with its chain: ``upstream`` (None without ``after``, or when that job is gone) and
        ``downstream`` (its dependents, by name)."""
        upstream = None
        if job.after is not None:
            try:
                found = self.owned.load(job.owner, job.after.job).job
                upstream = JobLink(id=found.id, name=found.name)
            except JobNotFound:
                upstream = None
        downstream = [
            JobLink(id=d.job.id, name=d.job.name, on=[str(on) for on in d.job.after.on])
            for d in self.owned.jobs.dependents(job.id)
            if d.job.owner == job.owner and d.job.after is not None
        ]
        return JobDetail(**job.model_dump(), upstream=upstream, downstream=downstream)

    def pause_dependents(self, job: Job, pause: Callable[[str, str, str], object]) -> int:
        """After ``job`` was deleted: ``pause(owner, dependent id, reason)`` each of its dependents that is not
        paused yet. Returns how many were paused; one that fails is logged and left (its chain makes no run
        anyway: its upstream is gone)."""
        reason = f"upstream {job.name} ({job.id}) was deleted"
        paused = 0
        for dependent in self.owned.jobs.dependents(job.id):
            if dependent.job.paused or dependent.job.owner != job.owner:
                continue
            try:
                pause(job.owner, dependent.job.id, reason)
                paused += 1
            except (JobNotFound, NotFound):
                continue
            except Exception:
                logger.exception("dependent not paused", job_id=dependent.job.id, upstream=job.id)
        return paused


def relink(current: Job, changed: Job) -> tuple[str | None, str | None] | None:
    """``Rewrite.relink`` of an edit from ``current`` to ``changed``: ``(upstream id before, after)`` when the
    edit changes which job ``after`` names (None: it does not), so the store moves the chain mark (design §2.1)."""
    before = current.after.job if current.after is not None else None
    now = changed.after.job if changed.after is not None else None
    return None if before == now else (before, now)
