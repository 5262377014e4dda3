"""Fixtures for the API's use cases (``JobService``) on the in-memory fakes, through the Lambda handler: no moto.

Each test gets fresh fakes (they cost nothing to build), so a test may replace a store's method for a failure
path without other tests seeing it.
"""

from __future__ import annotations

import pytest

from jobsched.clock import FakeClock
from tests.support.api import NOW_MS, Http, memory_api
from tests.support.backends import memory_backend


@pytest.fixture
def http() -> Http:
    """The handler on ``JobService`` over fresh fakes (``http.backend``), a fake clock at ``NOW_MS``
    (``http.clock``), and two fresh teams."""
    backend = memory_backend()
    return Http(memory_api(backend), backend.settings, FakeClock(NOW_MS), backend=backend)
