"""The checks of a job's owner-set settings against the deployment's limits, on create and on PATCH (design §2): the
worker's ``timeout_s`` cap, ``shell`` targets (allowed by the deployment, and to the owners granted them), and a
lambda/sqs target tagged for another owner. Each refusal is an ``InvalidInput`` naming its field."""

from __future__ import annotations

from pydantic import ValidationError

from jobsched.api.exceptions import InvalidInput
from jobsched.api.validation import describe
from jobsched.models import JobSettings, ShellTarget
from jobsched.settings import Settings
from jobsched.targets.ownership import TargetTags
from jobsched.targets.shell import shell_owner_refusal


def check_schedule_or_after(job: JobSettings) -> None:
    """A job runs on its ``schedule`` or after another job (``after``), never both (design §2.1). Raises
    ``InvalidInput`` naming ``after`` when both are given, ``schedule`` when neither is."""
    if job.schedule is not None and job.after is not None:
        raise InvalidInput(
            "after", "give either schedule or after: a job that runs after another has no schedule of its own"
        )
    if job.schedule is None and job.after is None:
        raise InvalidInput("schedule", "schedule is required (or after, to run after another job)")


def check_settings(
    job: JobSettings,
    owner: str,
    settings: Settings,
    *,
    target_tags: TargetTags | None = None,
    shell_owners: frozenset[str] | None = None,
) -> None:
    """Deployment limits on owner-set fields (``settings``: ``worker_timeout_cap_s``, ``allow_shell_targets``),
    a ``shell`` target of an owner not in ``shell_owners`` (None: every owner), and a lambda/sqs target tagged
    for another owner (``target_tags``, optional). Raises ``InvalidInput`` naming ``timeout_s``, or ``target`` for
    a target refused, and as :func:`check_schedule_or_after`."""
    check_schedule_or_after(job)
    cap = settings.worker_timeout_cap_s
    if job.timeout_s > cap:
        raise InvalidInput(
            "timeout_s", f"timeout_s is {job.timeout_s} s; this deployment allows at most {cap} s"
        )
    if isinstance(job.target, ShellTarget) and not settings.allow_shell_targets:
        raise InvalidInput(
            "target",
            "shell targets are disabled in this deployment (they would run with the worker's role); "
            "use an http, lambda, sqs or command target",
        )
    shell_refusal = shell_owner_refusal(owner, shell_owners)
    if isinstance(job.target, ShellTarget) and shell_refusal is not None:
        raise InvalidInput("target", shell_refusal)
    refusal = target_tags.refusal(job.target, owner) if target_tags is not None else None
    if refusal is not None:
        raise InvalidInput("target", refusal)


def validation_problem(error: ValidationError) -> InvalidInput:
    """The first pydantic error of a job's settings as ``InvalidInput`` naming its field (``retry.max_attempts``,
    ``start_at``), worded as request validation words it (``jobsched.api.validation``)."""
    first = error.errors()[0]
    field, message = describe({**first, "loc": ("body", *first["loc"])})
    return InvalidInput(field, message)
