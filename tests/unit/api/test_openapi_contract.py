"""Property-based contract test: schemathesis drives the WSGI app (the same Lambda handler, in-process, with
``JobService`` on the in-memory fakes: the DynamoDB adapters have their own contract suite) with requests generated from the API's own OpenAPI document (as this deployment serves it), and checks
every response against it.

Checks run on every operation: no 5xx; **a request valid by the document is accepted** (2xx, or 401, 403,
404, 409, 410, 429: a missing job, a taken name, history past the retention without an archive or a
throttle are not rejections of the request's form); a
request invalid by it is rejected; documented status codes, content types, headers and response bodies;
requests without credentials refused. (Schemathesis' coverage phase, and with it its missing-header and
unsupported-method checks, is off: it runs only with the explicit-examples phase, which the zone enum makes
cost about 1,500 calls for ``POST /jobs`` alone.) Three
runs: every operation on its own (half of the job-scoped requests aimed at a real job), and stateful
sequences following the document's links (a created job's ``id`` into get, update, pause, resume, trigger,
runs and delete), and create and update against local mode's document (shell targets enabled).

The document's custom formats (``schedule``, ``http-url``; see ``jobsched.api.document``) get generators
here, as schemathesis only knows the standard ones. Two rules of the document are in words because JSON
Schema cannot compare two fields, a field with the clock or a request with an earlier one: see
``within_the_unwritten_rules``, which keeps generated requests inside them.

Bounded and derandomized so ``make test`` stays quick: ``JOBSCHED_SCHEMATHESIS_EXAMPLES`` examples per
operation (default 25) and as many stateful scenarios; raise it for a deeper run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi import checks

from jobsched.api.app import Api, app
from jobsched.api.auth import TokenAuthenticator
from jobsched.api.document import HTTP_URL_FORMAT, SCHEDULE_FORMAT
from jobsched.api.errors import IDEMPOTENCY_HEADER
from jobsched.api.schemas import JobCreate
from jobsched.api.timing import TIMING_FIELDS
from jobsched.api.wsgi import ApiWsgiApp
from jobsched.clock import system_clock
from jobsched.handlers.api import handler
from jobsched.settings import Settings
from tests.support.api import memory_api
from tests.support.backends import memory_backend

TOKEN = "schemathesis-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = int(os.environ.get("JOBSCHED_SCHEMATHESIS_EXAMPLES", "25"))
ACCEPTED = ["2xx", "401", "403", "404", "409", "410", "429"]
CHECKS = [
    schemathesis.checks.not_a_server_error,
    checks.positive_data_acceptance,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
    checks.ignored_auth,
]
DEPLOYMENT_LIMITS = Settings.model_construct()
"""The test deployment's limits are the defaults (``timeout_s`` cap 840 s, no shell targets)."""

SCHEDULES = [
    "0 2 * * *",
    "*/5 * * * *",
    "30 8 * * 1-5",
    "0 0 L * *",
    "0 9 1W * *",
    "0 12 * * 5#2",
    "0 0 29 2 *",
    "*/20 * * * * *",
    "@daily",
    "@hourly",
    "rate(5 minutes)",
    "every 30 seconds",
    "every 1 second",
    "daily 02:00",
    "at 2099-01-01T00:00:00",
]
"""Valid instances of format ``schedule``, one of each form."""
URLS = st.builds(
    "{}://{}{}{}".format,
    st.sampled_from(["http", "https"]),
    st.sampled_from(["example.com", "api.example.org", "203.0.113.7", "[2001:db8::1]", "bücher.example"]),
    st.sampled_from(["", ":8443", ":1", ":65535"]),
    st.sampled_from(["", "/", "/hook", "/a/b?x=1&y=%20", "/#frag"]),
)
"""Valid instances of format ``http-url``: every host form, ports at the bounds."""

schemathesis.openapi.format(SCHEDULE_FORMAT, st.sampled_from(SCHEDULES))
schemathesis.openapi.format(HTTP_URL_FORMAT, URLS)

