"""``bench.harness.partition_scoped_queries``: moto answers a base-table Query from its partition key's items
only, with the same results, order and pages as moto's whole-table Query; index queries are unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models.table import Table

from bench.harness import partition_scoped_queries

QUERIES: list[dict[str, Any]] = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": "due#p0#b7#s1#early"}},
    {
        "KeyConditionExpression": "pk = :p AND sk > :s",
        "ExpressionAttributeValues": {":p": "due#p0#b7#s1#early", ":s": "0000000000040"},
        "Limit": 7,
    },
    {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
        "ExpressionAttributeValues": {":p": "due#p0#b7#s1#late", ":s": "00000000000"},
        "ScanIndexForward": False,
    },
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": "absent"}},
    {
        "IndexName": "by_owner",
        "KeyConditionExpression": "owner = :o",
        "ExpressionAttributeValues": {":o": "team-2"},
        "Limit": 5,
    },
]


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.resource("dynamodb", region_name="us-east-1")
        created = dynamodb.create_table(
            TableName="t",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "owner")],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by_owner",
                    "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        with created.batch_writer() as batch:
            for shard in range(3):
                for lane in ("early", "late"):
                    for i in range(60):  # written out of order: moto must sort within the partition
                        n = (i * 37) % 60
                        batch.put_item(
                            Item={
                                "pk": f"due#p0#b7#s{shard}#{lane}",
                                "sk": f"{n:013d}",
                                "owner": f"team-{n % 4}",
                            }
                        )
        yield created


def pages(table: Any, query: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Every page of ``query``, followed by its LastEvaluatedKey."""
    out, start = [], None
    while True:
        response = table.query(**query, **({"ExclusiveStartKey": start} if start else {}))
        out.append(response["Items"])
        start = response.get("LastEvaluatedKey")
        if not start:
            return out


def test_a_scoped_query_returns_the_pages_of_moto_s_whole_table_query(table: Any) -> None:
    expected = [pages(table, q) for q in QUERIES]

    with partition_scoped_queries():
        scoped = [pages(table, q) for q in QUERIES]

    assert scoped == expected
    assert [len(q[0]) for q in expected] == [60, 7, 60, 0, 5]  # the queries select what they are meant to


def test_a_scoped_query_reads_its_own_partition_only_and_adds_none(table: Any, monkeypatch: Any) -> None:
    reads: list[str] = []
    original: Callable[[Any], Any] = Table.all_items

    def counted(self: Any) -> Any:
        reads.append("table")
        return original(self)

    monkeypatch.setattr(Table, "all_items", counted)
    model = next(iter(_tables()))
    partitions = len(model.items)

    with partition_scoped_queries():
        assert len(pages(table, QUERIES[0])[0]) == 60
        assert pages(table, QUERIES[3]) == [[]]
        assert reads == []  # no whole-table read for a base-table Query
        assert len(pages(table, QUERIES[4])[0]) == 5
        assert reads and set(reads) == {"table"}  # an index query is moto's own (a read per page)

    assert len(model.items) == partitions  # the absent partition was not created
    assert Table.all_items is counted  # the patch is undone on exit


def _tables() -> Iterator[Any]:
    from moto.dynamodb.models import dynamodb_backends

    yield from dynamodb_backends["123456789012"]["us-east-1"].tables.values()


def test_a_scoped_query_on_a_table_without_a_sort_key_returns_moto_s_answer() -> None:
    with mock_aws():
        dynamodb = boto3.resource("dynamodb", region_name="us-east-1")
        table = dynamodb.create_table(
            TableName="control",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for n in range(20):
            table.put_item(Item={"pk": f"lease#{n}", "term": n})
        queries = [
            {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": f"lease#{n}"}}
            for n in (0, 7, 99)
        ]
        expected = [pages(table, q) for q in queries]
        with partition_scoped_queries():
            assert [pages(table, q) for q in queries] == expected
        assert [len(p[0]) for p in expected] == [1, 1, 0]
