"""The contract suites' backends: each suite's store fixture is parametrized over ``BACKENDS`` and built by
``adapter_on``; the SQLite database is a fresh file per test, closed after it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobsched.aws.clients import Aws
from jobsched.settings import Settings
from jobsched.sqlite.database import SqliteDatabase

BACKENDS = ["memory", "dynamodb", "sqlite"]
"""What every contract suite runs against: the in-memory fake, the DynamoDB adapter on moto, the SQLite one."""


def adapter_on(
    request: pytest.FixtureRequest,
    memory: Callable[[], Any],
    sqlite: Callable[[SqliteDatabase], Any],
    dynamodb: Callable[[Aws, Settings], Any],
) -> Any:
    """The adapter under test for the parametrized fixture's ``request.param`` (one of ``BACKENDS``): made by
    ``memory()``, ``sqlite(<the test's sqlite_database>)`` or ``dynamodb(<the moto aws>, <its settings>)``."""
    if request.param == "memory":
        return memory()
    if request.param == "sqlite":
        return sqlite(request.getfixturevalue("sqlite_database"))
    return dynamodb(request.getfixturevalue("aws"), request.getfixturevalue("settings"))


def on_table(adapter: Callable[[Any], Any], setting: str) -> Callable[[Aws, Settings], Any]:
    """``adapter_on``'s ``dynamodb`` for an adapter of one table: ``adapter`` on the moto table named by the
    setting ``setting`` (``"jobs_table"``, ``"runs_table"``)."""
    return lambda aws, settings: adapter(aws.table(getattr(settings, setting)))


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[SqliteDatabase]:
    """A new ``SqliteDatabase`` in ``tmp_path`` (the file local mode keeps under its data dir)."""
    database = SqliteDatabase(tmp_path / "jobsched.sqlite3")
    yield database
    database.close()
