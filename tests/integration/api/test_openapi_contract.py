"""Property-based contract test: schemathesis drives the WSGI app (the same Lambda handler, in-process)
with requests generated from the API's own OpenAPI document, and checks every response against it.

Bounded and derandomized (25 examples per operation, fixed seed) so ``make test`` stays quick. Checks run:
no 5xx, documented status codes, content types and headers, response bodies matching their schemas,
schema-invalid requests rejected, required headers enforced, unsupported methods answered 405, requests
without credentials refused.

Excluded: ``positive_data_acceptance``. It expects every schema-valid request to succeed, but some rules
cannot be written in JSON Schema and are checked by the API itself: a ``schedule`` must parse and fire
(``"0 0 30 2 *"`` is a valid string but never fires), a ``timezone`` must be an IANA name, ``timeout_s`` is
capped per deployment, ``end_at`` must follow ``start_at``, a ``cursor`` must be one the API issued and a
``name`` may already be taken. Those requests correctly get 400/404/409 in the SPEC error shape, which the
other checks still validate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi import checks

from jobsched.api.app import app, build_api, install
from jobsched.api.wsgi import ApiWsgiApp
from jobsched.aws import Aws
from jobsched.models import JobCreate
from jobsched.settings import Settings

TOKEN = "schemathesis-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHECKS = [
    schemathesis.checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
    checks.missing_required_header,
    checks.unsupported_method,
    checks.ignored_auth,
]


@pytest.fixture(scope="module")
def wsgi(
    deployment: tuple[Aws, Settings], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ApiWsgiApp, str]]:
    """The WSGI app in local-mode auth (a tokens file), with one job of the token's owner to aim at."""
    aws, base = deployment
    tokens = tmp_path_factory.mktemp("auth") / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "team-schemathesis"}))
    api = build_api(base.model_copy(update={"local_tokens_file": str(tokens)}), aws)
    install(api)
    wsgi_app = schema.app
    request = JobCreate.model_validate({"name": "seeded", "schedule": "*/5 * * * *", "command": "echo"})
    seeded = api.service.create_job("team-schemathesis", request).job
    yield wsgi_app, seeded.id
    install(None)


# The document is generated from the routes and models alone (no AWS), so it is loaded at collection;
# requests go to the WSGI app of the fixture (``app=``), which serves the same document at /openapi.json.
schema = schemathesis.openapi.from_dict(app.openapi_document())
schema.app = ApiWsgiApp()  # builds nothing until called; the probes of some checks use the schema's app


def test_the_wsgi_app_serves_the_document_under_test(wsgi: tuple[ApiWsgiApp, str]) -> None:
    served = schemathesis.openapi.from_wsgi("/openapi.json", wsgi[0])

    assert served.raw_schema == schema.raw_schema


@schema.parametrize()
@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_the_api_honours_its_openapi_document(case: Any, wsgi: tuple[ApiWsgiApp, str]) -> None:
    wsgi_app, seeded_job = wsgi
    # Aim half of the job-scoped requests (chosen by a hash of the generated id, so runs repeat) at a real
    # job, so bodies reach the use cases; DELETE keeps its random ids so the job survives the run.
    job_id = (case.path_parameters or {}).get("id")
    aimed = isinstance(job_id, str) and hashlib.sha256(job_id.encode()).digest()[0] % 2 == 0
    if aimed and case.method.upper() != "DELETE":
        case.path_parameters["id"] = seeded_job
    case.call_and_validate(app=wsgi_app, headers=AUTH, checks=CHECKS)
