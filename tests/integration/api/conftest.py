"""Fixtures for the API through its Lambda handler, against moto.

One moto deployment per test module (provisioning costs ~0.5 s, so not per test); each test gets owners of
its own (unique role names), so tests never see each other's jobs, names or idempotency keys.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobsched.api.app import Api
from jobsched.api.wsgi import api_context
from jobsched.aws import Aws
from jobsched.clock import FakeClock
from jobsched.handlers.api import handler
from jobsched.settings import Settings
from jobsched.wiring import Components
from tests.support.aws import moto_deployment

EVENTS = Path(__file__).resolve().parents[3] / "events" / "api"
NOW_MS = 1_772_445_600_000  # 2026-03-02T10:00:00Z
ACCOUNT = "123456789012"
_teams = itertools.count(1)


def load_event(name: str) -> dict[str, Any]:
    """A sample API Gateway REST proxy event from ``events/api/<name>.json`` (a fresh copy)."""
    return json.loads((EVENTS / f"{name}.json").read_text())


def session_arn(role: str, session: str) -> str:
    """The principal API Gateway reports for an assumed-role session."""
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}"


def role_arn(role: str) -> str:
    """The owner id of every session of ``role``."""
    return f"arn:aws:iam::{ACCOUNT}:role/{role}"


@dataclass
class Reply:
    """A proxy response, decoded (``headers`` keys lower-cased)."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> dict[str, Any]:
        assert isinstance(self.body, dict) and "error" in self.body, self.body
        return dict(self.body["error"])


def invoke(event: dict[str, Any], api: Api) -> Reply:
    """Call the Lambda handler with ``event``, served by ``api``, and decode its proxy response."""
    response = handler(event, api_context(), api=api)
    headers = {k.lower(): v[-1] for k, v in (response.get("multiValueHeaders") or {}).items()}
    headers.update({k.lower(): v for k, v in (response.get("headers") or {}).items()})
    raw = response.get("body")
    return Reply(status=int(response["statusCode"]), body=json.loads(raw) if raw else None, headers=headers)


def make_event(
    method: str,
    path: str,
    *,
    caller: str | None,
    body: Any = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway REST event for ``method path`` from IAM principal ``caller`` (None: no identity)."""
    event = load_event("get_job")
    parts = path.strip("/").split("/")
    resource = "/" + "/".join("{id}" if i == 1 else p for i, p in enumerate(parts))
    event.update(
        httpMethod=method,
        path=path,
        resource=resource,
        pathParameters={"id": parts[1]} if len(parts) > 1 else None,
        queryStringParameters=query,
        multiValueQueryStringParameters={k: [v] for k, v in query.items()} if query else None,
    )
    event["requestContext"].update(httpMethod=method, resourcePath=resource, path="/prod" + path)
    event["requestContext"]["identity"]["userArn"] = caller
    merged = dict(event["headers"])
    if body is not None or raw_body is not None:
        merged["Content-Type"] = "application/json"
        event["body"] = raw_body if raw_body is not None else json.dumps(body)
    for name, value in (headers or {}).items():
        merged = {k: v for k, v in merged.items() if k.lower() != name.lower()}
        merged[name] = value
    event["headers"] = merged
    event["multiValueHeaders"] = {k: [v] for k, v in merged.items()}
    return event


def job_body(name: str = "nightly-report", **overrides: Any) -> dict[str, Any]:
    """A valid POST /jobs body (daily at 02:00 UTC, command target)."""
    body: dict[str, Any] = {"name": name, "schedule": "0 2 * * *", "command": "echo", "input": {"n": 1}}
    if "target" in overrides:
        del body["command"]
    body.update(overrides)
    return body


class Http:
    """How tests talk to the handler: two teams of their own (alice and carol share a role; bob does not).

    (Fixtures hand this out because test modules cannot import conftest under importlib mode.)
    """

    NOW_MS = NOW_MS
    load_event = staticmethod(load_event)
    job_body = staticmethod(job_body)

    def __init__(self, aws: Aws, settings: Settings, clock: FakeClock) -> None:
        n = next(_teams)
        self.aws = aws
        self.clock = clock
        self.alice = session_arn(f"billing-{n}", "alice")
        self.carol = session_arn(f"billing-{n}", "carol")
        self.alice_owner = role_arn(f"billing-{n}")
        self.bob = session_arn(f"search-{n}", "bob")
        self.bob_owner = role_arn(f"search-{n}")
        self.reconfigure(settings)

    def reconfigure(self, settings: Settings, **updates: Any) -> Api:
        """Rebuild the API with ``settings`` (plus ``updates``); the handler serves requests with it."""
        self.settings = settings.model_copy(update=updates)
        self.api = Components(self.settings, self.aws, clock=self.clock).api()
        return self.api

    def invoke(self, event: dict[str, Any]) -> Reply:
        """Call the Lambda handler with ``event`` on this test's API and decode its proxy response."""
        return invoke(event, self.api)

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda handler on this test's current API (``reconfigure`` changes it), e.g. for the WSGI app."""
        return handler(event, context, api=self.api)

    def event(self, method: str, path: str, *, caller: str | None = "alice", **kwargs: Any) -> dict[str, Any]:
        """``make_event`` with ``caller`` one of "alice", "carol", "bob", None or a full ARN."""
        principal = getattr(self, caller) if caller in ("alice", "carol", "bob") else caller
        return make_event(method, path, caller=principal, **kwargs)

    def __call__(self, method: str, path: str, **kwargs: Any) -> Reply:
        """Send ``method path`` through the handler (see ``event`` for the keyword arguments)."""
        return self.invoke(self.event(method, path, **kwargs))

    def create(
        self, name: str = "nightly-report", *, caller: str = "alice", **overrides: Any
    ) -> dict[str, Any]:
        """POST /jobs that must answer 201; returns the job."""
        reply = self("POST", "/jobs", body=job_body(name, **overrides), caller=caller)
        assert reply.status == 201, reply.body
        return dict(reply.body)

    def sample(
        self, name: str, *, caller: str | None = "alice", path_id: str | None = None
    ) -> dict[str, Any]:
        """A sample event from ``events/api`` sent by this test's ``caller``, optionally for job ``path_id``."""
        event = load_event(name)
        event["requestContext"]["identity"]["userArn"] = getattr(self, caller) if caller else None
        if path_id is not None:
            old = event["pathParameters"]["id"]
            event["path"] = event["path"].replace(old, path_id)
            event["requestContext"]["path"] = event["requestContext"]["path"].replace(old, path_id)
            event["pathParameters"] = {"id": path_id}
        return event


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
    return Http(aws, settings, clock)
