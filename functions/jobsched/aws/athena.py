"""The archive's queries on Athena (design §11): ``ports.archive_queries.ArchiveQueries`` with boto3's ``athena``
client: ``StartQueryExecution`` in the stack's workgroup (its result location and scan limit), with the query's
values as ``ExecutionParameters``; ``GetQueryExecution`` for the state; ``GetQueryResults`` (paged) for the rows.

Athena substitutes each execution parameter as a SQL literal ("Use execution parameters", Athena User Guide; a
string's value carries its own single quotes), so :func:`athena_literal` renders every value as exactly one
literal: an int as digits, a string quoted with each ``'`` doubled. No value is ever part of the query's text.
"""

from __future__ import annotations

import re
from typing import Any

from jobsched.domain.archive import owner_partition
from jobsched.domain.archive_queries import rows_of_strings, window_of
from jobsched.ports.archive_queries import ArchiveQuery, QueryResult, QueryState, RunsWindow, UnknownQuery

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


def value_of_literal(literal: str) -> str | int | None:
    """The value :func:`athena_literal` rendered as ``literal`` (digits: an int; single-quoted, ``''`` for each
    ``'``: a str); None for any other text."""
    if re.fullmatch(r"-?[0-9]{1,19}", literal):
        return int(literal)
    quoted = re.fullmatch(r"'((?:[^']|'')*)'", literal, flags=re.DOTALL)
    return quoted[1].replace("''", "'") if quoted else None


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
        knows no such id, or no longer has its results (``InvalidRequestException``: the result bucket keeps them
        7 days)."""
        try:
            execution = self._client.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]
        except self._client.exceptions.InvalidRequestException as error:
            raise UnknownQuery(query_id) from error
        if execution.get("WorkGroup") != self._workgroup:
            raise UnknownQuery(query_id)
        window = _window_of(execution)
        owner = None if window is None else owner_partition(window.owner)
        status = execution["Status"]
        state = _STATES.get(status["State"], QueryState.FAILED)
        if state is QueryState.FAILED:
            reason = status.get("StateChangeReason") or status["State"].lower()
            return QueryResult(state, reason=reason, owner_partition=owner, window=window)
        if state is QueryState.RUNNING:
            return QueryResult(state, owner_partition=owner, window=window)
        columns: list[str] = []
        rows: list[list[str | None]] = []
        request: dict[str, Any] = {"QueryExecutionId": query_id}
        while True:
            try:
                page = self._client.get_query_results(**request)
            except self._client.exceptions.InvalidRequestException as error:
                raise UnknownQuery(query_id) from error  # its results expired from the result bucket
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
        return QueryResult(state, rows_of_strings(columns, rows), owner_partition=owner, window=window)


def _window_of(execution: dict[str, Any]) -> RunsWindow | None:
    """The window a query execution answers (``domain.archive_queries.window_of`` of its text and execution
    parameters), None for a query no ``runs_query`` built."""
    values = [value_of_literal(str(text)) for text in execution.get("ExecutionParameters") or []]
    if any(value is None for value in values):
        return None
    return window_of(str(execution.get("Query", "")), [value for value in values if value is not None])