# The document is generated from the routes and models alone (no AWS), so it is loaded at collection;
# requests go to the WSGI app of the fixture (``app=``), which serves the same document at /openapi.json.
CONFIG = {
    "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}},
    # sequences are for reaching real ids with valid requests; invalid ones are the test above's
    # only the document's own links (not ones schemathesis would infer): every sequence step is
    # then a job operation on a created job, so each gets real ids within a small budget
    "phases": {"stateful": {"generation": {"mode": "positive"}, "inference": {"algorithms": []}}},
}
schema = schemathesis.openapi.from_dict(
    app.openapi_document(DEPLOYMENT_LIMITS), config=SchemathesisConfig.from_dict(CONFIG)
)
LOCAL_LIMITS = Settings.model_construct(allow_shell_targets=True)
"""Local mode's limits: shell targets are enabled, so the document has the ``shell`` target."""
local_schema = schemathesis.openapi.from_dict(
    app.openapi_document(LOCAL_LIMITS), config=SchemathesisConfig.from_dict(CONFIG)
).include(operation_id=["createJob", "updateJob"])
SERVED: dict[str, Api] = {}
"""The ``Api`` the WSGI app's handler serves with (set by each test from its fixture, swapped per sequence)."""
schema.app = local_schema.app = ApiWsgiApp(lambda event, context: handler(event, context, api=SERVED["api"]))
"""Builds nothing until called; the probes of some checks use the schema's app."""


def _instant(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


@local_schema.hook("map_case")
@schema.hook("map_case")
def within_the_unwritten_rules(context: Any, case: Any) -> Any:
    """Keep a generated request inside the rules JSON Schema cannot state (the document says them in words):

    - ``end_at`` after ``start_at``, far enough ahead that the schedule still fires; a one-off (its own
      instant) without bounds; a PATCH that re-times a job gives all of schedule, start_at and end_at, as
      the job's stored ones count otherwise;
    - ``GET /runs``' and ``GET /jobs/{id}/runs``' ``until`` is after their ``since`` (a generated pair is put in order);
    - a backfill window ends after it starts, at most now, with at most 1,000 fires: a generated pair of
      instants becomes the hour that ended an hour ago;
    - an http target's ``secret_headers`` name some of its ``headers``;
    - a PATCH gives ``schedule`` or ``after``, not both (a job has one of them);
    - an ``Idempotency-Key`` sent again with a different request is answered 422 (as the IETF draft says):
      a well-formed key gets a suffix from the request (method, path, body), so a repeated key means a
      repeated request.

    Requests the document calls invalid are left as they are.
    """
    body = case.body
    if isinstance(body, dict):
        if case.method.upper() == "PATCH" and TIMING_FIELDS & body.keys():
            # a PATCH is judged with the job it changes: give all the timing fields, so the stored ones
            # (set by earlier requests) cannot contradict the new ones
            body.setdefault("schedule", SCHEDULES[1])
            body.setdefault("start_at", None)
            body.setdefault("end_at", None)
        if case.method.upper() == "PATCH" and "schedule" in body:
            body.pop("after", None)  # a job runs on a schedule or after another job, never both (design §2.1)
        target = body.get("target")
        if isinstance(target, dict) and isinstance(target.get("secret_headers"), list):
            # an http target's secret headers are among its headers
            headers = target.get("headers")
            given = {str(name).lower() for name in headers} if isinstance(headers, dict) else set()
            target["secret_headers"] = [n for n in target["secret_headers"] if str(n).lower() in given]
        if str(body.get("schedule", "")).startswith("at "):
            body.update(start_at=None, end_at=None)
        start, end = _instant(body.get("start_at")), _instant(body.get("end_at"))
        horizon = datetime.now(UTC) + timedelta(days=800)
        if end is not None and (end < horizon or (start is not None and end <= start + timedelta(days=800))):
            body["end_at"] = None
        if case.path.endswith("/backfill") and _instant(body.get("start")) and _instant(body.get("end")):
            hour_ago = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
            body.update(start=(hour_ago - timedelta(hours=1)).isoformat(), end=hour_ago.isoformat())
        case.body = (
            body  # re-assigned, so schemathesis re-judges whether the case is still invalid by the document
        )
    query = case.query or {}
    since, until = _instant(query.get("since")), _instant(query.get("until"))
    if case.path in ("/runs", "/jobs/{id}/runs") and since and until and until <= since:
        case.query = (
            {**query, "since": query["until"], "until": query["since"]}
            if until < since
            else {k: v for k, v in query.items() if k != "until"}
        )
    key = (case.headers or {}).get(IDEMPOTENCY_HEADER)
    if isinstance(key, str) and re.fullmatch(r"[\x20-\x7e]{1,255}", key):
        request = [case.method, case.path, case.path_parameters, body]
        digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()[:16]
        case.headers[IDEMPOTENCY_HEADER] = f"{key[:200]}-{digest}"
    return case


def _served_api(tmp_path_factory: pytest.TempPathFactory, **limits: Any) -> tuple[Api, str]:
    """An ``Api`` in local-mode auth (a tokens file) on the fakes and the system clock, with the deployment
    ``limits`` (settings) given, and one job of the token's owner to aim at (its id)."""
    backend = memory_backend()
    tokens = tmp_path_factory.mktemp("auth") / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "team-schemathesis"}))
    settings = backend.settings.model_copy(update={"local_tokens_file": str(tokens), **limits})
    api = memory_api(backend)(settings, system_clock)
    request = JobCreate.model_validate({"name": "seeded", "schedule": "*/5 * * * *", "command": "echo"})
    return api, api.service.create_job("team-schemathesis", request).job.id


