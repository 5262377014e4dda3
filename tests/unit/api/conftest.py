"""Fixtures for the API's use cases (``JobService``) on the in-memory fakes, through the Lambda handler: no moto.

Each test gets fresh fakes (they cost nothing to build), so a test may replace a store's method for a failure
path without other tests seeing it.
"""

from __future__ import annotations

import pytest

from jobsched.clock import FakeClock
from tests.support.api import NOW_MS, Http, memory_api
from tests.support.backends import Backend, memory_backend


@pytest.fixture
def backend() -> Backend:
    """The fakes of ``jobsched.memory``: one job store, run store, queue, CONTROL store and idempotency records."""
    return memory_backend()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def http(backend: Backend, clock: FakeClock) -> Http:
    """The handler on ``JobService`` over the module's fakes, a fake clock, and two fresh teams."""
    return Http(memory_api(backend), backend.settings, clock, backend=backend)
