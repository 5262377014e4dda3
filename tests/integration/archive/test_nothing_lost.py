"""Nothing lost: runs deleted the way TTL deletes them (stream records with the service identity) reach the archive
bucket exactly once as the deduplicating reader sees them, across a bucket that refuses writes (spilled, then
redriven), retried batches, a batch bisected by its retries, a crash part-way through a batch, and records that
are no TTL deletion of a run (ignored). The archive function runs on moto's S3 and SQS through its handler."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from jobsched.aws.archive import ARCHIVE_BUCKET_ENV, ARCHIVE_SPILL_ENV
from jobsched.domain.archive import (
    OBJECT_SUFFIX,
    archive_row,
    audit_objects,
    audit_row,
    decode_rows,
    month_of,
    owner_partition,
)
from jobsched.dynamodb.layout import event_item, run_item
from jobsched.handlers import archive as archive_handler
from jobsched.local.archive import LocalArchive
from jobsched.runtime.archive import ArchiveConfigError, ArchiveRuntime
from tests.support.archive import (
    DAY_MS,
    T0,
    audit_events,
    audit_records,
    finished_runs,
    stream_record,
    trigger_key_record,
    ttl_records,
)
from tests.support.aws import set_fake_credentials
from tests.support.worker import Context

BUCKET = "jobsched-archive-test"


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[ArchiveRuntime]:
    set_fake_credentials(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        url = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="spill")["QueueUrl"]
        yield ArchiveRuntime.from_environment({ARCHIVE_BUCKET_ENV: BUCKET, ARCHIVE_SPILL_ENV: url})


def invoke(runtime: ArchiveRuntime, event: dict[str, Any]) -> dict[str, Any]:
    return archive_handler.handler(event, Context(function_name="jobsched-archive"), runtime=runtime)


def read_back(runtime: ArchiveRuntime, folder: Path) -> LocalArchive:
    """The bucket's objects copied under ``folder`` (same keys), for the DuckDB reader."""
    client = runtime.store.client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for entry in page.get("Contents", []):
            path = folder / entry["Key"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(client.get_object(Bucket=BUCKET, Key=entry["Key"])["Body"].read())
    return LocalArchive(folder)


class Refusals:
    """Makes the bucket's client refuse (an S3 ``ClientError``) or crash on chosen ``put_object`` calls."""

    def __init__(self, runtime: ArchiveRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
        self.client = runtime.store.client
        self.real = self.client.put_object
        self.calls = 0
        self.refuse: set[int] = set()
        self.crash: set[int] = set()
        monkeypatch.setattr(self.client, "put_object", self.put_object)

    def put_object(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls in self.crash:
            raise TimeoutError("the function ran out of time part-way through the batch")
        if self.calls in self.refuse:
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "slow down"}}, "PutObject")
        return self.real(**kwargs)


