"""Talking to the API through its Lambda handler, on either backend.

:class:`Http` sends API Gateway REST proxy events to ``jobsched.handlers.api.handler`` and decodes the replies.
The ``Api`` serving them is built by a :data:`BuildApi` callable: :func:`memory_api` puts ``JobService`` on the
in-memory fakes of ``jobsched.memory`` (the logic tests in ``tests/unit/api``: no moto, no sockets),
:func:`moto_api` on the composition root's DynamoDB/SQS adapters on moto (``tests/integration/api``: the
adapters and a few cases end to end). Each :class:`Http` has two teams of its own (alice and carol share a
role; bob does not), so tests sharing one store never see each other's jobs, names or idempotency keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobsched.api.app import Api
from jobsched.api.auth import Authenticator, IamAuthenticator, TokenAuthenticator
from jobsched.api.health import HealthReads
from jobsched.api.idempotency import KEY_PREFIX, IdempotencyKeys
from jobsched.api.service import JobService
from jobsched.api.wsgi import api_context
from jobsched.aws.clients import Aws
from jobsched.aws.lateness import JsonLateness
from jobsched.clock import Clock, FakeClock
from jobsched.domain.runs import new_run
from jobsched.handlers.api import handler
from jobsched.models import RunStatus
from jobsched.ports.jobs import SchedulingState
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings
from tests.support.backends import Backend

EVENTS = Path(__file__).resolve().parents[2] / "events" / "api"
NOW_MS = 1_772_445_600_000  # 2026-03-02T10:00:00Z
ACCOUNT = "123456789012"
_teams = itertools.count(1)

BuildApi = Callable[[Settings, Clock], Api]
"""Builds the ``Api`` a request is served with, from the deployment's settings and the test's clock."""


def load_event(name: str) -> dict[str, Any]:
    """A sample API Gateway REST proxy event from ``events/api/<name>.json`` (a fresh copy)."""
    return json.loads((EVENTS / f"{name}.json").read_text())


def session_arn(role: str, session: str) -> str:
    """The principal API Gateway reports for an assumed-role session."""
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}"


def role_arn(role: str) -> str:
    """The owner id of every session of ``role``."""
    return f"arn:aws:iam::{ACCOUNT}:role/{role}"


def key_record_id(owner: str, key: str) -> str:
    """The id of the idempotency record of ``owner``'s ``key`` (Powertools: ``<prefix>#sha256(json([owner, key]))``)."""
    digest = hashlib.sha256(json.dumps([owner, key], sort_keys=True).encode()).hexdigest()
    return f"{KEY_PREFIX}#{digest}"


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


CHAIN_VIEW = ("upstream", "downstream")
"""The fields only ``GET /jobs/{id}`` answers (``JobDetail``: the job's chain, design §2.1)."""


def without_chain(job: dict[str, Any]) -> dict[str, Any]:
    """A ``GET /jobs/{id}`` body without its chain view: the job as every other call answers it."""
    return {name: value for name, value in job.items() if name not in CHAIN_VIEW}


def job_body(name: str = "nightly-report", **overrides: Any) -> dict[str, Any]:
    """A valid POST /jobs body (daily at 02:00 UTC, command target)."""
    body: dict[str, Any] = {"name": name, "schedule": "0 2 * * *", "command": "echo", "input": {"n": 1}}
    if "target" in overrides:
        del body["command"]
    body.update(overrides)
    return body


def authenticator_for(settings: Settings) -> Authenticator:
    """Bearer tokens when ``settings.local_tokens_file`` is set (local mode), else the IAM principal: as
    ``jobsched.runtime.wiring.Components.api`` chooses."""
    if settings.local_tokens_file:
        return TokenAuthenticator.from_file(settings.local_tokens_file)
    return IamAuthenticator()


