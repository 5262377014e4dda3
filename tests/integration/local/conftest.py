"""Fixtures shared by the local-mode tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from jobsched.observability import logger


@pytest.fixture
def quiet_logs() -> Iterator[None]:
    """Local mode sends the structured logs to its data dir; give them back to the suite afterwards."""
    std = logging.getLogger(logger.name)
    handlers, level = list(std.handlers), std.level
    yield
    for handler in list(std.handlers):
        std.removeHandler(handler)
        handler.close()
    for handler in handlers:
        std.addHandler(handler)
    std.setLevel(level)