def test_every_expired_run_is_archived_exactly_once_across_failures_retries_and_a_crash(
    runtime: ArchiveRuntime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rows = finished_runs(240)
    records = ttl_records(rows)
    batches = [records[i : i + 60] for i in range(0, len(records), 60)]
    noise = [
        trigger_key_record(9_001),
        stream_record(run_item(rows[0]), 9_002, identity=None),  # an owner's delete: not TTL
        stream_record(run_item(rows[1]), 9_003, event="MODIFY"),
    ]
    faults = Refusals(runtime, monkeypatch)

    # batch 1: delivered, then delivered again (Lambda retries a batch whose invocation's answer was lost)
    first = invoke(runtime, {"Records": batches[0] + noise})
    assert first["ignored"] == 3 and first["rows"] == 60 and first["spilled"] == 0
    assert invoke(runtime, {"Records": batches[0]})["rows"] == 60

    # batch 2: the bucket refuses its second object: that object and the rest go to the spill queue
    faults.refuse = {faults.calls + 2}
    spilled = invoke(runtime, {"Records": batches[1]})
    assert spilled["spilled"] >= 1 and spilled["objects"] == 1

    # batch 3: a crash after its first object was written; Lambda retries, bisecting the batch
    faults.crash = {faults.calls + 2}
    with pytest.raises(TimeoutError):
        invoke(runtime, {"Records": batches[2]})
    for half in (batches[2][:30], batches[2][30:]):
        assert invoke(runtime, {"Records": half})["spilled"] == 0

    # batch 4: the bucket refuses the first try of the redrive; the next pass writes everything
    invoke(runtime, {"Records": batches[3]})
    faults.refuse = {faults.calls + 1}
    with pytest.raises(Exception, match="SlowDown"):
        invoke(runtime, {"action": "redrive"})
    assert invoke(runtime, {"action": "redrive"})["written"] >= 1
    assert invoke(runtime, {"action": "redrive"}) == {"written": 0, "left": 0}

    archive = read_back(runtime, tmp_path)
    _, [(count, distinct)] = archive.query(
        "SELECT count(*), count(DISTINCT (job_id, scheduled_for)) FROM runs"
    )
    assert count == distinct == len(rows)
    names, found = archive.query("SELECT * EXCLUDE (owner, month) FROM runs ORDER BY job_id, scheduled_for")
    expected = sorted((archive_row(r) for r in rows), key=lambda r: (r["job_id"], r["scheduled_for"]))
    got = [{k: v for k, v in zip(names, row, strict=True) if v is not None} for row in found]
    for row in got:  # DuckDB fills every field of a try's struct: unset ones are None
        row["tries"] = [{k: v for k, v in t.items() if v is not None} for t in row.get("tries") or []]
    assert got == expected


def test_an_owner_reads_only_its_own_partition(runtime: ArchiveRuntime, tmp_path: Path) -> None:
    rows = finished_runs(30)
    invoke(runtime, {"Records": ttl_records(rows)})
    archive = read_back(runtime, tmp_path)
    owner = "arn:aws:iam::1:role/c"
    _, found = archive.query("SELECT DISTINCT owner FROM runs WHERE owner = ?", [owner])
    assert found == [(owner,)]
    keys = [e["Key"] for e in runtime.store.client.list_objects_v2(Bucket=BUCKET)["Contents"]]
    months = {month_of(r.scheduled_for) for r in rows if r.owner == owner}
    assert sum(f"owner={owner_partition(owner)}/" in k for k in keys) == len(months)


def test_a_malformed_run_image_is_kept_whole_in_quarantine_and_the_rest_of_its_batch_archived(
    runtime: ArchiveRuntime, tmp_path: Path
) -> None:
    """A TTL deletion whose image is no run row (no ``scheduled_for``, an unknown status, an attribute type of no
    known kind) neither fails its batch (retried, then only its sequence numbers kept: the stream's 24 hours the
    only copy) nor is dropped: its record is written whole under ``quarantine/``, counted, and the rest of the
    batch is archived. A retry writes the same object again."""
    rows = finished_runs(6)
    records = ttl_records(rows)
    no_key = stream_record(run_item(rows[0]), 7_001)
    del no_key["dynamodb"]["OldImage"]["scheduled_for"]
    odd_status = stream_record({**run_item(rows[1]), "status": "exploded", "error": "ünïcødé " * 50}, 7_002)
    odd_type = stream_record(run_item(rows[2]), 7_003)
    odd_type["dynamodb"]["OldImage"]["attempt"] = {"X": "1"}
    batch = [*records, no_key, odd_status, odd_type]

    report = invoke(runtime, {"Records": batch})
    assert invoke(runtime, {"Records": batch}) == report
    assert (report["rows"], report["quarantined"], report["ignored"]) == (6, 3, 0)
    client = runtime.store.client
    keys = [e["Key"] for e in client.list_objects_v2(Bucket=BUCKET)["Contents"]]
    kept = [k for k in keys if k.startswith("quarantine/")]
    assert len(kept) == 1
    body = client.get_object(Bucket=BUCKET, Key=kept[0])["Body"].read()
    assert decode_rows(body) == [no_key, odd_status, odd_type]
    archive = read_back(runtime, tmp_path)
    _, [(count,)] = archive.query("SELECT count(*) FROM runs")
    assert count == len(rows)


def test_a_spill_that_fails_too_fails_the_batch(
    runtime: ArchiveRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = Refusals(runtime, monkeypatch)
    faults.refuse = set(range(1, 100))

    def refuse(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "SendMessage")

    monkeypatch.setattr(runtime.spill.client, "send_message", refuse)
    with pytest.raises(ClientError):
        invoke(runtime, {"Records": ttl_records(finished_runs(3))})


def test_an_unknown_event_and_a_missing_setting_are_refused_by_name(runtime: ArchiveRuntime) -> None:
    with pytest.raises(ValueError, match="neither a stream batch"):
        invoke(runtime, {"detail": {}})
    with pytest.raises(ArchiveConfigError, match=ARCHIVE_SPILL_ENV):
        ArchiveRuntime.from_environment({ARCHIVE_BUCKET_ENV: BUCKET})


def _audit_keys(runtime: ArchiveRuntime) -> list[str]:
    listing = runtime.store.client.list_objects_v2(Bucket=BUCKET, Prefix="audit/")
    return sorted(entry["Key"] for entry in listing.get("Contents", []))


def _audit_rows(runtime: ArchiveRuntime) -> list[dict[str, Any]]:
    client = runtime.store.client
    return [
        row
        for key in _audit_keys(runtime)
        for row in decode_rows(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    ]


def test_an_expired_audit_event_is_archived_exactly_once_across_a_retried_batch(
    runtime: ArchiveRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jobs table's stream: a TTL deletion of an audit event lands under ``audit/month=<its month>/``; a crash
    part-way through the batch and Lambda's retry of it leave one row per event (the retry rewrites the same
    names); the timers and tombstones TTL deletes from the same table are no audit event and no run."""
    events = audit_events(12)
    timer = {"pk": "due#p0#b1#s0#0", "sk": "x", "expires_at": T0 // 1000}
    tombstone = {"pk": "job#j-gone", "sk": "spec", "job_id": "j-gone", "expires_at": T0 // 1000}
    batch = [*audit_records(events), stream_record(timer, 8_001), stream_record(tombstone, 8_002)]
    faults = Refusals(runtime, monkeypatch)
    faults.crash = {2}
    with pytest.raises(TimeoutError):
        invoke(runtime, {"Records": batch})
    report = invoke(runtime, {"Records": batch})
    assert (report["events"], report["rows"], report["ignored"], report["quarantined"]) == (12, 0, 2, 0)
    assert invoke(runtime, {"Records": batch}) == report
    keys = _audit_keys(runtime)
    assert {key.split("/")[1] for key in keys} == {f"month={month_of(e.at)}" for e in events}
    assert len(keys) == report["objects"]
    assert sorted(_audit_rows(runtime), key=lambda r: r["at"]) == [audit_row(e) for e in events]
    assert not [
        e for e in runtime.store.client.list_objects_v2(Bucket=BUCKET)["Contents"] if "runs/" in e["Key"]
    ]


def test_only_ttl_deletions_of_audit_events_write_audit_objects(runtime: ArchiveRuntime) -> None:
    """An operator's delete or an update of an audit item, and every record of the runs table, write no object
    under ``audit/``."""
    [event] = audit_events(1)
    not_ttl = [
        stream_record(event_item(event), 1, identity=None),
        stream_record(event_item(event), 2, event="MODIFY"),
        stream_record(
            event_item(event), 3, identity={"type": "Service", "principalId": "other.amazonaws.com"}
        ),
    ]
    assert invoke(runtime, {"Records": not_ttl})["ignored"] == 3
    rows = finished_runs(5)
    report = invoke(runtime, {"Records": [*ttl_records(rows), trigger_key_record(9)]})
    assert (report["rows"], report["events"]) == (5, 0)
    assert _audit_keys(runtime) == []


def test_a_malformed_audit_image_is_quarantined_and_a_failing_batch_fails_the_invocation(
    runtime: ArchiveRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audit item's image that is no audit event (unknown kind, ``detail`` no JSON) is kept whole under
    ``quarantine/``; a bucket failure that is no refusal fails the invocation, so Lambda retries the batch and then
    sends it to the mapping's on-failure destination; a refusal spills the audit objects whole."""
    events = audit_events(3)
    odd_kind = stream_record({**event_item(events[0]), "kind": "exploded"}, 7_001)
    odd_detail = stream_record({**event_item(events[1]), "detail": "{not json"}, 7_002)
    report = invoke(runtime, {"Records": [*audit_records(events[2:]), odd_kind, odd_detail]})
    assert (report["events"], report["quarantined"]) == (1, 2)
    client = runtime.store.client
    [kept] = [
        e["Key"]
        for e in client.list_objects_v2(Bucket=BUCKET)["Contents"]
        if e["Key"].startswith("quarantine/")
    ]
    assert decode_rows(client.get_object(Bucket=BUCKET, Key=kept)["Body"].read()) == [odd_kind, odd_detail]

    faults = Refusals(runtime, monkeypatch)
    faults.crash = {faults.calls + 1}
    with pytest.raises(TimeoutError):
        invoke(runtime, {"Records": audit_records(audit_events(8))})
    faults.refuse = {faults.calls + 1}
    spilled = invoke(runtime, {"Records": audit_records(audit_events(8))})
    assert spilled["objects"] == 0 and spilled["spilled"] == len(audit_objects(audit_events(8)))


def test_local_mode_moves_expired_audit_events_into_the_archive_directory(tmp_path: Path) -> None:
    """Local mode's retention pass moves expired audit events to ``<archive>/audit/month=<yyyy-MM>/`` in the
    bucket's format and deletes them from SQLite; a refused write deletes nothing."""
    from jobsched.local.archive import archive_then_reap
    from jobsched.sqlite.database import SqliteDatabase
    from jobsched.sqlite.jobs import SqliteJobStore

    database = SqliteDatabase(tmp_path / "jobsched.sqlite3")
    try:
        jobs = SqliteJobStore(database)
        events = audit_events(4)
        kept = replace(events[3], expires_at=None)
        for event in [*events[:3], kept]:
            jobs.record_event(event)
        reap = archive_then_reap(database, tmp_path / "archive")
        assert reap(T0 + 100 * DAY_MS) == 2  # the first two expired, the third not yet, the fourth never
        left = [
            e.key
            for job in ("team-a-job-0", "team-a-job-1", "team-a-job-2")
            for e in jobs.list_events(job, 10)[0]
        ]
        assert sorted(left) == ["k2", "k3"]
        files = sorted((tmp_path / "archive" / "audit").rglob(f"*{OBJECT_SUFFIX}"))
        rows = [row for path in files for row in decode_rows(path.read_bytes())]
        assert sorted(rows, key=lambda r: r["at"]) == [audit_row(e) for e in events[:2]]
        assert {path.parent.name for path in files} == {f"month={month_of(e.at)}" for e in events[:2]}
    finally:
        database.close()
