"""End-to-end fixtures: ``jobsched local`` processes (see ``support.py``), stopped at the end of each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.support import LocalProcess


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Callable[..., LocalProcess]]:
    """Start ``jobsched local`` processes (same data dir unless given); all are stopped at the end."""
    started: list[LocalProcess] = []

    def start(*args: str, data_dir: Path | None = None) -> LocalProcess:
        process = LocalProcess(data_dir or tmp_path / "data", *args)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait(timeout=10)
