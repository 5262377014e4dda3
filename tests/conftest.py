"""Shared fixtures: fake credentials, then mock_aws, then resources from the shared definitions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from jobsched.aws import Aws, provision
from jobsched.observability import metrics
from jobsched.settings import Settings
from tests.support.aws import set_fake_credentials

pytest_plugins = [
    "tests.support.worker"
]  # the worker tests' fixtures (clock, waiter, record, calls, make_run)


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
