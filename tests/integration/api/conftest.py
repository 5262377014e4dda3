"""Fixtures for the API through its Lambda handler, against moto: the DynamoDB/SQS adapters and a few cases end
to end. (The use cases' logic runs on the fakes in ``tests/unit/api``; the harness is ``tests.support.api``.)

One moto deployment per test module (provisioning costs ~0.5 s, so not per test); each test gets owners of
its own (unique role names), so tests never see each other's jobs, names or idempotency keys.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobsched.aws.clients import Aws
from jobsched.clock import FakeClock
from jobsched.settings import Settings
from tests.support.api import NOW_MS, Http, moto_api
from tests.support.aws import moto_deployment


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[Aws, Settings]]:
    """Every table, queue and topic (from ``jobsched.resources``) in a moto shared by the module's tests."""
    with moto_deployment("api") as deployed:
        yield deployed


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def http(deployment: tuple[Aws, Settings], clock: FakeClock) -> Http:
    """The handler wired to the module's moto deployment, a fake clock, and two fresh teams."""
    aws, settings = deployment
    return Http(moto_api(aws), settings, clock, aws=aws)
