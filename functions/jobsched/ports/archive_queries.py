"""The archive's query port (design §11): start a SQL query over the archived runs, then read its state and rows.

A query is an :class:`ArchiveQuery`: SQL with ``?`` placeholders and the values that fill them, in order (built by
``jobsched.domain.archive_queries.runs_query``; no value is ever formatted into the SQL). Athena runs it
asynchronously (``jobsched.aws.athena``); the in-memory fake (``jobsched.memory.archive_queries``) answers from rows
it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


@dataclass(frozen=True)
class RunsWindow:
    """Which archived runs a caller asks for: ``owner`` (always the caller's, never a request field), ``scheduled_for``
    in ``[since_ms, until_ms)`` (epoch ms, UTC), optionally one ``job_id``, ``status`` or ``kind`` (their wire
    values), newest first, at most ``limit`` rows."""

    owner: str
    since_ms: int
    until_ms: int
    job_id: str | None = None
    status: str | None = None
    kind: str | None = None
    limit: int = 100


@dataclass(frozen=True)
class ArchiveQuery:
    """SQL over the table ``runs`` with ``?`` placeholders, the ``parameters`` that fill them in order (str or int),
    and the ``window`` it answers."""

    sql: str
    parameters: tuple[str | int, ...]
    window: RunsWindow


class QueryState(StrEnum):
    """A started query's state: ``running`` (queued or running), ``succeeded`` (rows ready), ``failed``."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True)
class QueryResult:
    """A query's ``state``; its ``rows`` (archived runs as ``domain.archive.archive_row`` gives them, newest first)
    once ``succeeded``; the engine's ``reason`` when ``failed``; ``owner_partition``: the ``owner`` partition value
    the query reads (its first parameter, as the engine keeps it), None for a query no ``runs_query`` built;
    ``window``: the :class:`RunsWindow` the query answers (``domain.archive_queries.window_of``), None for a query
    no ``runs_query`` built. The API answers a query only to the owner of its window."""

    state: QueryState
    rows: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    owner_partition: str | None = None
    window: RunsWindow | None = None


class UnknownQuery(KeyError):
    """No query of that id exists (or it is no longer kept)."""


class ArchiveQueries(Protocol):
    """Runs queries over the archive (Athena; an in-memory fake)."""

    def start(self, query: ArchiveQuery) -> str:
        """Start ``query``; returns its id (Athena's ``QueryExecutionId``). Raises the engine's error when refused."""
        ...

    def result(self, query_id: str) -> QueryResult:
        """The state of query ``query_id`` and, when it succeeded, its rows. Raises ``UnknownQuery``."""
        ...
