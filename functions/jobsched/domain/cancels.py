"""Cancelling a run (design §5.8): one conditional write ends it ``cancelled``, and a worker running its try
learns of it from its next heartbeat.

- :func:`cancel_run` is the cancel itself, for any caller that stops a run (the API's ``POST .../cancel``; an
  overlap policy that replaces a running try): the run store's ``cancel`` transition (``queued``, ``retrying``
  or ``running`` -> ``cancelled``, with ``cancelled_by``, ``cancel_reason``, ``cancelled_from`` and
  ``finished_at``; it leaves the sweep index). A queued or retrying run is never claimed again (the claim's
  condition names neither ``cancelled`` status); a running try's next heartbeat is refused with the row
  (``RunRows.renew``), so its worker stops it within one ``heartbeat_interval_s``; every outcome write of that
  try (``succeed``, ``retry``, ``dead``, ``skip``) is conditioned on ``running`` and is refused: no retry, no
  dead-run message or alert, ``cancelled`` is never overwritten.
- :func:`stop_of` says what happens to the try (:class:`Stop`), by the status the cancel found and the
  job's target.
- :func:`record_stopped` is the worker's end of a try a cancel stopped: the try recorded in the cancelled run's
  tries (``RunRows.stopped``, :func:`stopped_try`).

Jobs never cancelled pay nothing: no field is written and no read is made on the way of a run that is not
cancelled. Pure: no storage here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeGuard

from jobsched.domain.retries import Outcome
from jobsched.domain.run_steps import apply, cancel_step
from jobsched.domain.tries import with_try
from jobsched.models import HttpTarget, Job, LambdaTarget, RunStatus, SqsTarget
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.run_stores import RunCancels, RunRows
from jobsched.ports.runs import Owned, RunKey, RunRow
from jobsched.ports.tries import TryRecord

logger = logging.getLogger(__name__)


class Stop(StrEnum):
    """What a cancel does to the run's try: ``not_started`` (the run was queued or retrying: no try starts),
    ``terminated`` (``shell``/``command``: SIGTERM to the process group, SIGKILL after ``cancel_grace_s``; a
    command is asked to stop), ``aborted`` (``http``: the request's connection is shut), ``not_recalled``
    (``lambda``/``sqs``: the invocation or message already sent cannot be recalled and may still finish)."""

    NOT_STARTED = "not_started"
    TERMINATED = "terminated"
    ABORTED = "aborted"
    NOT_RECALLED = "not_recalled"


@dataclass(frozen=True)
class Cancelled:
    """What :func:`cancel_run` did: ``done`` (this call cancelled the run) and ``row``, the run as it is now
    (cancelled by this call or an earlier one, or finished otherwise: its status says which); None: no run."""

    done: bool
    row: RunRow | None


def cancel_run(
    runs: RunCancels, key: RunKey, *, now_ms: int, by: str, reason: str | None = None
) -> Cancelled:
    """Cancel run ``key`` at ``now_ms`` (epoch ms) by ``by`` (a principal) with ``reason``: one conditional
    write (``RunCancels.cancel``). The row written is derived from the row the write found by the same table
    (``run_steps.apply``), so no read follows. Raises ``StoreUnavailable``."""
    answer = runs.cancel(key, now_ms=now_ms, by=by, reason=reason)
    if not answer.cancelled:
        return Cancelled(False, answer.before)
    return Cancelled(True, apply(cancel_step(key, now_ms=now_ms, by=by, reason=reason), answer.before))


def stop_of(row: RunRow, job: Job | None) -> Stop:
    """What the cancel of ``row`` (cancelled: its ``cancelled_from``) did to its try, for ``job``'s target
    (None: the job is gone: a try of it is taken as stoppable)."""
    if row.cancelled_from is not RunStatus.RUNNING:
        return Stop.NOT_STARTED
    target = job.target if job is not None else None
    if isinstance(target, LambdaTarget | SqsTarget):
        return Stop.NOT_RECALLED
    if isinstance(target, HttpTarget):
        return Stop.ABORTED
    return Stop.TERMINATED


STOP_NOTES = {
    Stop.NOT_STARTED: "the run was {status}: no try of it will start",
    Stop.TERMINATED: "its worker stops the running try within one heartbeat interval ({interval_s} s): SIGTERM "
    "to a shell command's process group, SIGKILL {grace_s} s later (cancel_grace_s); a command is asked to stop",
    Stop.ABORTED: "its worker aborts the running http request within one heartbeat interval ({interval_s} s)",
    Stop.NOT_RECALLED: "recorded as cancelled, but a {target} target cannot be recalled: the invocation or "
    "message already sent may still finish (its result is not recorded)",
}
"""One line per :class:`Stop` for the cancel's answer."""


def stop_note(stop: Stop, row: RunRow, job: Job | None, *, heartbeat_interval_s: int) -> str:
    """The line of the cancel's answer that says what happened to the try (:data:`STOP_NOTES`)."""
    return STOP_NOTES[stop].format(
        status=(row.cancelled_from or row.status).value,
        interval_s=heartbeat_interval_s,
        grace_s=job.cancel_grace_s if job is not None else "a few",
        target=job.target.type if job is not None else "remote",
    )


def stopped_try(
    before: RunRow, owned: Owned, stopped_by: RunRow, *, started_at: int, now_ms: int
) -> tuple[TryRecord, ...]:
    """The cancelled run's tries (``before``: as the claim found them) with the try ``owned`` a cancel stopped,
    started at ``started_at`` and ended at ``now_ms`` (epoch ms), with the error naming who cancelled it
    (``stopped_by``: the row the refused heartbeat answered)."""
    why = f": {stopped_by.cancel_reason}" if stopped_by.cancel_reason else ""
    error = f"attempt {owned.attempt} stopped: the run was cancelled by {stopped_by.cancelled_by}{why}"
    record = TryRecord(owned.attempt, started_at, now_ms, owned.worker, error, round=before.reruns)
    return with_try(before.tries, record)


def cancelled_under(row: RunRow | None, owned: Owned) -> TypeGuard[RunRow]:
    """Whether ``row`` (a refused heartbeat's answer) is the run of ``owned`` cancelled during its try."""
    return (
        row is not None
        and row.status is RunStatus.CANCELLED
        and row.attempt == owned.attempt
        and row.worker == owned.worker
    )


def record_stopped(
    runs: RunRows, owned: Owned, before: RunRow, refused: RunRow, started_at: int, now_ms: int
) -> Outcome:
    """The worker's end of a try a cancel stopped (its heartbeat refused with ``refused``, the cancelled row):
    the try is recorded in the run's tries (``RunRows.stopped``, one write on cancelled runs only), and the
    delivery ends ``CANCELLED``. The try ran from ``started_at`` (its claim) to ``now_ms`` (epoch ms). A storage error is logged: the run is cancelled either way, only the try's
    entry is missing."""
    try:
        runs.stopped(owned, tries=stopped_try(before, owned, refused, started_at=started_at, now_ms=now_ms))
    except StoreUnavailable:
        logger.exception("cancelled try not recorded in the run's tries", extra={"run_id": owned.run_id})
    logger.info(
        "try stopped: the run was cancelled",
        extra={"run_id": owned.run_id, "attempt": owned.attempt, "cancelled_by": refused.cancelled_by},
    )
    return Outcome.CANCELLED
