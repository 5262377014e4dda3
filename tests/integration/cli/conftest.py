"""Fixtures for the CLI: the real API (Lambda handler behind the WSGI app) on a module-wide moto deployment,
reached through ``httpx.WSGITransport``; each test gets its own team tokens, so tests never share jobs."""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner

from jobsched.api.wsgi import ApiWsgiApp
from jobsched.aws.clients import Aws
from jobsched.cli import register
from jobsched.client import JobschedClient
from jobsched.handlers.api import handler
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings
from tests.support.aws import moto_deployment

API = "http://127.0.0.1:8080"
_teams = itertools.count(1)


@dataclass
class Cli:
    """Runs ``jobsched ...`` (the commands ``jobsched.cli.register`` adds) against the in-process API as one team."""

    app: typer.Typer
    transport: httpx.BaseTransport
    token: str
    other_token: str

    def __call__(self, *args: str, token: str | None = None, stdin: str | None = None) -> Any:
        command = [*args, "--api", API, "--token", token or self.token]
        return CliRunner().invoke(self.app, command, obj={"transport": self.transport}, input=stdin)

    def client(self) -> JobschedClient:
        """The HTTP client on the same API as this team, to see what the API itself answers."""
        return JobschedClient(API, token=self.token, transport=self.transport)

    def json(self, *args: str) -> Any:
        result = self(*args, "--json")
        assert result.exit_code == 0, result.output + result.stderr
        return json.loads(result.stdout)


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[Aws, Settings]]:
    """Every table, queue and topic in a moto shared by the module's tests."""
    with moto_deployment("cli", session_token=False) as deployed:
        yield deployed


@pytest.fixture
def cli_settings() -> dict[str, Any]:
    """Settings the ``cli`` fixture's API takes on top of local mode's (a test module may override it)."""
    return {}


@pytest.fixture
def cli(deployment: tuple[Aws, Settings], tmp_path: Path, cli_settings: dict[str, Any]) -> Iterator[Cli]:
    """The CLI app wired to the API as a fresh team (``other_token``: a second team), with ``cli_settings``."""
    aws, settings = deployment
    n = next(_teams)
    token, other = f"tok-a-{n}", f"tok-b-{n}"
    tokens = tmp_path / "tokens.json"
    # team a may use shell targets, as the local owner does; team b may not (local mode's tokens file)
    tokens.write_text(json.dumps({token: {"owner": f"team-a-{n}", "shell": True}, other: f"team-b-{n}"}))
    local = settings.model_copy(
        update={
            "local_tokens_file": str(tokens),
            "allow_shell_targets": True,
            "allow_loopback_http_targets": True,
            **cli_settings,
        }
    )
    api = Components(local, aws).api()
    cli_app = typer.Typer()
    register(cli_app)
    yield Cli(cli_app, httpx.WSGITransport(app=ApiWsgiApp(functools.partial(handler, api=api))), token, other)
