"""A moto data dir moved to SQLite (``sqlite.migration.import_moto_state``) keeps each owner's quota usage whole
(design §4.11): every moved job is counted once, with the count on the job, whether the moto backend had
counted it or not, so a delete on SQLite takes away what was added and usage never goes below zero."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from jobsched.domain.quotas import count_change, job_fire_rate
from jobsched.dynamodb.layout import sched_item, spec_item
from jobsched.dynamodb.quotas import USAGE_SK, quota_pk
from jobsched.models import Job
from jobsched.ports.quotas import OwnerUsage
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.jobs import SqliteJobStore
from jobsched.sqlite.migration import import_moto_state
from tests.contract.test_job_store_contract import T0, job, state

_to_low = TypeSerializer()
RATE = job_fire_rate(job(1).schedule, job(1).timezone)


def _low(item: dict[str, Any]) -> dict[str, Any]:
    return {key: _to_low.serialize(value) for key, value in item.items()}


def _saved(*jobs: Job, usages: dict[str, OwnerUsage]) -> dict[str, list[dict[str, Any]]]:
    """The moto backend's ``Jobs`` table as ``state.json`` holds it: each job's spec and scheduling items and
    each owner's usage item."""
    items = [_low(made) for job_ in jobs for made in (spec_item(job_), sched_item(state(job_)))]
    items += [
        _low({"pk": quota_pk(owner), "sk": USAGE_SK, "jobs": use.jobs, "fire_rate": use.fire_rate})
        for owner, use in usages.items()
    ]
    return {"Jobs": items}


def test_moved_jobs_are_each_counted_once_whether_the_moto_backend_counted_them_or_not(
    tmp_path: Path,
) -> None:
    # Given a moto data dir with a job counted there and two written by a version without quotas (no count)
    counted = job(1).model_copy(update={"quota_rate": RATE})
    saved = _saved(counted, job(2), job(3, owner="team-b"), usages={"team-a": OwnerUsage(1, RATE)})
    database = SqliteDatabase(tmp_path / "jobs.db")
    store = SqliteJobStore(database)

    # When it moves to SQLite
    import_moto_state(database, saved, now_ms=T0)

    # Then each owner's usage holds each of its jobs once, and each job holds the count it is in usage with
    assert store.usage("team-a") == OwnerUsage(2, 2 * RATE)
    assert store.usage("team-b") == OwnerUsage(1, RATE)
    moved = [store.get(made.id).job for made in (job(1), job(2), job(3))]
    assert [made.quota_rate for made in moved] == [RATE, RATE, RATE]

    # and deleting every job brings the usage back to zero, never below
    for made in moved:
        store.delete(
            made, deleted_at_ms=T0, retention_days=None, usage=count_change(made.owner, made.quota_rate, None)
        )
    assert (store.usage("team-a"), store.usage("team-b")) == (OwnerUsage(), OwnerUsage())
