"""Shared fixtures: fake credentials, then mock_aws, then resources from the shared definitions.

Unit and contract tests run with the network blocked (pytest-socket): a test under ``tests/unit`` or
``tests/contract`` that opens an internet socket fails with ``SocketBlockedError`` (Unix sockets stay allowed:
``--allow-unix-socket`` in pyproject's addopts; asyncio's self-pipe is one). Tests that need a real socket (a
local HTTP server, local mode, the browser) live under ``tests/integration`` or ``tests/e2e``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from jobsched.aws.clients import Aws, provision
from jobsched.observability import metrics
from jobsched.settings import Settings
from tests.support.aws import set_fake_credentials

pytest_plugins = [
    "tests.support.worker"
]  # the worker tests' fixtures (clock, waiter, record, calls, make_run)


OFFLINE = tuple(Path(__file__).parent / folder for folder in ("unit", "contract"))
"""Where tests run with sockets disabled."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under :data:`OFFLINE` ``disable_socket`` (pytest-socket then blocks its sockets)."""
    for item in items:
        if item.path.is_relative_to(OFFLINE[0]) or item.path.is_relative_to(OFFLINE[1]):
            item.add_marker(pytest.mark.disable_socket)


@pytest.fixture(autouse=True)
def _fresh_metrics() -> None:
    """The Powertools metric set is process-wide: no test sees another's values."""
    metrics.clear_metrics()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials so nothing can reach a real account."""
    set_fake_credentials(monkeypatch)


@pytest.fixture
def aws(aws_credentials: None) -> Iterator[Aws]:
    """boto3 clients inside an in-process moto."""
    with mock_aws():
        yield Aws()


@pytest.fixture
def resource_env(aws: Aws) -> dict[str, str]:
    """Every table, queue and topic, created from ``jobsched.resources``; returns their env vars."""
    return provision(aws, prefix="test")


@pytest.fixture
def settings(resource_env: dict[str, str]) -> Settings:
    """Settings wired to the moto resources (other knobs at their defaults)."""
    return Settings(**{k.lower(): v for k, v in resource_env.items()})