def memory_api(backend: Backend) -> BuildApi:
    """``JobService`` on the fakes of ``backend`` (a ``tests.support.backends.memory_backend()``): every ``Api``
    built shares its stores, queue and idempotency records, as API execution environments share the tables.
    No target-tag reads (they need AWS: ``tests/integration/api/test_target_ownership.py``)."""

    def build(settings: Settings, clock: Clock) -> Api:
        service = JobService(
            settings=settings,
            jobs=backend.jobs,
            runs=backend.runs,
            queue=backend.queue,
            clock=clock,
            idempotency=IdempotencyKeys(backend.key_records.sharing()),
            partition_marks=backend.control,
            counters=backend.jobs,
        )
        health = HealthReads(backend.control, JsonLateness(), settings.scheduler_partitions)
        return Api(
            settings=settings, service=service, authenticator=authenticator_for(settings), health=health
        )

    return build


def moto_api(aws: Aws) -> BuildApi:
    """The composition root's ``Api`` (DynamoDB/SQS adapters) on the moto deployment ``aws``."""

    def build(settings: Settings, clock: Clock) -> Api:
        return Components(settings, aws, clock=clock).api()

    return build


@dataclass
class Http:
    """How tests talk to the handler: two teams of their own (alice and carol share a role; bob does not).

    ``build`` makes the ``Api`` (see :func:`memory_api`, :func:`moto_api`); ``aws`` is the moto deployment when
    there is one, ``backend`` the fakes when there are. (Fixtures hand this out because test modules cannot
    import conftest under importlib mode.)
    """

    build: BuildApi
    settings: Settings
    clock: FakeClock
    aws: Aws | None = None
    backend: Backend | None = None

    NOW_MS = NOW_MS
    load_event = staticmethod(load_event)
    job_body = staticmethod(job_body)

    def __post_init__(self) -> None:
        n = next(_teams)
        self.alice, self.carol = session_arn(f"billing-{n}", "alice"), session_arn(f"billing-{n}", "carol")
        self.bob = session_arn(f"search-{n}", "bob")
        self.alice_owner, self.bob_owner = role_arn(f"billing-{n}"), role_arn(f"search-{n}")
        self.reconfigure(self.settings)

    def reconfigure(self, settings: Settings, **updates: Any) -> Api:
        """Rebuild the API with ``settings`` (plus ``updates``); the handler serves requests with it."""
        self.settings = settings.model_copy(update=updates)
        self.api = self.environment()
        return self.api

    def environment(self) -> Api:
        """Another API execution environment on the same stores (Lambda runs one request per environment)."""
        return self.build(self.settings, self.clock)

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

    # --- the stored state (either backend) -------------------------------------------------------

    def state(self, job_id: str) -> SchedulingState:
        """The job's scheduling state as stored (read through the API's job store)."""
        state = self.api.service.jobs.get(job_id).state
        assert state is not None, job_id
        return state

    def put_run(self, job_id: str, scheduled_for_ms: int, status: RunStatus) -> None:
        """Store a run of ``job_id`` at ``scheduled_for_ms`` (epoch ms) in ``status``, as the scheduler and worker
        would have left it (through the API's run store)."""
        row = new_run(job_id, scheduled_for_ms, now_ms=scheduled_for_ms, retention_days=90, status=status)
        assert self.api.service.runs.put_new(row) is None

    def key_record(self, owner: str, key: str) -> dict[str, Any] | None:
        """The stored idempotency record of ``owner``'s ``key`` as ``{"status", "expiration" (epoch s),
        "in_progress_expiration" (epoch ms or None)}``, or None when there is none."""
        record_id = key_record_id(owner, key)
        if self.aws is not None:
            table = self.aws.table(self.settings.idempotency_table)
            item = table.get_item(Key={"id": record_id}, ConsistentRead=True).get("Item")
            return dict(item) if item is not None else None
        assert self.backend is not None
        record = self.backend.key_records.records.get(record_id)
        if record is None:
            return None
        return {
            "status": record.status,
            "expiration": record.expiry_timestamp,
            "in_progress_expiration": record.in_progress_expiry_timestamp,
        }

    def set_state(self, job_id: str, **changes: Any) -> None:
        """Overwrite fields of a job's stored scheduling state, as a scheduler's move would (fakes only)."""
        assert self.backend is not None, "set_state needs the in-memory backend"
        self.backend.jobs.states[job_id] = dataclasses.replace(self.state(job_id), **changes)
