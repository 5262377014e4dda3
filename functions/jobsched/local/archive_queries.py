"""Local mode's archive queries (design §11): ``ports.archive_queries.ArchiveQueries`` over the local archive's
files, run synchronously with DuckDB (``local.archive.LocalArchive.query``, the view ``runs``): a started query is
already done, so the API answers local mode's windows at once."""

from __future__ import annotations

import itertools

from jobsched.domain.archive import owner_of_partition
from jobsched.domain.archive_queries import rows_of_strings, window_of
from jobsched.local.archive import ArchiveQueryError, LocalArchive
from jobsched.ports.archive_queries import ArchiveQuery, QueryResult, QueryState, UnknownQuery


class LocalArchiveQueries:
    """Archive queries on ``archive``; results are kept in this process (the last ``keep`` queries)."""

    def __init__(self, archive: LocalArchive, *, keep: int = 100) -> None:
        self._archive = archive
        self._results: dict[str, QueryResult] = {}
        self._ids = itertools.count(1)
        self._keep = keep

    def start(self, query: ArchiveQuery) -> str:
        """Run ``query`` now; its id (``local-<n>``). A failure (bad SQL, DuckDB missing) is kept as ``failed``."""
        query_id = f"local-{next(self._ids)}"
        owner = str(query.parameters[0]) if query.parameters else None
        window = window_of(query.sql, query.parameters)
        try:
            columns, rows = self._archive.query(query.sql, _as_read(query.parameters))
            result = QueryResult(
                QueryState.SUCCEEDED, rows_of_strings(columns, rows), owner_partition=owner, window=window
            )
        except ArchiveQueryError as error:
            result = QueryResult(QueryState.FAILED, reason=str(error), owner_partition=owner, window=window)
        self._results[query_id] = result
        while len(self._results) > self._keep:
            del self._results[next(iter(self._results))]
        return query_id

    def result(self, query_id: str) -> QueryResult:
        """The result of query ``query_id``. Raises ``UnknownQuery``."""
        try:
            return self._results[query_id]
        except KeyError:
            raise UnknownQuery(query_id) from None


def _as_read(parameters: tuple[str | int, ...]) -> list[str | int | None]:
    """``parameters`` with the first (the ``owner`` partition value, percent-encoded as in the object keys)
    decoded: DuckDB's hive partitioning gives the column the decoded owner (``local.archive``)."""
    values: list[str | int | None] = list(parameters)
    if values and isinstance(values[0], str):
        values[0] = owner_of_partition(values[0])
    return values
