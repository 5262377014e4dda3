"""The archive's queries on Athena (design §11): ``ports.archive_queries.ArchiveQueries`` with boto3's ``athena``
client: ``StartQueryExecution`` in the stack's workgroup (its result location and scan limit), with the query's
values as ``ExecutionParameters``; ``GetQueryExecution`` for the state; ``GetQueryResults`` (paged) for the rows.

Athena substitutes each execution parameter as a SQL literal ("Use execution parameters", Athena User Guide; a
string's value carries its own single quotes), so :func:`athena_literal` renders every value as exactly one
literal: an int as digits, a string quoted with each ``'`` doubled. No value is ever part of the query's text.
"""

from __future__ import annotations

from typing import Any

from jobsched.domain.archive_queries import rows_of_strings
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
            status = self._client.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]
        except self._client.exceptions.InvalidRequestException as error:
            raise UnknownQuery(query_id) from error
        state = _STATES.get(status["State"], QueryState.FAILED)
        if state is QueryState.FAILED:
            return QueryResult(state, reason=status.get("StateChangeReason") or status["State"].lower())
        if state is QueryState.RUNNING:
            return QueryResult(state)
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
        return QueryResult(state, rows_of_strings(columns, rows))
