"""Archive queries for one owner: the pure builder (owner as a partition predicate, values only as parameters,
injection attempts refused or made inert), the Athena adapter's requests (botocore Stubber: moto does not run
Athena queries) and the in-memory fake."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from jobsched.aws.athena import AthenaArchiveQueries, athena_literal
from jobsched.domain.archive_queries import (
    DAY_MS,
    ArchiveWindowError,
    reaches_archive,
    rows_of_strings,
    runs_query,
    window_of,
)
from jobsched.memory.archive_queries import MemoryArchiveQueries
from jobsched.ports.archive_queries import QueryState, RunsWindow, UnknownQuery

JAN = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MAR = JAN + (31 + 28) * DAY_MS  # 2026-03-01T00:00:00Z
JOB = "j_" + "a" * 20


def window(**changes: Any) -> RunsWindow:
    values: dict[str, Any] = {"owner": "team-a", "since_ms": JAN, "until_ms": MAR}
    values.update(changes)
    return RunsWindow(**values)


def test_the_owner_is_a_partition_predicate_and_every_value_a_parameter() -> None:
    query = runs_query(window(job_id=JOB, status="dead", kind="scheduled", limit=50))
    assert "owner = ?" in query.sql and "month BETWEEN ? AND ?" in query.sql
    assert query.parameters == ("team-a", "2026-01", "2026-02", JAN, MAR, JOB, "dead", "scheduled")
    assert query.sql.count("?") == len(query.parameters)
    for value in ("team-a", JOB, "dead", "2026-01"):
        assert value not in query.sql
    assert query.sql.endswith("LIMIT 50")


def test_an_owner_with_quotes_stays_a_parameter_percent_encoded_as_the_layout_writes_it() -> None:
    query = runs_query(window(owner="x' OR '1'='1"))
    assert "OR '1'" not in query.sql
    assert query.parameters[0] == "x%27%20OR%20%271%27%3D%271"
    assert query.sql == runs_query(window()).sql  # the text never depends on the owner


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"job_id": "j_aaaaaaaaaaaaaaaaaaaa' OR 1=1 --"}, "job_id"),
        ({"job_id": "../other"}, "job_id"),
        ({"status": "dead' OR owner <> '"}, "status"),
        ({"kind": "x;DROP TABLE runs"}, "kind"),
        ({"owner": ""}, "owner"),
        ({"until_ms": JAN}, "until"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
    ],
)
def test_a_malformed_window_is_refused_naming_its_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ArchiveWindowError) as refused:
        runs_query(window(**changes))
    assert refused.value.field == field


def test_a_window_reaches_the_archive_only_when_it_starts_before_the_retention_floor() -> None:
    now = MAR + 100 * DAY_MS
    assert reaches_archive(now - 91 * DAY_MS, now, 90)
    assert not reaches_archive(now - 90 * DAY_MS, now, 90)
    assert not reaches_archive(None, now, 90)
    assert reaches_archive(None, now, 90, until_ms=now - 90 * DAY_MS)  # ends at the floor: none in the table
    assert not reaches_archive(None, now, 90, until_ms=now - 90 * DAY_MS + 1)


def test_athena_literals_are_one_literal_each() -> None:
    assert athena_literal(12) == "12"
    assert athena_literal("it's") == "'it''s'"
    assert athena_literal("x' OR '1'='1") == "'x'' OR ''1''=''1'"
    with pytest.raises(TypeError):
        athena_literal(True)


def test_rows_answered_as_text_get_their_types_back() -> None:
    rows = rows_of_strings(
        ["job_id", "scheduled_for", "status", "error", "tries"],
        [
            [JOB, str(JAN), "dead", None, '[{"attempt":1,"worker":"w","error":"HTTP 503"}]'],
            [JOB, str(JAN + 1), "succeeded", None, '[[1, 5, 6, "w", null, "ok", 0]]'],
        ],
    )
    assert rows[0] == {
        "job_id": JOB,
        "scheduled_for": JAN,
        "status": "dead",
        "tries": [{"attempt": 1, "worker": "w", "error": "HTTP 503"}],
    }
    assert rows[1]["tries"] == [
        {"attempt": 1, "started_at": 5, "finished_at": 6, "worker": "w", "output": "ok", "round": 0}
    ]
    with pytest.raises(ValueError):
        rows_of_strings(["scheduled_for"], [["soon"]])


def _athena() -> tuple[AthenaArchiveQueries, Stubber]:
    client = boto3.client("athena", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return AthenaArchiveQueries(client, workgroup="jobsched-archive", database="jobsched_archive"), Stubber(
        client
    )


def test_the_athena_adapter_starts_in_the_workgroup_with_the_values_as_literal_parameters() -> None:
    queries, stub = _athena()
    query = runs_query(window(owner="o'brien", job_id=JOB))
    stub.add_response(
        "start_query_execution",
        {"QueryExecutionId": "e-1"},
        {
            "QueryString": query.sql,
            "QueryExecutionContext": {"Database": "jobsched_archive"},
            "WorkGroup": "jobsched-archive",
            "ExecutionParameters": ["'o%27brien'", "'2026-01'", "'2026-02'", str(JAN), str(MAR), f"'{JOB}'"],
        },
    )
    with stub:
        assert queries.start(query) == "e-1"
    stub.assert_no_pending_responses()


def _status(
    state: str, reason: str | None = None, *, workgroup: str = "jobsched-archive", query: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"State": state}
    if reason:
        status["StateChangeReason"] = reason
    built = runs_query(window(owner="o'brien"))
    return {
        "QueryExecution": {
            "QueryExecutionId": "e-1",
            "Query": built.sql if query is None else query,
            "WorkGroup": workgroup,
            "ExecutionParameters": [athena_literal(v) for v in built.parameters],
            "Status": status,
        }
    }


def _page(rows: list[list[str | None]], token: str | None = None) -> dict[str, Any]:
    page: dict[str, Any] = {
        "ResultSet": {
            "Rows": [{"Data": [{} if v is None else {"VarCharValue": v} for v in row]} for row in rows],
            "ResultSetMetadata": {
                "ColumnInfo": [
                    {"Name": "job_id", "Type": "varchar"},
                    {"Name": "scheduled_for", "Type": "bigint"},
                ]
            },
        }
    }
    if token:
        page["NextToken"] = token
    return page


def test_the_athena_adapter_reports_running_then_failed_then_every_page_of_rows() -> None:
    queries, stub = _athena()
    stub.add_response("get_query_execution", _status("QUEUED"), {"QueryExecutionId": "e-1"})
    stub.add_response(
        "get_query_execution", _status("FAILED", "Query exhausted resources"), {"QueryExecutionId": "e-1"}
    )
    stub.add_response("get_query_execution", _status("SUCCEEDED"), {"QueryExecutionId": "e-1"})
    stub.add_response(
        "get_query_results",
        _page([["job_id", "scheduled_for"], [JOB, str(MAR - 1)]], token="t-2"),
        {"QueryExecutionId": "e-1"},
    )
    stub.add_response(
        "get_query_results", _page([[JOB, str(JAN)]]), {"QueryExecutionId": "e-1", "NextToken": "t-2"}
    )
    with stub:
        assert queries.result("e-1").state is QueryState.RUNNING
        failed = queries.result("e-1")
        assert (failed.state, failed.reason) == (QueryState.FAILED, "Query exhausted resources")
        done = queries.result("e-1")
    assert done.state is QueryState.SUCCEEDED
    assert done.owner_partition == failed.owner_partition == "o%27brien"
    assert done.rows == [{"job_id": JOB, "scheduled_for": MAR - 1}, {"job_id": JOB, "scheduled_for": JAN}]
    stub.assert_no_pending_responses()


def test_the_athena_adapter_names_an_unknown_query() -> None:
    queries, stub = _athena()
    stub.add_client_error(
        "get_query_execution", "InvalidRequestException", "QueryExecution e-9 was not found"
    )
    with stub, pytest.raises(UnknownQuery):
        queries.result("e-9")


def test_the_fake_answers_running_then_only_the_owners_rows_once_each_newest_first() -> None:
    fake = MemoryArchiveQueries(polls_before_done=1)
    fake.add("team-a", {"job_id": JOB, "scheduled_for": JAN, "status": "succeeded"})
    fake.add(
        "team-a", {"job_id": JOB, "scheduled_for": JAN, "status": "succeeded"}
    )  # a bisected batch's copy
    fake.add("team-a", {"job_id": JOB, "scheduled_for": JAN + DAY_MS, "status": "dead"})
    fake.add("team-b", {"job_id": JOB, "scheduled_for": JAN + 2 * DAY_MS, "status": "dead"})
    query_id = fake.start(runs_query(window()))
    assert fake.result(query_id).state is QueryState.RUNNING
    done = fake.result(query_id)
    assert [r["scheduled_for"] for r in done.rows] == [JAN + DAY_MS, JAN]
    with pytest.raises(UnknownQuery):
        fake.result("q-404")


@pytest.mark.parametrize(
    "asked",
    [
        window(),
        window(owner="arn:aws:iam::1:role/o'x", job_id=JOB, status="dead", kind="backfill", limit=1000),
        window(status="retrying", limit=7),
        window(kind="manual"),
    ],
)
def test_a_runs_query_gives_back_its_window(asked: RunsWindow) -> None:
    built = runs_query(asked)
    assert window_of(built.sql, built.parameters) == asked


def test_a_query_runs_query_did_not_build_has_no_window() -> None:
    built = runs_query(window(job_id=JOB, status="dead"))
    sql, values = built.sql, list(built.parameters)
    tampered = [
        (sql.replace("copy_rank = 1", "copy_rank >= 1"), values),  # the text changed
        (sql + " UNION SELECT * FROM runs LIMIT 1", values),  # text appended after the LIMIT
        (sql, [*values, "extra"]),  # one value too many
        (sql, values[:-1]),  # one too few
        (sql, ["_none", *values[1:]]),  # the partition of rows that name no owner
        (sql, [values[0], "2020-01", *values[2:]]),  # a month outside the window
        (sql, [*values[:3], str(values[3]), *values[4:]]),  # since as text
        ("SELECT * FROM runs WHERE owner = ?", values[:1]),  # an operator's query
    ]
    for text, parameters in tampered:
        assert window_of(text, parameters) is None, (text, parameters)


def test_the_athena_adapter_reports_the_window_and_none_for_an_operators_query_in_the_workgroup() -> None:
    queries, stub = _athena()
    stub.add_response("get_query_execution", _status("QUEUED"), {"QueryExecutionId": "e-1"})
    operator = "SELECT /* jobsched runs_query */ * FROM runs WHERE owner = ?"
    stub.add_response("get_query_execution", _status("QUEUED", query=operator), {"QueryExecutionId": "e-1"})
    with stub:
        assert queries.result("e-1").window == window(owner="o'brien")
        other = queries.result("e-1")
    assert other.window is None and other.owner_partition is None


def test_a_succeeded_query_whose_results_are_gone_is_no_longer_known() -> None:
    """The result bucket keeps a query's results 7 days and Athena its history longer: a poll after that is a
    query no longer kept (the API's 404), not an internal error."""
    queries, stub = _athena()
    stub.add_response("get_query_execution", _status("SUCCEEDED"), {"QueryExecutionId": "e-1"})
    stub.add_client_error(
        "get_query_results", "InvalidRequestException", "Unable to read the query's results: NoSuchKey"
    )
    with stub, pytest.raises(UnknownQuery):
        queries.result("e-1")
