"""The archive's pure rules: the archived row, the partition and object names, determinism, the split of a large
object, and a batch that the store refuses part-way (spilled, nothing lost)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest

from jobsched.domain.archive import (
    ARCHIVE_COLUMNS,
    NO_OWNER,
    archive_batch,
    archive_objects,
    archive_row,
    decode_rows,
    month_of,
    owner_of_partition,
    owner_partition,
    partition_prefix,
    quarantine_object,
    split_object,
)
from jobsched.ports.archive import ArchiveObject, ArchiveUnavailable
from tests.support.archive import T0, finished_runs


@dataclass
class Store:
    """An object store that refuses every put from the ``refuse_from``-th on (0-based; None: never)."""

    refuse_from: int | None = None
    objects: dict[str, bytes] = field(default_factory=dict)
    calls: int = 0

    def put(self, item: ArchiveObject) -> None:
        self.calls += 1
        if self.refuse_from is not None and self.calls > self.refuse_from:
            raise ArchiveUnavailable("refused")
        self.objects[item.key] = item.body


@dataclass
class Spill:
    kept: list[ArchiveObject] = field(default_factory=list)

    def spill(self, items: Sequence[ArchiveObject]) -> None:
        self.kept.extend(items)


def test_the_archived_row_keeps_the_outcome_and_tries_and_drops_the_bookkeeping() -> None:
    row = finished_runs(1)[0]
    archived = archive_row(replace(row, sweep_at=5, notify_pending=True, heartbeat_at=7))
    assert (archived["job_id"], archived["scheduled_for"]) == (row.job_id, row.scheduled_for)
    assert archived["status"] == "dead" and archived["error"] == "boom" and archived["attempt"] == 2
    assert archived["tries"][1] == {
        "attempt": 2,
        "started_at": T0 + 60_000,
        "finished_at": T0 + 60_100,
        "worker": "w-2",
        "error": "boom",
        "round": 0,
    }
    assert set(archived) <= {name for name, _ in ARCHIVE_COLUMNS}
    assert not {"sweep_at", "notify_pending", "heartbeat_at", "term", "expires_at", "owner", "run_id"} & set(
        archived
    )


def test_the_archived_row_keeps_who_cancelled_a_run_and_why_and_the_upstream_run_of_a_chained_one() -> None:
    """An operator's cancel ([3.5]) and a chain's link outlive the runs table: "who stopped the March 3rd invoice
    run, and why?" is answered from the archive as from the run's row."""
    from jobsched.models import RunStatus

    row = replace(
        finished_runs(1)[0],
        status=RunStatus.CANCELLED,
        cancelled_by="arn:aws:iam::1:user/ops",
        cancel_reason="wrong ledger",
        cancelled_from=RunStatus.RUNNING,
        upstream_run_id="j_00000000000000000001@1767225600000",
    )

    archived = archive_row(row)

    assert (archived["cancelled_by"], archived["cancel_reason"], archived["cancelled_from"]) == (
        "arn:aws:iam::1:user/ops",
        "wrong ledger",
        "running",
    )
    assert archived["upstream_run_id"] == "j_00000000000000000001@1767225600000"
    assert set(archived) <= {name for name, _ in ARCHIVE_COLUMNS}
    assert decode_rows(archive_objects([row])[0].body) == [archived]


def test_partitions_are_the_owner_percent_encoded_and_the_utc_month_of_scheduled_for() -> None:
    assert month_of(T0 - 1) == "2025-12" and month_of(T0) == "2026-01"
    assert owner_partition("team-a") == "team-a"
    arn = "arn:aws:iam::1:role/c"
    assert owner_partition(arn) == "arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fc"
    assert owner_of_partition(owner_partition(arn)) == arn
    assert owner_partition(None) == NO_OWNER and owner_of_partition(NO_OWNER) is None
    assert partition_prefix("team-a", "2026-01") == "runs/owner=team-a/month=2026-01/"


