"""Local mode durability on moto: snapshot file, restore, the stream-fed mirror, TTL reaping."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from jobsched.aws.clients import Aws, provision
from jobsched.local.embedded_aws import SerializedDynamoDB, serialize_dynamodb
from jobsched.local.state import (
    FORMAT,
    Change,
    Snapshotter,
    StateFileError,
    TableMirror,
    WriteJournal,
    append_changes,
    changes_path,
    read_state,
    restore,
    scan_all,
    state_generation,
    write_state,
)
from jobsched.resources import TABLES

NOW = 1_800_000_000_000


@pytest.fixture
def wrapper(aws_credentials: None) -> Iterator[SerializedDynamoDB]:
    """moto's DynamoDB handler wrapped (installed before any client of the test is created)."""
    installed = serialize_dynamodb()
    assert installed is not None
    yield installed
    installed.observer = None


@pytest.fixture
def tables(wrapper: SerializedDynamoDB, aws: Aws) -> dict[str, str]:
    env = provision(aws, prefix="local")
    return {t.id: env[t.env_var] for t in TABLES}


def mirror_of(aws: Aws, tables: dict[str, str], wrapper: SerializedDynamoDB) -> TableMirror:
    journal = WriteJournal(Aws().dynamodb, tables)
    wrapper.observer = journal.record
    return TableMirror(journal, aws.dynamodb, tables)


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


EMPTY = {"Jobs": [], "Runs": [], "Control": [], "Idempotency": []}


