"""The archive's queries on Athena (design §11): ``ports.archive_queries.ArchiveQueries`` with boto3's ``athena``
client: ``StartQueryExecution`` in the stack's workgroup (its result location and scan limit), with the query's
values as ``ExecutionParameters``; ``GetQueryExecution`` for the state; ``GetQueryResults`` (paged) for the rows.

Athena substitutes each execution parameter as a SQL literal ("Use execution parameters", Athena User Guide; a
string's value carries its own single quotes), so :func:`athena_literal` renders every value as exactly one
literal: an int as digits, a string quoted with each ``'`` doubled. No value is ever part of the query's text.
"""

from __future__ import annotations

from typing import Any

from jobsched.domain.archive_queries import RUNS_QUERY_PREFIX, rows_of_strings
from jobsched.ports.archive_queries import ArchiveQuery, QueryResult, QueryState, UnknownQuery

_STATES = {
    "QUEUED": QueryState.RUNNING,
    "RUNNING": QueryState.RUNNING,
    "SUCCEEDED": QueryState.SUCCEEDED,
    "FAILED": QueryState.FAILED,
    "CANCELLED": QueryState.FAILED,
}


def athena_literal(value: str | int) -> str:
    """``value`` as one Athena SQL literal: an int's digits, a string in single quotes with ``'`` doubled.
    Raises ``TypeError`` for any other type (a bool included)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"no Athena literal for {type(value).__name__}")
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("'", "''") + "'"


class AthenaArchiveQueries:
    """Archive queries on Athena: ``client`` (boto3 ``athena``), the ``workgroup`` (which holds the result location
    and the per-query scan limit) and the Glue ``database`` of the table ``runs``."""

    def __init__(self, client: Any, *, workgroup: str, database: str) -> None:
        self._client = client
        self._workgroup = workgroup
        self._database = database

    def start(self, query: ArchiveQuery) -> str:
        """Start ``query``; its ``QueryExecutionId``. Raises botocore's ``ClientError`` when Athena refuses it."""
        request: dict[str, Any] = {
            "QueryString": query.sql,
            "QueryExecutionContext": {"Database": self._database},
            "WorkGroup": self._workgroup,
        }
        if query.parameters:
            request["ExecutionParameters"] = [athena_literal(value) for value in query.parameters]
        return str(self._client.start_query_execution(**request)["QueryExecutionId"])

    def result(self, query_id: str) -> QueryResult:
        """The query's state, and its rows (every page) once it succeeded. Raises ``UnknownQuery`` when Athena
        knows no such id (``InvalidRequestException``)."""
        try:
            execution = self._client.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]
        except self._client.exceptions.InvalidRequestException as error:
            raise UnknownQuery(query_id) from error
        if execution.get("WorkGroup") != self._workgroup:
            raise UnknownQuery(query_id)
        owner = _owner_of(execution)
        status = execution["Status"]
        state = _STATES.get(status["State"], QueryState.FAILED)
        if state is QueryState.FAILED:
            reason = status.get("StateChangeReason") or status["State"].lower()
            return QueryResult(state, reason=reason, owner_partition=owner)
        if state is QueryState.RUNNING:
            return QueryResult(state, owner_partition=owner)
        columns: list[str] = []
        rows: list[list[str | None]] = []
        request: dict[str, Any] = {"QueryExecutionId": query_id}
        while True:
            page = self._client.get_query_results(**request)
            if not columns:
                columns = [c["Name"] for c in page["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]]
            for row in page["ResultSet"]["Rows"]:
                values = [cell.get("VarCharValue") for cell in row["Data"]]
                if not rows and values == columns and "NextToken" not in request:
                    continue  # a SELECT's first row is its header
                rows.append(values)
            if not page.get("NextToken"):
                break
            request["NextToken"] = page["NextToken"]
        return QueryResult(state, rows_of_strings(columns, rows), owner_partition=owner)


def _owner_of(execution: dict[str, Any]) -> str | None:
    """The owner partition a query reads: its first execution parameter (a string literal) when it is a
    ``runs_query`` (its text begins with ``RUNS_QUERY_PREFIX``), else None."""
    parameters = execution.get("ExecutionParameters") or []
    if not str(execution.get("Query", "")).startswith(RUNS_QUERY_PREFIX) or not parameters:
        return None
    literal = str(parameters[0])
    if len(literal) < 2 or literal[0] != "'" or literal[-1] != "'":
        return None
    return literal[1:-1].replace("''", "'")