@pytest.mark.parametrize("owner", [NO_OWNER, "_none", "%5Fnone", "_", "_x", "ü/é", "a b", "%"])
def test_an_owner_named_like_the_no_owner_partition_reads_its_own_partition_only(owner: str) -> None:
    """Every owner has a partition of its own: none is the partition of rows that name no owner, and each decodes
    back to its owner (as DuckDB's hive partitioning and ``owner_of_partition`` decode it)."""
    assert owner_partition(owner) != owner_partition(None)
    assert owner_of_partition(owner_partition(owner)) == owner
    assert len({owner_partition(o) for o in (owner, NO_OWNER, "_none", None)}) == len({owner, NO_OWNER, None})


def test_a_batch_is_one_object_per_partition_named_by_its_rows_and_byte_for_byte_the_same_again() -> None:
    rows = finished_runs(60)
    objects = archive_objects(rows)
    assert {o.key.rsplit("/", 1)[0] for o in objects} == {
        partition_prefix(r.owner, month_of(r.scheduled_for)).rstrip("/") for r in rows
    }
    assert sum(o.rows for o in objects) == 60
    assert archive_objects(list(reversed(rows))) == objects  # same rows, any order: same names and bytes
    assert archive_objects(rows + rows[:5]) == objects  # a row given twice is written once
    first = objects[0]
    assert [r["scheduled_for"] for r in decode_rows(first.body)] == sorted(
        r["scheduled_for"] for r in decode_rows(first.body)
    )
    other = archive_objects(rows[1:])
    assert {o.key for o in other} != {o.key for o in objects}  # other rows, other names


def test_a_large_object_splits_into_deterministic_parts_that_hold_every_row() -> None:
    rows = [replace(r, owner="team-a", scheduled_for=T0 + i) for i, r in enumerate(finished_runs(400))]
    [whole] = archive_objects(rows)
    parts = split_object(whole, 2_000)
    assert len(parts) > 1 and all(len(p.body) <= 2_000 for p in parts)
    assert [r for p in parts for r in decode_rows(p.body)] == decode_rows(whole.body)
    assert split_object(whole, 2_000) == parts
    assert len({p.key for p in parts}) == len(parts)
    assert split_object(whole, len(whole.body)) == [whole]


@pytest.mark.parametrize("refuse_from", [0, 2])
def test_objects_the_store_refuses_are_spilled_whole(refuse_from: int) -> None:
    rows = finished_runs(90)
    store, spill = Store(refuse_from=refuse_from), Spill()
    report = archive_batch(rows, store, spill, ignored=3)
    objects = archive_objects(rows)
    assert report.as_dict() == {
        "rows": 90,
        "events": 0,
        "objects": refuse_from,
        "spilled": len(objects) - refuse_from,
        "ignored": 3,
        "quarantined": 0,
    }
    assert {o.key: o.body for o in spill.kept} | store.objects == {o.key: o.body for o in objects}


def test_quarantined_records_are_spilled_whole_too_when_the_store_refuses_them() -> None:
    rows = finished_runs(4)
    odd = [{"eventName": "REMOVE", "dynamodb": {"OldImage": {"status": {"S": "exploded"}}}}]
    store, spill = Store(refuse_from=0), Spill()
    report = archive_batch(rows, store, spill, malformed=odd)
    assert (report.rows, report.quarantined, report.spilled) == (4, 1, len(archive_objects(rows)) + 1)
    [kept] = [o for o in spill.kept if o.key.startswith("quarantine/")]
    assert decode_rows(kept.body) == odd and kept == quarantine_object(odd)


def test_another_failure_of_the_store_propagates_so_the_batch_is_retried() -> None:
    class Crash(Store):
        def put(self, item: ArchiveObject) -> None:
            raise RuntimeError("out of time")

    spill = Spill()
    with pytest.raises(RuntimeError):
        archive_batch(finished_runs(5), Crash(), spill)
    assert spill.kept == []


def test_stream_images_read_as_the_run_rows_they_held() -> None:
    from jobsched.dynamodb.stream import expired_runs
    from tests.support.archive import trigger_key_record, ttl_records

    rows = finished_runs(12)
    assert expired_runs([*ttl_records(rows), trigger_key_record(99)]) == (rows, 1, [], [])
