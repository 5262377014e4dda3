"""What the API's create and trigger use cases answer (``JobService.create_job``, ``JobService.trigger_job``)."""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.models import Job, Run


@dataclass(frozen=True)
class CreateResult:
    """``job`` as created (``created`` True) or the identical one that already had this name (False)."""

    job: Job
    created: bool
    replayed: bool = False


@dataclass(frozen=True)
class TriggerResult:
    """The manual run, and whether it is the stored result of an earlier request with the same key."""

    run: Run
    replayed: bool = False
