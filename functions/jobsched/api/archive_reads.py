"""The API's reads of the run archive (design §11): a window of runs older than the runs table's retention is
answered from the archive, for the caller's owner only.

:meth:`ArchiveReads.start` starts the owner's query (``domain.archive_queries.runs_query``: the owner a partition
predicate and a parameter, never a request field) and answers ``{"query_id", "status": "running"}`` (HTTP 202,
``Location: /archive/queries/{query_id}``), or the rows at once when the engine is done (local mode's DuckDB).
:meth:`ArchiveReads.poll` answers a query's state and rows only to the owner of its window (the engine keeps the
query's text and parameters, ``domain.archive_queries.window_of``: no key of our own binds it): any other caller,
and an unknown id, get 404. A succeeded query's rows are merged with the runs table's rows of the same window
(``domain.archive_queries.merged_rows``: runs before the retention that TTL has not deleted yet, and backfills of
old fires, are still in the table), each marked ``archived``. Without
an archive (``queries`` None) a window before the retention is answered ``HistoryGone`` (410, code
``beyond_retention``, field ``since``), saying where the history went.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from jobsched.api.exceptions import ArchiveQueryNotFound, CursorNotFound, HistoryGone, InvalidInput
from jobsched.api.runs_listing import require_offsets
from jobsched.clock import to_ms
from jobsched.domain.archive_queries import (
    ARCHIVE_START_MS,
    ArchiveWindowError,
    merged_rows,
    reaches_archive,
    retention_floor,
    runs_query,
)
from jobsched.models import RunKind, RunStatus
from jobsched.ports.archive_queries import ArchiveQueries, QueryResult, QueryState, RunsWindow, UnknownQuery
from jobsched.ports.runs import RunRow

RecentRows = Callable[[RunsWindow], Sequence[RunRow]]
"""The runs table's rows of a window (its owner's only, newest first, at most its ``limit``)."""

QUERIES_PATH = "/archive/queries/"
NO_ARCHIVE = (
    "runs scheduled more than {days} days ago left the runs table (retention_days) and this deployment has no "
    "archive to answer from: ask from {floor} on, or deploy with the archive (docs/deploy.md, History beyond "
    "retention)"
)


ARCHIVE_NOTE = (
    "A `since` before the runs table's retention (`retention_days`), or no `since` and an `until` at or before it, "
    "is answered from the archive, for the "
    "caller's owner only: `202` with a `query_id` and `Location` to poll (`GET /archive/queries/{query_id}`), or "
    "`200` with the runs at once where the engine answers at once (local mode). The answer holds the window's runs "
    "from the archive and from the runs table, each once (`archived` says which), at most `limit`, in one page "
    "without a cursor: for older runs, ask again with `until`. Without an archive, 410 `beyond_retention` "
    "(field `since`) says where the history went."
)
"""The OpenAPI description of a runs listing's answer from the archive."""
HISTORY_GONE = (
    "The window (`since`, or `until` without `since`) is before the retention and this deployment keeps no "
    "archive (field `since`)"
)
"""The OpenAPI description of the 410 of a window before the retention with no archive."""
ARCHIVE_ACCEPTED = "Answered from the archive: poll `Location` until `status` is no longer `running`"
"""The OpenAPI description of the 202 of a window answered from the archive."""


class ArchiveQueryStatus(BaseModel):
    """The API's body for an archive query (``GET /archive/queries/{query_id}``, and the 202 of a runs listing
    whose ``since`` is before the retention)."""

    query_id: str = Field(description="poll `GET /archive/queries/{query_id}` with it")
    status: QueryState = Field(description="running, succeeded or failed")
    runs: list[dict[str, Any]] | None = Field(
        None,
        description="once succeeded: the caller's runs of the window, newest `scheduled_for` first, from the archive "
        "and from the runs table (each once; `archived` says which), as archived (instants in epoch ms, UTC), at "
        "most `limit`; one page without a cursor: for older runs, ask again with `until` at the oldest",
    )
    reason: str | None = Field(None, description="once failed: why, as the query engine says")


