"""A run row's tries stay within its write units (design §5.7): the success write of the happy path keeps the row
under 1 KiB (one write unit), and however often a run is tried and re-run its row stays far below DynamoDB's 400 KB
item limit. Sized with ``bench.capacity``'s rules on the item as ``store.layout`` writes it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from bench.capacity import item_size, item_write_cost, write_units
from jobsched.domain.runs import new_run
from jobsched.domain.tries import FULL_TRIES, MAX_TRIES, with_try
from jobsched.dynamodb.layout import run_item
from jobsched.models import RunKind, RunStatus
from jobsched.ports.runs import RunRow
from jobsched.ports.targets import FAILED_OUTPUT_BYTES, SUCCESS_OUTPUT_BYTES
from jobsched.ports.tries import TryRecord

T0 = 1_767_578_400_123  # a scheduled_for with milliseconds: the longest number
WORKER = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"  # a Lambda request id
OWNER = "arn:aws:iam::123456789012:role/team-billing-nightly-jobs"
JOB_ID = "j_" + "f" * 20  # every job id has this length (registration.new_job_id)

_serializer = TypeSerializer()


def _wire(row: RunRow) -> dict[str, Any]:
    return {name: _serializer.serialize(value) for name, value in run_item(row).items()}


def _claimed_run() -> RunRow:
    """A manual run (it carries its owner, the largest run row) as the claim leaves it."""
    row = new_run(
        JOB_ID,
        T0,
        now_ms=T0 - 1_234,
        retention_days=90,
        term=123_456,
        dispatch_at_ms=T0 + 599_999,
        owner=OWNER,
        kind=RunKind.MANUAL,
    )
    return replace(
        row,
        status=RunStatus.RUNNING,
        attempt=1,
        worker=WORKER,
        started_at=T0 + 1_501,
        heartbeat_at=T0 + 1_501,
        lateness_ms=1_501,
    )


def test_the_success_write_with_a_full_excerpt_costs_one_write_unit() -> None:
    before = _claimed_run()
    # 2-byte characters: the excerpt is cut by bytes, so this is the largest 256-byte output
    record = TryRecord(1, T0 + 1_501, T0 + 3_456, WORKER, None, "é" * 1_000)
    after = replace(
        before,
        status=RunStatus.SUCCEEDED,
        finished_at=T0 + 3_456,
        sweep_at=None,
        tries=with_try(before.tries, record),
    )
    assert len(after.tries[0].output.encode()) <= SUCCESS_OUTPUT_BYTES  # type: ignore[union-attr]
    size = item_size(_wire(after))
    assert size < 1024, size
    assert item_write_cost(_wire(before), _wire(after)).table == 1


def test_a_row_of_many_failed_tries_and_reruns_stays_bounded() -> None:
    row = _claimed_run()
    huge = "x" * 100_000
    for round_ in range(
        20
    ):  # 20 re-runs of 10 failed tries each, every one with the largest error and output
        for attempt in range(1, 11):
            record = TryRecord(attempt, T0, T0 + 1, WORKER, huge, huge, round=round_)
            row = replace(row, tries=with_try(row.tries, record))
    assert len(row.tries) == MAX_TRIES
    full = [t for t in row.tries if t.output is not None]
    assert len(full) == FULL_TRIES and row.tries[-FULL_TRIES:] == tuple(full)
    for entry in full:
        assert len(entry.error.encode()) + len(entry.output.encode()) <= 4096  # type: ignore[union-attr]
        assert len(entry.output.encode()) <= FAILED_OUTPUT_BYTES  # type: ignore[union-attr]
    size = item_size(_wire(row))
    assert size < 40 * 1024, size  # DynamoDB's limit is 400 KB
    assert write_units(size) <= 40
