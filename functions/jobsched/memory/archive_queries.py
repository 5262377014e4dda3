"""An in-memory ``ports.archive_queries.ArchiveQueries`` for tests: archived rows held per owner, a query answered
by filtering them by its ``window`` (as the SQL of ``domain.archive_queries.runs_query`` does) after
``polls_before_done`` reads of its state, so a caller sees ``running`` first."""

from __future__ import annotations

import itertools
from typing import Any

from jobsched.domain.archive import DEDUPE_KEY, owner_partition
from jobsched.domain.archive_queries import window_of
from jobsched.ports.archive_queries import ArchiveQuery, QueryResult, QueryState, UnknownQuery


class MemoryArchiveQueries:
    """Archive queries over ``rows`` given by :meth:`add` (``archive_row`` dicts, each with its owner)."""

    def __init__(self, *, polls_before_done: int = 1) -> None:
        self._rows: list[tuple[str, dict[str, Any]]] = []
        self._queries: dict[str, tuple[ArchiveQuery, int]] = {}
        self._ids = itertools.count(1)
        self._polls = polls_before_done
        self.started: list[ArchiveQuery] = []

    def add(self, owner: str, row: dict[str, Any]) -> None:
        """Archive ``row`` (``domain.archive.archive_row``'s shape) under ``owner``."""
        self._rows.append((owner, dict(row)))

    def start(self, query: ArchiveQuery) -> str:
        """Keep ``query``; its id (``q-<n>``)."""
        query_id = f"q-{next(self._ids)}"
        self._queries[query_id] = (query, 0)
        self.started.append(query)
        return query_id

    def result(self, query_id: str) -> QueryResult:
        """``running`` for the first ``polls_before_done`` reads, then the window's rows. Raises ``UnknownQuery``."""
        if query_id not in self._queries:
            raise UnknownQuery(query_id)
        query, polls = self._queries[query_id]
        if polls < self._polls:
            self._queries[query_id] = (query, polls + 1)
            return QueryResult(
                QueryState.RUNNING,
                owner_partition=str(query.parameters[0]),
                window=window_of(query.sql, query.parameters),
            )
        window = query.window
        seen: dict[tuple[Any, ...], dict[str, Any]] = {}
        for owner, row in self._rows:
            if owner != window.owner or not window.since_ms <= row["scheduled_for"] < window.until_ms:
                continue
            if any(
                value is not None and row.get(name) != value
                for name, value in (
                    ("job_id", window.job_id),
                    ("status", window.status),
                    ("kind", window.kind),
                )
            ):
                continue
            seen.setdefault(tuple(row[k] for k in DEDUPE_KEY), row)
        ordered = sorted(seen.values(), key=lambda r: (-r["scheduled_for"], r["job_id"]))
        return QueryResult(
            QueryState.SUCCEEDED,
            ordered[: window.limit],
            owner_partition=owner_partition(window.owner),
            window=window_of(query.sql, query.parameters),
        )
