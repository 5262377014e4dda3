"""The contract suites' SQLite database: a fresh file per test, closed after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobsched.sqlite.database import SqliteDatabase


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[SqliteDatabase]:
    """A new ``SqliteDatabase`` in ``tmp_path`` (the file local mode keeps under its data dir)."""
    database = SqliteDatabase(tmp_path / "jobsched.sqlite3")
    yield database
    database.close()