@dataclass(frozen=True)
class ArchiveAnswer:
    """What the API answers for an archive query: ``status`` (``running``, ``succeeded``, ``failed``),
    ``query_id``, ``runs`` (archived rows, epoch ms, newest first) once succeeded, ``reason`` when failed."""

    query_id: str
    status: QueryState
    runs: list[dict[str, Any]] | None = None
    reason: str | None = None

    @property
    def location(self) -> str:
        """Where to poll: ``/archive/queries/{query_id}``."""
        return QUERIES_PATH + self.query_id

    def model(self) -> ArchiveQueryStatus:
        """The answer as the API's :class:`ArchiveQueryStatus`."""
        return ArchiveQueryStatus(
            query_id=self.query_id, status=self.status, runs=self.runs, reason=self.reason
        )

    def body(self) -> dict[str, Any]:
        """The JSON body: ``query_id`` and ``status``, ``runs`` when succeeded, ``reason`` when failed."""
        body: dict[str, Any] = {"query_id": self.query_id, "status": self.status.value}
        if self.runs is not None:
            body["runs"] = self.runs
        if self.reason is not None:
            body["reason"] = self.reason
        return body


class ArchiveReads:
    """Archive reads for the API: ``queries`` (None: no archive configured), ``retention_days`` of the runs
    table, and ``recent``: the runs table's rows of a window, merged into a succeeded query's answer (None: the
    archive's rows alone)."""

    def __init__(
        self, queries: ArchiveQueries | None, *, retention_days: int, recent: RecentRows | None = None
    ) -> None:
        self._queries = queries
        self._retention_days = retention_days
        self._recent = recent

    def reaches(self, since_ms: int | None, now_ms: int, until_ms: int | None = None) -> bool:
        """True when the window ``[since_ms, until_ms)`` (epoch ms; None: open) reaches before the retention: the
        archive answers it (``reaches_archive``)."""
        return reaches_archive(since_ms, now_ms, self._retention_days, until_ms)

    def window(
        self,
        owner: str,
        *,
        job_id: str | None,
        status: RunStatus | None,
        kind: RunKind | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        now_ms: int,
        cursor: str | None = None,
    ) -> ArchiveAnswer | None:
        """The archive's answer to ``owner``'s listing of runs in ``[since, until)`` (``until`` None: now, at
        ``now_ms``, epoch ms) when it reaches before the retention (:meth:`reaches`: ``since`` before it, or no
        ``since`` and ``until`` at or before it, then from ``ARCHIVE_START_MS``), started as :meth:`start`; None
        when the runs table answers it. Raises ``InvalidInput`` naming ``since``/``until`` without an offset;
        ``CursorNotFound`` for any cursor (an archive answer is one page and issues none: older runs are asked for
        with ``until``); else as :meth:`start`."""
        require_offsets(since=since, until=until)
        since_ms = None if since is None else to_ms(since)
        until_ms = None if until is None else to_ms(until)
        if not self.reaches(since_ms, now_ms, until_ms):
            return None
        if cursor is not None:
            raise CursorNotFound()
        window = RunsWindow(
            owner,
            ARCHIVE_START_MS if since_ms is None else since_ms,
            now_ms if until_ms is None else until_ms,
            job_id=job_id,
            status=None if status is None else status.value,
            kind=None if kind is None else kind.value,
            limit=limit,
        )
        return self.start(window, now_ms=now_ms)

    def start(self, window: RunsWindow, *, now_ms: int) -> ArchiveAnswer:
        """Start the query for ``window`` (its owner the caller's). Raises ``InvalidInput`` naming the field for a
        malformed window; ``HistoryGone`` when no archive is configured."""
        if self._queries is None:
            floor = retention_floor(now_ms, self._retention_days)
            message = NO_ARCHIVE.format(days=self._retention_days, floor=_iso(floor))
            raise HistoryGone(message)
        try:
            query = runs_query(window)
        except ArchiveWindowError as error:
            raise InvalidInput(error.field, str(error)) from error
        query_id = self._queries.start(query)
        return self._answer(query_id, self._queries.result(query_id), window)

    def poll(self, owner: str, query_id: str) -> ArchiveAnswer:
        """The state of ``query_id`` for ``owner``. Raises ``ArchiveQueryNotFound`` for an unknown id, a query of
        another owner and one no ``runs_query`` built, and when no archive is configured."""
        missing = ArchiveQueryNotFound()
        if self._queries is None:
            raise missing
        try:
            result = self._queries.result(query_id)
        except UnknownQuery:
            raise missing from None
        if result.window is None or result.window.owner != owner:
            raise missing
        return self._answer(query_id, result, result.window)

    def _answer(self, query_id: str, result: QueryResult, window: RunsWindow) -> ArchiveAnswer:
        """The answer of ``result``; once succeeded, its rows merged with the runs table's of ``window``."""
        if result.state is not QueryState.SUCCEEDED:
            return ArchiveAnswer(query_id, result.state, reason=result.reason)
        recent = self._recent(window) if self._recent is not None else []
        return ArchiveAnswer(query_id, result.state, runs=merged_rows(result.rows, recent, window.limit))


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