def test_state_file_round_trips_atomically(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    tables = {**EMPTY, "Jobs": [job_item(1)]}

    write_state(path, tables, NOW, generation=3)

    assert read_state(path) == tables
    assert json.loads(path.read_text())["format"] == FORMAT
    assert state_generation(path) == 3
    assert os.listdir(tmp_path) == ["state.json"]  # no temp file left behind
    assert read_state(tmp_path / "absent.json") == {}


def test_change_log_replays_over_its_generation_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_state(path, {**EMPTY, "Jobs": [job_item(1), job_item(2)]}, NOW, generation=1)
    key = lambda n: json.dumps([{"S": f"job#j_{n}"}, {"S": "spec"}], sort_keys=True, separators=(",", ":"))  # noqa: E731
    renamed = {**job_item(1), "name": {"S": "renamed"}}
    append_changes(
        changes_path(path, 1),
        [Change("Jobs", key(1), renamed), Change("Jobs", key(2), None), Change("Jobs", key(3), job_item(3))],
    )
    changes_path(path, 0).write_text("{not even json\n")  # another generation's log: not read
    with open(changes_path(path, 1), "a") as log:
        log.write('{"t": "Jobs", "k": "cut sh')  # the write a SIGKILL interrupted

    assert read_state(path)["Jobs"] == [renamed, job_item(3)]


def test_a_damaged_line_inside_the_change_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    changes_path(path, 0).write_text('garbage\n{"t": "Jobs", "k": "x", "n": null}\n')
    with pytest.raises(StateFileError, match="line 1 is damaged"):
        read_state(path)


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


def test_mirror_follows_every_kind_of_write(
    aws: Aws, tables: dict[str, str], wrapper: SerializedDynamoDB
) -> None:
    # Given a restored item and a mirror seeded with it, the journal on
    restored = restore(aws.dynamodb, tables, {"Jobs": [job_item(0)]}, now_ms=NOW)
    mirror = mirror_of(aws, tables, wrapper)
    mirror.load("Jobs", restored["Jobs"])
    heard: list[list[Change]] = []
    mirror.listeners.append(heard.append)
    mirror.listeners.append(lambda changes: 1 / 0)  # a broken listener stops nothing
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
    with pytest.raises(ClientError):  # a refused write changes nothing and is not journaled
        aws.dynamodb.put_item(
            TableName=name, Item=job_item(2), ConditionExpression="attribute_not_exists(pk)"
        )
    aws.dynamodb.get_item(TableName=name, Key={"pk": {"S": "job#j_2"}, "sk": {"S": "spec"}})  # reads neither
    assert mirror.poll() == 6

    # Then the mirror equals the table, and the snapshot clears the dirty flag
    assert mirror.dirty
    snapshot = mirror.take_snapshot()
    assert not mirror.dirty
    by_key = lambda items: sorted(items, key=lambda i: i["pk"]["S"])  # noqa: E731
    assert by_key(snapshot["Jobs"]) == by_key(scan_all(aws.dynamodb, name))
    (changes,) = heard
    # in write order, each with the image before and after
    assert [(c.key.split('"')[3], c.old is not None, c.new is not None) for c in changes] == [
        ("job#j_1", False, True),
        ("job#j_1", True, True),
        ("job#j_2", False, True),
        ("job#j_0", True, False),
        ("job#j_3", False, True),
        ("job#j_3", True, False),
    ]
    assert changes[1].new is not None and changes[1].new["name"] == {"S": "renamed"}
    assert mirror.poll() == 0


class FailingReads:
    """A DynamoDB client whose reads fail (the journal cannot read a write back)."""

    def batch_get_item(self, **kwargs: object) -> None:
        raise RuntimeError("throttled")


def test_a_lost_write_resynchronizes_the_mirror_from_a_scan(
    aws: Aws, tables: dict[str, str], wrapper: SerializedDynamoDB
) -> None:
    journal = WriteJournal(FailingReads(), tables)
    wrapper.observer = journal.record
    mirror = TableMirror(journal, aws.dynamodb, tables)

    aws.dynamodb.put_item(TableName=tables["Jobs"], Item=job_item(7))

    assert journal.lost
    assert mirror.poll() == 0  # nothing to report, but the copy is whole again
    assert not journal.lost and mirror.dirty
    assert mirror.take_snapshot()["Jobs"] == [job_item(7)]


def test_snapshotter_appends_changes_then_compacts_into_a_new_generation(
    aws: Aws, tables: dict[str, str], wrapper: SerializedDynamoDB, tmp_path: Path
) -> None:
    # Given nothing saved yet
    mirror = mirror_of(aws, tables, wrapper)
    path = tmp_path / "state.json"
    snapshotter = Snapshotter(mirror, path, clock=lambda: NOW, compact_bytes=2000)
    assert snapshotter.save_if_changed() is False and os.listdir(tmp_path) == []

    # When items change, only the changes are appended to the log of generation 0
    aws.dynamodb.put_item(TableName=tables["Jobs"], Item=job_item(1))
    assert snapshotter.save_if_changed() is True
    assert not path.exists() and changes_path(path, 0).exists()
    assert read_state(path)["Jobs"] == [job_item(1)]
    assert snapshotter.save_if_changed() is False

    # When the log outgrows the threshold, generation 1 holds everything and the old log is gone
    for n in range(2, 30):
        aws.dynamodb.put_item(TableName=tables["Jobs"], Item=job_item(n))
    snapshotter.save_if_changed()
    assert snapshotter.compactions == 1 and state_generation(path) == 1
    assert not changes_path(path, 0).exists()
    assert len(read_state(path)["Jobs"]) == 29

    # And the final save is a new generation from a full scan
    aws.dynamodb.delete_item(TableName=tables["Jobs"], Key={"pk": {"S": "job#j_1"}, "sk": {"S": "spec"}})
    snapshotter.final()
    assert state_generation(path) == 2 and len(read_state(path)["Jobs"]) == 28
    assert sorted(os.listdir(tmp_path)) == ["state.json"]


def test_stale_logs_of_other_generations_are_removed(
    aws: Aws, tables: dict[str, str], wrapper: SerializedDynamoDB, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    write_state(path, EMPTY, NOW, generation=4)
    for generation in (3, 4):
        changes_path(path, generation).write_text("")
    snapshotter = Snapshotter(mirror_of(aws, tables, wrapper), path)

    snapshotter.remove_stale_logs()

    assert sorted(os.listdir(tmp_path)) == ["state.4.changes", "state.json"]


def test_expired_items_are_reaped_like_dynamodb_ttl(
    aws: Aws, tables: dict[str, str], wrapper: SerializedDynamoDB, tmp_path: Path
) -> None:
    mirror = mirror_of(aws, tables, wrapper)
    snapshotter = Snapshotter(mirror, tmp_path / "state.json", clock=lambda: NOW)
    runs = tables["Runs"]
    aws.dynamodb.put_item(TableName=runs, Item=run_item("j_1", 1, "succeeded", NOW // 1000 - 10))
    aws.dynamodb.put_item(TableName=runs, Item=run_item("j_1", 2, "succeeded", NOW // 1000 + 10))
    mirror.poll()

    assert snapshotter.reap_expired(NOW) == 1
    mirror.poll()
    assert [r["scheduled_for"]["N"] for r in scan_all(aws.dynamodb, runs)] == ["2"]
    assert [r["scheduled_for"]["N"] for r in mirror.take_snapshot()["Runs"]] == ["2"]


def test_restore_drops_idempotency_records_left_in_progress(aws: Aws, tables: dict[str, str]) -> None:
    # A request in flight at a kill -9 (or whose completion fell after the last save) left its key's record
    # INPROGRESS; no request survives a restart, so a repeat must run again (a trigger's key is bound to its run
    # in the run store, so it names the same run) rather than answer 409 "still being processed"
    expires = {"N": str(NOW // 1000 + 3600)}
    saved = {
        "Idempotency": [
            {"id": {"S": "jobsched-api#done"}, "status": {"S": "COMPLETED"}, "expiration": expires},
            {"id": {"S": "jobsched-api#cut"}, "status": {"S": "INPROGRESS"}, "expiration": expires},
        ]
    }

    restored = restore(aws.dynamodb, tables, saved, now_ms=NOW)

    assert [item["id"]["S"] for item in restored["Idempotency"]] == ["jobsched-api#done"]
