"""Moving a data dir of local mode's moto backend (``state.json``: DynamoDB items) into a new SQLite database,
once, at its first start on the ``sqlite`` backend, so switching the default loses no job, run or term."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from jobsched.domain.lease import LeaseRecord
from jobsched.domain.quotas import count_change, job_fire_rate
from jobsched.dynamodb.layout import (
    SCHED_SK,
    SPEC_SK,
    history_owner,
    is_tombstone,
    job_from_items,
    run_row,
    state_from_item,
)
from jobsched.observability import logger
from jobsched.sqlite.control import SqliteControlStore
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.jobs import SqliteJobStore
from jobsched.sqlite.runs import SqliteRunStore

_deserializer = TypeDeserializer()


def _plain(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _deserializer.deserialize(v) for k, v in item.items()} for item in items]


def import_moto_state(
    database: SqliteDatabase, saved: dict[str, list[dict[str, Any]]], *, now_ms: int
) -> dict[str, int]:
    """Copy the moto backend's saved tables ``saved`` (table id -> low-level DynamoDB items, as
    ``jobsched.local.state.read_state`` returns them) into ``database``: live jobs with their scheduling
    state, tombstones, run rows, leases (expired, keeping their fencing term), watermarks and the partitions'
    high-water mark. Each live job is counted in its owner's quota usage, once, with its count on it
    (``Job.quota_rate``, design §4.11; the moto backend's usage items are not copied). Items past their TTL at
    ``now_ms`` (epoch ms) are left behind, and so are manual triggers' ``Idempotency-Key`` bindings (stored
    hashed, they cannot be rebuilt: a trigger retried with a key used before the move creates a new run) and
    overlap locks (no holder survives a restart). Returns
    ``{"jobs", "tombstones", "runs"}`` counts. A job whose items cannot be read is logged and skipped."""
    now_s = now_ms // 1000
    jobs, runs, control = SqliteJobStore(database), SqliteRunStore(database), SqliteControlStore(database)
    counts = {"jobs": 0, "tombstones": 0, "runs": 0}
    rates: dict[
        tuple[str | None, str], int
    ] = {}  # a fire rate takes ~40 ms a cron: once per schedule and zone
    by_job: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for item in _plain(saved.get("Jobs", [])):
        if str(item.get("pk", "")).startswith("job#"):
            by_job[str(item["pk"])][str(item.get("sk"))] = item
    for pk, items in by_job.items():
        spec, sched = items.get(SPEC_SK), items.get(SCHED_SK)
        if spec is None:
            continue
        if is_tombstone(spec):
            owner, expires = history_owner(spec), spec.get("expires_at")
            if owner is not None and (expires is None or int(expires) >= now_s):
                with database.write() as conn:
                    conn.execute(
                        "INSERT OR REPLACE INTO tombstones (job_id, owner, deleted_at, expires_at_s)"
                        " VALUES (?, ?, ?, ?)",
                        (
                            pk.removeprefix("job#"),
                            owner,
                            now_ms,
                            int(expires) if expires is not None else 2**62,
                        ),
                    )
                counts["tombstones"] += 1
            continue
        try:
            job = job_from_items(spec, sched)
            if sched is None:
                raise ValueError("no scheduling item")
            # counted here, whatever the moto backend held (its usage items are not moved): each job once
            key = (job.schedule, job.timezone)
            if key not in rates:
                rates[key] = job_fire_rate(*key)
            rate = rates[key]
            counted = job.model_copy(update={"quota_rate": rate})
            jobs.create(counted, state_from_item(sched), usage=count_change(job.owner, None, rate))
        except (KeyError, TypeError, ValueError) as error:
            logger.error("job not moved to SQLite", job=pk, error=str(error))
            continue
        counts["jobs"] += 1
    counts["runs"] = runs.put_many(
        [
            run_row(item)
            for item in _plain(saved.get("Runs", []))
            if not str(item.get("job_id", "")).startswith("trigger#")
            and not (item.get("expires_at") is not None and int(item["expires_at"]) < now_s)
        ]
    )
    for item in _plain(saved.get("Control", [])):
        pk = str(item.get("pk", ""))
        if pk.startswith("lease#"):
            partition = int(pk.removeprefix("lease#"))
            control.take_lease(
                LeaseRecord(partition, str(item.get("holder", "")), int(item["term"]), 0),
                previous=None,
                now_ms=now_ms,
            )
        elif pk.startswith("watermark#"):
            control.advance_watermark(
                int(pk.removeprefix("watermark#")), int(item["bucket"]), term=int(item["term"]), now_ms=now_ms
            )
        elif pk == "partitions" and item.get("high_water") is not None:
            control.raise_partition_high_water(int(item["high_water"]))
    return counts
