"""``bench.counting.RequestLog``: which items a DynamoDB write request touches (what the capacity rules price)."""

from __future__ import annotations

from bench.counting import RequestLog
from jobsched import resources

RUNS = "test-runs"
KEY = {"job_id": {"S": "j_1"}, "scheduled_for": {"N": "5"}}


def touched(operation: str, request: dict[str, object]) -> list[tuple[str, dict[str, object], bool]]:
    log = RequestLog({RUNS: resources.RUNS})
    return [(w.table, w.key, w.transactional) for w in log._writes(operation, request)]


def test_single_writes_are_keyed_by_their_item_or_key() -> None:
    item = {**KEY, "status": {"S": "queued"}}

    assert touched("PutItem", {"TableName": RUNS, "Item": item}) == [(RUNS, KEY, False)]
    assert touched("UpdateItem", {"TableName": RUNS, "Key": KEY}) == [(RUNS, KEY, False)]
    assert touched("DeleteItem", {"TableName": RUNS, "Key": KEY}) == [(RUNS, KEY, False)]
    assert touched("PutItem", {"TableName": RUNS, "Item": {"status": {"S": "x"}}}) == []  # no key: unpriced
    assert touched("PutItem", {"TableName": "unknown", "Item": item}) == []


def test_each_item_of_a_transaction_is_a_transactional_write() -> None:
    request = {
        "TransactItems": [
            {"Put": {"TableName": RUNS, "Item": {**KEY, "status": {"S": "queued"}}}},
            {"Update": {"TableName": RUNS, "Key": KEY}},
            {"Delete": {"TableName": RUNS, "Key": KEY}},
            {"ConditionCheck": {"TableName": RUNS, "Key": KEY}},
        ]
    }

    assert touched("TransactWriteItems", request) == [(RUNS, KEY, True)] * 3


def test_batch_writes_are_keyed_per_entry() -> None:
    request = {"RequestItems": {RUNS: [{"PutRequest": {"Item": KEY}}, {"DeleteRequest": {"Key": KEY}}]}}

    assert touched("BatchWriteItem", request) == [(RUNS, KEY, False)] * 2
