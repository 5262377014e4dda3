"""The shared definitions provision cleanly and have the shape the design needs."""

from __future__ import annotations

from jobsched.aws.clients import Aws, provision
from jobsched.resources import JOBS, RUNS


def test_provision_creates_tables_with_due_and_sweep_indexes(aws: Aws, resource_env: dict[str, str]) -> None:
    jobs = aws.dynamodb.describe_table(TableName=resource_env[JOBS.env_var])["Table"]
    runs = aws.dynamodb.describe_table(TableName=resource_env[RUNS.env_var])["Table"]
    assert {i["IndexName"] for i in jobs["GlobalSecondaryIndexes"]} == {"due", "by_owner", "by_upstream"}
    due = next(i for i in jobs["GlobalSecondaryIndexes"] if i["IndexName"] == "due")
    assert [k["AttributeName"] for k in due["KeySchema"]] == ["due_pk", "due_at"]
    assert due["Projection"]["ProjectionType"] == "INCLUDE"
    assert [k["AttributeName"] for k in runs["KeySchema"]] == ["job_id", "scheduled_for"]


def test_provision_is_idempotent(aws: Aws, resource_env: dict[str, str]) -> None:
    assert provision(aws, prefix="test") == resource_env
