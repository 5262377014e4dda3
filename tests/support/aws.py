"""Fake AWS for tests: credentials that can reach no account, and a moto deployment of every resource."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from jobsched.aws.clients import Aws, provision
from jobsched.settings import Settings

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def set_fake_credentials(patch: pytest.MonkeyPatch, *, session_token: bool = True) -> None:
    """Point boto3 at fake credentials (without a session token when ``session_token`` is False)."""
    for name, value in FAKE_CREDENTIALS.items():
        patch.setenv(name, value)
    if not session_token:
        patch.delenv("AWS_SESSION_TOKEN")


def remove_aws_credentials(patch: pytest.MonkeyPatch, folder: Path) -> None:
    """Leave boto3 no credentials to find: no key variables or profile, config and credentials files that do
    not exist (in ``folder``), no instance metadata."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        patch.delenv(name, raising=False)
    patch.setenv("AWS_CONFIG_FILE", str(folder / "none"))
    patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "none"))
    patch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@contextmanager
def moto_deployment(prefix: str, *, session_token: bool = True) -> Iterator[tuple[Aws, Settings]]:
    """Every table, queue and topic of ``jobsched.resources`` in a fresh moto, with settings wired to them."""
    with pytest.MonkeyPatch.context() as patch:
        set_fake_credentials(patch, session_token=session_token)
        with mock_aws():
            aws = Aws()
            env = provision(aws, prefix=prefix)
            yield aws, Settings(**{k.lower(): v for k, v in env.items()})


def answer_unprocessed(store: Any, monkeypatch: Any, operation: str, times: int) -> list[float]:
    """The DynamoDB store's client answers its first ``times`` requests of ``operation`` (``batch_write_item``
    or ``batch_get_item``) with every item or key unprocessed, as DynamoDB does when it throttles part of a
    batch, then for real; ``jobsched.dynamodb.batch``' sleeps are recorded instead of slept. Returns those sleeps."""
    from jobsched.dynamodb import batch as batch_module

    client = store.table.meta.client
    real = getattr(client, operation)
    calls = {"n": 0}

    def answer(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > times:
            return real(**kwargs)
        if operation == "batch_write_item":
            return {"UnprocessedItems": kwargs["RequestItems"]}
        return {"Responses": {}, "UnprocessedKeys": kwargs["RequestItems"]}

    slept: list[float] = []
    monkeypatch.setattr(client, operation, answer)
    monkeypatch.setattr(batch_module.time, "sleep", slept.append)
    return slept


def published(capsys: Any, name: str) -> list[float]:
    """Publish the metrics added so far (``observability.flush_metrics``) and return every value of metric
    ``name`` in the EMF documents printed since ``capsys`` was last read."""
    import json

    from jobsched.observability import flush_metrics

    flush_metrics()
    documents = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')
    ]
    return [v for d in documents if name in d for v in (d[name] if isinstance(d[name], list) else [d[name]])]
