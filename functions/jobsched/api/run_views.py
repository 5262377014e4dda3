"""The API's views of a stored run: ``run_view`` (the ``Run`` of a run row, as listings and triggers return it)
and ``run_detail`` (``GET /jobs/{id}/runs/{run_id}``: the ``Run`` with its tries). Instants become UTC
datetimes."""

from __future__ import annotations

from jobsched.clock import from_ms, maybe_from_ms
from jobsched.models import Run, RunAttempt, RunDetail
from jobsched.ports.runs import RunRow
from jobsched.ports.tries import TryRecord


def run_view(row: RunRow) -> Run:
    """The API's ``Run`` of ``row`` (instants as UTC datetimes)."""
    return Run(
        id=row.run_id,
        job_id=row.job_id,
        scheduled_for=from_ms(row.scheduled_for),
        status=row.status,
        kind=row.kind,
        attempt=row.attempt,
        enqueued_at=maybe_from_ms(row.enqueued_at),
        started_at=maybe_from_ms(row.started_at),
        finished_at=maybe_from_ms(row.finished_at),
        worker=row.worker,
        error=row.error,
        lateness_ms=row.lateness_ms,
        last_try_lateness_ms=last_try_lateness(row),
        skipped_count=row.skipped_count,
        skipped_through=maybe_from_ms(row.skipped_through),
        cancelled_by=row.cancelled_by,
        cancel_reason=row.cancel_reason,
        upstream_run_id=row.upstream_run_id,
    )


def last_try_lateness(row: RunRow) -> int | None:
    """The last try's start minus ``scheduled_for`` (ms) of a run tried more than once in its current round (a dead
    run: the try that ended it), else None (its ``lateness_ms`` says it)."""
    tries = [t for t in row.tries if t.round == row.reruns]
    if len(tries) < 2 or tries[-1].started_at is None:
        return None
    return tries[-1].started_at - row.scheduled_for


def run_detail(row: RunRow) -> RunDetail:
    """The API's ``RunDetail`` of ``row``: its ``Run`` with ``attempts`` (the tries of round ``row.reruns``) and
    ``previous_attempts`` (those of earlier rounds), instants as UTC datetimes."""

    def attempt(record: TryRecord) -> RunAttempt:
        return RunAttempt(
            attempt=record.attempt,
            started_at=maybe_from_ms(record.started_at),
            finished_at=maybe_from_ms(record.finished_at),
            worker=record.worker,
            error=record.error,
            output=record.output,
            round=record.round,
        )

    return RunDetail(
        **run_view(row).model_dump(),
        reruns=row.reruns,
        attempts=[attempt(t) for t in row.tries if t.round == row.reruns],
        previous_attempts=[attempt(t) for t in row.tries if t.round < row.reruns],
    )
