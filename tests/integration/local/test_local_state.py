"""Local mode durability on moto: snapshot file, restore, the stream-fed mirror, TTL reaping."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import boto3
import pytest

from jobsched.aws import Aws, provision
from jobsched.local.state import (
    FORMAT,
    Snapshotter,
    StateFileError,
    TableMirror,
    read_state,
    restore,
    scan_all,
    streams_client,
    write_state,
)
from jobsched.resources import TABLES

NOW = 1_800_000_000_000


@pytest.fixture
def tables(aws: Aws) -> dict[str, str]:
    env = provision(aws, prefix="local")
    return {t.id: env[t.env_var] for t in TABLES}


def mirror_of(aws: Aws, tables: dict[str, str]) -> TableMirror:
    mirror = TableMirror(aws.dynamodb, streams_client(boto3.session.Session(), "us-east-1"), tables)
    mirror.enable_streams()
    return mirror


def job_item(n: int) -> dict[str, Any]:
    return {"pk": {"S": f"job#j_{n}"}, "sk": {"S": "spec"}, "name": {"S": f"job-{n}"}, "doc": {"S": "{}"}}


def run_item(job: str, at: int, status: str, expires_s: int) -> dict[str, Any]:
    return {
        "job_id": {"S": job},
        "scheduled_for": {"N": str(at)},
        "status": {"S": status},
        "attempt": {"N": "1"},
        "expires_at": {"N": str(expires_s)},
    }


def test_state_file_round_trips_atomically(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    tables = {"Jobs": [job_item(1)], "Runs": []}

    write_state(path, tables, NOW)

    assert read_state(path) == tables
    assert json.loads(path.read_text())["format"] == FORMAT
    assert os.listdir(tmp_path) == ["state.json"]  # no temp file left behind
    assert read_state(tmp_path / "absent.json") == {}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "unreadable"),
        ('{"format": "other"}', "not a jobsched local state file"),
        (json.dumps({"format": FORMAT, "version": 99, "tables": {}}), "version 99"),
        (json.dumps({"format": FORMAT, "version": 1}), "no tables"),
    ],
)
def test_unusable_state_files_are_refused_not_overwritten(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(StateFileError, match=message):
        read_state(path)
    assert path.read_text() == content


def test_restore_drops_expired_items_and_expires_leases(aws: Aws, tables: dict[str, str]) -> None:
    saved = {
        "Jobs": [job_item(n) for n in range(30)],  # more than one batch of 25
        "Runs": [
            run_item("j_1", NOW - 1000, "succeeded", NOW // 1000 + 3600),
            run_item("j_1", NOW - 2000, "succeeded", NOW // 1000 - 1),  # past its TTL
        ],
        "Control": [
            {
                "pk": {"S": "lease#0"},
                "holder": {"S": "old/1"},
                "term": {"N": "7"},
                "expires_at": {"N": str(NOW)},
            },
            {"pk": {"S": "watermark#0"}, "bucket": {"N": "5"}, "term": {"N": "7"}},
        ],
    }

    restored = restore(aws.dynamodb, tables, saved, now_ms=NOW)

    assert {k: len(v) for k, v in restored.items()} == {"Jobs": 30, "Runs": 1, "Control": 2, "Idempotency": 0}
    assert len(scan_all(aws.dynamodb, tables["Jobs"])) == 30
    runs = scan_all(aws.dynamodb, tables["Runs"])
    assert [r["scheduled_for"]["N"] for r in runs] == [str(NOW - 1000)]
    lease = aws.dynamodb.get_item(TableName=tables["Control"], Key={"pk": {"S": "lease#0"}})["Item"]
    assert lease["expires_at"] == {"N": "0"} and lease["term"] == {"N": "7"}  # released, fencing term kept


def test_mirror_follows_every_kind_of_write(aws: Aws, tables: dict[str, str]) -> None:
    # Given a restored item and a mirror seeded with it, streams on
    restored = restore(aws.dynamodb, tables, {"Jobs": [job_item(0)]}, now_ms=NOW)
    mirror = mirror_of(aws, tables)
    mirror.load("Jobs", restored["Jobs"])
    heard: list[tuple[str, int]] = []
    mirror.listeners.append(lambda table, records: heard.append((table, len(records))))
    mirror.listeners.append(lambda table, records: 1 / 0)  # a broken listener stops nothing
    name = tables["Jobs"]

    # When items are put, updated, written in a transaction and a batch, and deleted
    aws.dynamodb.put_item(TableName=name, Item=job_item(1))
    aws.dynamodb.update_item(
        TableName=name,
        Key={"pk": {"S": "job#j_1"}, "sk": {"S": "spec"}},
        UpdateExpression="SET #n = :n",
        ExpressionAttributeNames={"#n": "name"},
        ExpressionAttributeValues={":n": {"S": "renamed"}},
    )
    aws.dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": name, "Item": job_item(2)}},
            {"Delete": {"TableName": name, "Key": {"pk": {"S": "job#j_0"}, "sk": {"S": "spec"}}}},
        ]
    )
    aws.dynamodb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": job_item(3)}}]})
    aws.dynamodb.delete_item(TableName=name, Key={"pk": {"S": "job#j_3"}, "sk": {"S": "spec"}})
    assert mirror.poll() == 6

    # Then the mirror equals the table, and the snapshot clears the dirty flag
    assert mirror.dirty
    snapshot = mirror.take_snapshot()
    assert not mirror.dirty
    by_key = lambda items: sorted(items, key=lambda i: i["pk"]["S"])  # noqa: E731
    assert by_key(snapshot["Jobs"]) == by_key(scan_all(aws.dynamodb, name))
    assert heard == [("Jobs", 6)]
    assert mirror.poll() == 0


def test_snapshotter_writes_only_changes_and_the_final_scan(
    aws: Aws, tables: dict[str, str], tmp_path: Path
) -> None:
    mirror = mirror_of(aws, tables)
    path = tmp_path / "state.json"
    snapshotter = Snapshotter(mirror, path, clock=lambda: NOW)

    assert snapshotter.save_if_changed() is False and not path.exists()
    aws.dynamodb.put_item(TableName=tables["Jobs"], Item=job_item(1))
    assert snapshotter.save_if_changed() is True
    assert read_state(path)["Jobs"] == [job_item(1)]
    assert snapshotter.save_if_changed() is False

    snapshotter.final()
    assert snapshotter.writes == 2
    assert read_state(path)["Jobs"] == [job_item(1)]


def test_expired_items_are_reaped_like_dynamodb_ttl(aws: Aws, tables: dict[str, str], tmp_path: Path) -> None:
    mirror = mirror_of(aws, tables)
    snapshotter = Snapshotter(mirror, tmp_path / "state.json", clock=lambda: NOW)
    runs = tables["Runs"]
    aws.dynamodb.put_item(TableName=runs, Item=run_item("j_1", 1, "succeeded", NOW // 1000 - 10))
    aws.dynamodb.put_item(TableName=runs, Item=run_item("j_1", 2, "succeeded", NOW // 1000 + 10))
    mirror.poll()

    assert snapshotter.reap_expired(NOW) == 1
    mirror.poll()
    assert [r["scheduled_for"]["N"] for r in scan_all(aws.dynamodb, runs)] == ["2"]
    assert [r["scheduled_for"]["N"] for r in mirror.take_snapshot()["Runs"]] == ["2"]