@pytest.fixture(scope="module")
def wsgi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiWsgiApp, str, Api]]:
    """The WSGI app serving ``_served_api`` with the default limits."""
    api, seeded = _served_api(tmp_path_factory)
    yield schema.app, seeded, api
    SERVED.clear()


@pytest.fixture(scope="module")
def local_wsgi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiWsgiApp, str, Api]]:
    """The WSGI app serving ``_served_api`` with local mode's limits (shell targets enabled)."""
    api, seeded = _served_api(tmp_path_factory, allow_shell_targets=True)
    yield local_schema.app, seeded, api
    SERVED.clear()


def test_the_wsgi_app_serves_the_document_under_test(wsgi: tuple[ApiWsgiApp, str, Api]) -> None:
    SERVED["api"] = wsgi[2]
    served = schemathesis.openapi.from_wsgi("/openapi.json", wsgi[0])

    assert served.raw_schema == schema.raw_schema


HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@schema.parametrize()
@HYPOTHESIS
def test_the_api_honours_its_openapi_document(case: Any, wsgi: tuple[ApiWsgiApp, str, Api]) -> None:
    wsgi_app, seeded_job, SERVED["api"] = wsgi
    # Aim half of the job-scoped requests (chosen by a hash of the generated id, so runs repeat) at a real
    # job, so bodies reach the use cases; DELETE keeps its random ids so the job survives the run.
    job_id = (case.path_parameters or {}).get("id")
    aimed = isinstance(job_id, str) and hashlib.sha256(job_id.encode()).digest()[0] % 2 == 0
    if aimed and case.method.upper() != "DELETE":
        case.path_parameters["id"] = seeded_job
    case.call_and_validate(app=wsgi_app, headers=AUTH, checks=CHECKS)


@local_schema.parametrize()
@HYPOTHESIS
def test_local_mode_honours_its_document_with_shell_targets(
    case: Any, local_wsgi: tuple[ApiWsgiApp, str, Api]
) -> None:
    wsgi_app, seeded_job, SERVED["api"] = local_wsgi
    if case.path_parameters and "id" in case.path_parameters:
        case.path_parameters["id"] = seeded_job
    case.call_and_validate(app=wsgi_app, headers=AUTH, checks=CHECKS)


def test_sequences_along_the_documents_links_honour_it(wsgi: tuple[ApiWsgiApp, str, Api]) -> None:
    wsgi_app, _, api = wsgi
    answered: set[tuple[str, int]] = set()
    owners = itertools.count(1)

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            # each sequence as a team of its own: no names, jobs or Idempotency-Keys of earlier sequences
            # change its answers (Hypothesis replays sequences and needs them to behave the same)
            SERVED["api"] = replace(
                api, authenticator=TokenAuthenticator({TOKEN: f"team-sequence-{next(owners)}"})
            )

        def teardown(self) -> None:
            SERVED["api"] = api

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"app": wsgi_app, "headers": AUTH}

        def after_call(self, response: Any, case: Any) -> None:
            super().after_call(response, case)
            answered.add((case.operation.definition.raw.get("operationId"), response.status_code // 100))

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            case.validate_response(response, checks=CHECKS, headers=AUTH, transport_kwargs=kwargs)

    # twice the scenarios of the single operations: which links a scenario follows depends on the answers, and
    # those on the clock (the rules above compare instants with now), so fewer can miss an operation by chance
    scenarios = settings(
        HYPOTHESIS, max_examples=2 * EXAMPLES, stateful_step_count=6, phases=[Phase.generate]
    )
    Workflow.run(settings=scenarios)

    # the links gave the job operations real ids: they succeeded on jobs the sequences created
    linked = {"getJob", "updateJob", "pauseJob", "resumeJob", "triggerJob", "listRuns", "deleteJob"}
    assert linked <= {operation for operation, family in answered if family == 2}, sorted(answered)
