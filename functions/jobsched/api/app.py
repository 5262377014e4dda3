"""The HTTP API of SPEC section 3 on Powertools' ``APIGatewayRestResolver`` (validation on, pydantic models).

Request pipeline (every route but ``/openapi.json``): admission (caller identity -> owner, 401; body size,
413) -> Powertools request validation (400 via ``errors``) -> the route -> ``JobService`` -> response
validation. Admission runs before validation so that an oversized or unauthenticated request is refused
before its body is parsed. The routes only translate between HTTP and the use cases of ``service``; every
error response comes from ``errors``.

Dependencies come from :func:`get_api` through Powertools ``Depends``: the ``Api`` the caller of
:func:`resolve_with` (the API Lambda handler) serves the request with, built by ``jobsched.wiring``.

Powertools keeps the current event on the resolver class, so one process resolves one request at a time
(as a Lambda execution environment does); ``jobsched.api.wsgi`` serializes requests accordingly.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from http import HTTPStatus
from typing import Annotated, Any, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseHeader

from jobsched.api import routes
from jobsched.api.auth import Authenticator
from jobsched.api.cursor import CURSOR_PATTERN, MAX_CURSOR_CHARS
from jobsched.api.document import describe_rules, for_deployment
from jobsched.api.errors import IDEMPOTENCY_HEADER, ErrorBody, register_error_handlers
from jobsched.api.exceptions import InvalidInput, PayloadTooLarge
from jobsched.api.service import JobService
from jobsched.models import Job, JobCreate, JobPatch, Page, Run, RunStatus, drop_null
from jobsched.settings import Settings

API_TITLE = "jobsched"
API_VERSION = "1.0.0"
REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True)
class Api:
    """What the routes need: the deployment's settings, the use cases, and who the caller is."""

    settings: Settings
    service: JobService
    authenticator: Authenticator


def get_api() -> Api:
    """The wiring of the request being resolved (what the routes' ``Depends(get_api)`` sees): the ``Api``
    handed to :func:`resolve_with`. Raises KeyError outside a request."""
    return app.context["api"]  # type: ignore[no-any-return]


def current_api() -> Api:
    """The current request's ``Api`` (:func:`get_api`), for code running before the routes (admission)."""
    return get_api()


def resolve_with(api: Api, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway REST proxy ``event`` into its proxy response, served by ``api`` (built by
    ``jobsched.wiring.Components.api``). Powertools clears the request's context after each request."""
    app.append_context(api=api)
    return app.resolve(event, context)


def caller() -> str:
    """The authenticated owner of the current request (set by admission)."""
    return str(app.context["owner"])


# --- admission: before Powertools parses and validates the request --------------------------------


def _body_bytes(event: dict[str, Any]) -> bytes:
    """The request body as sent (base64 bodies decoded). Raises ``InvalidInput`` for broken base64."""
    body = event.get("body")
    if not body:
        return b""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput("body", "request body is not valid base64", code="invalid_json") from None
    return str(body).encode("utf-8", "surrogatepass")


def _is_json(content_type: str | None) -> bool:
    """No Content-Type (taken as JSON, as Powertools does), ``application/json`` or ``application/*+json``."""
    if not content_type:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class AdmissionThenValidation(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation, preceded by the checks that must not wait for body parsing.

    Raises ``Unauthorized`` (no or bad credentials), then ``PayloadTooLarge`` (body over
    ``Settings.api_max_body_bytes``), then ``InvalidInput`` (a body that is not JSON text: this API takes no
    form data); on success the owner is in ``app.context["owner"]``.
    """

    def handler(self, app: Any, next_middleware: NextMiddleware) -> Response:
        api = current_api()
        event = app.current_event.raw_event
        app.append_context(owner=api.authenticator.owner_of(event))
        body, limit = _body_bytes(event), api.settings.api_max_body_bytes
        if len(body) > limit:
            raise PayloadTooLarge(len(body), limit)
        if body and not _is_json(app.current_event.headers.get("content-type")):
            raise InvalidInput(
                "body",
                "send the request body as JSON (Content-Type: application/json)",
                code="unsupported_media_type",
            )
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(
                "body", "request body is not valid JSON: not UTF-8 text", code="invalid_json"
            ) from None
        if api.service.idempotency is not None:
            api.service.idempotency.bind_invocation(app.lambda_context)
        return super().handler(app, next_middleware)


def parse_json_body(text: str) -> Any:
    """The request body's JSON value (``json.loads``), for Powertools' ``json_body``.

    Raises ``json.JSONDecodeError`` (answered 400 ``invalid_json``, field ``body``) for malformed JSON and
    also for JSON the parser cannot take: arrays/objects nested thousands deep (Python's parser would raise
    ``RecursionError``) or an integer longer than Python's 4300-digit conversion limit (``ValueError``).
    Neither is a server error.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("arrays or objects are nested too deeply", text, 0) from None
    except ValueError:
        raise json.JSONDecodeError(
            "a value cannot be read (integers may have at most 4300 digits)", text, 0
        ) from None


class JobschedResolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` with validation on, admission first, and an OpenAPI document of this API.

    Request bodies are parsed with :func:`parse_json_body`.
    """

    def __init__(self) -> None:
        super().__init__(
            enable_validation=True,
            response_validation_error_http_code=HTTPStatus.INTERNAL_SERVER_ERROR,
            json_body_deserializer=parse_json_body,
        )
        # Powertools runs its request validation before any user middleware; admission must come first.
        self._request_validation_middleware = AdmissionThenValidation()

    def openapi_document(self, settings: Settings | None = None) -> dict[str, Any]:
        """The OpenAPI 3.1 document, generated from the routes and models (computed once; a fresh copy),
        with the limits of the deployment ``settings`` describes when given (``document.for_deployment``)."""
        if settings is not None:
            return for_deployment(_openapi_document(), settings)
        return copy.deepcopy(_openapi_document())


app = JobschedResolver()


@lru_cache(maxsize=1)
def _openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = app.get_openapi_schema(
        title=API_TITLE,
        version=API_VERSION,
        description=(
            "Register jobs (one-off, cron, rate) and read their runs. Every run starts on time and runs "
            "effectively once; targets receive the run id as their idempotency key. Errors are "
            '`{"error": {"code", "message", "field"}}`. In AWS every call is signed with SigV4 (IAM); '
            "locally, send `Authorization: Bearer <token>`."
        ),
        security_schemes={
            "sigv4": APIKey(
                name="Authorization",
                in_=APIKeyIn.header,
                description="AWS Signature Version 4 (API Gateway IAM auth)",
            ),
            "bearer": HTTPBearer(description="local mode: a token of the tokens file"),
        },
        security=[{"sigv4": []}, {"bearer": []}],
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    # Powertools documents its own 422 "detail" body on every route; this API answers bad input with 400 in
    # the SPEC error shape (see ``errors``) and uses 422 only for a reused Idempotency-Key, documented per route.
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                _tidy_parameter(parameter)
            responses = operation.get("responses", {})
            if "204" in responses:
                responses["204"].pop("content", None)
            if "HTTPValidationError" in str(responses.get("422", "")):
                del responses["422"]
            server_error = responses.get("500")
            if server_error is not None:
                server_error["description"] = "Internal error (logged; never caused by bad input)"
                server_error["content"] = {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                }
    schemas = document.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    describe_rules(document)
    return document


def _tidy_parameter(parameter: dict[str, Any]) -> None:
    """An optional parameter is documented as ``required: false`` with its plain schema (a header or query
    value is never JSON null), and headers keep their canonical spelling (``Idempotency-Key``)."""
    drop_null(parameter.get("schema", {}))
    if parameter.get("in") == "header" and parameter.get("name", "").lower() == IDEMPOTENCY_HEADER.lower():
        parameter["name"] = IDEMPOTENCY_HEADER


def allowed_methods(path: str) -> list[str]:
    """The methods the API serves on ``path`` (``routes.ROUTES``), sorted; empty when the path is unknown."""
    matched = routes.match(path)
    return sorted(routes.methods_by_path()[matched[0]]) if matched else []


register_error_handlers(app, allowed_methods)


# --- OpenAPI response declarations ----------------------------------------------------------------

_ERROR_DESCRIPTIONS = {
    400: "Bad input: `error.field` names the field",
    401: "No or bad credentials",
    404: "No such job (or not the caller's)",
    409: "Conflict",
    413: "Request body too large",
    422: "Idempotency-Key reused with a different request",
    429: "Throttled; retry after a pause",
}
_CURSOR_NOT_FOUND = "A `cursor` this listing did not issue (another caller's or another listing's)"


_STRING: dict[str, Any] = {"type": "string"}
_ERROR_HEADERS: dict[int, dict[str, OpenAPIResponseHeader]] = {
    401: {"WWW-Authenticate": {"description": "the auth scheme to use", "schema": _STRING}},
    409: {
        "Retry-After": {
            "description": "seconds to wait before retrying, when a retry may work",
            "schema": _STRING,
        }
    },
    429: {"Retry-After": {"description": "seconds to wait before retrying", "schema": _STRING}},
}
_REPLAYED: dict[str, OpenAPIResponseHeader] = {
    REPLAYED_HEADER: {
        "description": "`true` when this is the stored response of an earlier request with the same Idempotency-Key",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
_LOCATION: dict[str, OpenAPIResponseHeader] = {
    "Location": {
        "description": "the new job's path as the caller reaches it: /jobs/{id} after the stage or base path the "
        "request came through (/v1/jobs/{id} on the execute-api URL)",
        "schema": _STRING,
    }
}


def _responses(
    success: dict[int, tuple[type | None, str]],
    *errors: int,
    idempotent: bool = False,
    descriptions: dict[int, str] | None = None,
) -> dict[int, OpenAPIResponse]:
    """The documented responses of a route: its successes (model, description), 400/401/429 and ``errors``
    (described by ``descriptions``, else ``_ERROR_DESCRIPTIONS``)."""
    declared: dict[int, OpenAPIResponse] = {}
    for status, (model, description) in success.items():
        response: OpenAPIResponse = {"description": description}
        if model is not None:
            response["content"] = {"application/json": {"model": model}}
        headers = {**(_REPLAYED if idempotent else {}), **(_LOCATION if status == HTTPStatus.CREATED else {})}
        if headers:
            response["headers"] = headers
        declared[status] = response
    for status in (400, 401, *errors, 429):
        declared[status] = {
            "description": (descriptions or {}).get(status, _ERROR_DESCRIPTIONS[status]),
            "content": {"application/json": {"model": ErrorBody}},
        }
        if status in _ERROR_HEADERS:
            declared[status]["headers"] = _ERROR_HEADERS[status]
    return declared


def _public_prefix() -> str:
    """What the caller's URL path has before this API's own paths: ``/v1`` on the execute-api URL (the
    stage), a custom domain's base path, or ``""``. API Gateway reports the path as the caller sent it in
    ``requestContext.path`` and the path within the API in ``path``; the prefix is the difference."""
    event = app.current_event.raw_event
    path = str(event.get("path") or "")
    public = str((event.get("requestContext") or {}).get("path") or path)
    return public.removesuffix(path) if path and public.endswith(path) else ""


def _replay_headers(replayed: bool) -> dict[str, str]:
    return {REPLAYED_HEADER: "true"} if replayed else {}


ApiDep = Annotated[Api, Depends(get_api)]
Owner = Annotated[str, Depends(caller)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=IDEMPOTENCY_HEADER,
        min_length=1,
        max_length=255,
        pattern=r"^[\x20-\x7e]+$",
        description="a unique key per logical request (IETF draft 'The Idempotency-Key HTTP Header Field'); "
        "repeats with the same key and request replay the first response for 24 h",
    ),
]
JobId = Annotated[str, Path(description="the job's id (`j_` and 20 hex digits)")]
Limit = Annotated[int, Query(ge=1, le=100, description="page size, 1-100")]
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_CURSOR_CHARS,
        pattern=CURSOR_PATTERN,
        description="`next_cursor` of the previous page, unchanged (opaque). A cursor this listing did not "
        "issue (another caller's or another listing's) is answered 404 naming `cursor`",
    ),
]


# --- routes ---------------------------------------------------------------------------------------

_F = TypeVar("_F", bound=Callable[..., Any])


def _route(operation_id: str, **options: Any) -> Callable[[_F], _F]:
    """Register the handler of route ``operation_id`` of ``routes.ROUTES``, with the method and path given
    there (the table API Gateway and the WSGI adapter are built from); ``options`` are Powertools' route
    options (summary, responses, ...)."""
    entry = routes.route(operation_id)
    return app.route(
        entry.resolver_path,
        entry.method,
        operation_id=operation_id if entry.documented else None,
        include_in_schema=entry.documented,
        **options,
    )


@_route(
    "createJob",
    summary="Register a job",
    tags=["jobs"],
    responses=_responses(
        {201: (Job, "Created"), 200: (Job, "An identical job already has this name: that job")},
        409,
        413,
        422,
        idempotent=True,
    ),
)
def create_job(
    body: JobCreate, api: ApiDep, owner: Owner, idempotency_key: IdempotencyKey = None
) -> Response[Job]:
    """Register a job for the caller. ``"command": "x"`` is shorthand for ``"target": {"type": "command", "name": "x"}``."""
    result = api.service.create_job(owner, body, idempotency_key=idempotency_key)
    headers = _replay_headers(result.replayed)
    if result.created:
        headers["Location"] = f"{_public_prefix()}/jobs/{result.job.id}"
    return Response(
        status_code=HTTPStatus.CREATED if result.created else HTTPStatus.OK,
        content_type=content_types.APPLICATION_JSON,
        body=result.job,
        headers=headers,
    )


@_route(
    "listJobs",
    summary="The caller's jobs, by name",
    tags=["jobs"],
    responses=_responses({200: (Page[Job], "A page of jobs")}, 404, descriptions={404: _CURSOR_NOT_FOUND}),
)
def list_jobs(api: ApiDep, owner: Owner, limit: Limit = 50, cursor: Cursor = None) -> Page[Job]:
    """A page of the caller's jobs; pass ``next_cursor`` back as ``cursor`` for the next one."""
    return api.service.list_jobs(owner, limit=limit, cursor=cursor)


@_route(
    "getJob",
    summary="Read a job",
    tags=["jobs"],
    responses=_responses({200: (Job, "The job")}, 404),
)
def get_job(id: JobId, api: ApiDep, owner: Owner) -> Job:
    return api.service.get_job(owner, id)


@_route(
    "updateJob",
    summary="Change a job",
    tags=["jobs"],
    responses=_responses({200: (Job, "The changed job")}, 404, 409, 413),
)
def update_job(id: JobId, body: JobPatch, api: ApiDep, owner: Owner) -> Job:
    """Fields given replace the stored ones (``retry`` merges field by field). Changing the schedule,
    timezone, start_at or end_at recomputes ``next_run_at`` from now on; fires still pending (inside their
    jitter window, or missed while the scheduler was down) are kept and follow the job's ``missed`` policy."""
    return api.service.update_job(owner, id, body)


@_route(
    "deleteJob",
    summary="Delete a job",
    tags=["jobs"],
    responses=_responses({204: (None, "Deleted: no new runs; run history is kept until retention")}, 404),
)
def delete_job(id: JobId, api: ApiDep, owner: Owner) -> Response[None]:
    api.service.delete_job(owner, id)
    return Response(status_code=HTTPStatus.NO_CONTENT)


@_route(
    "pauseJob",
    summary="Pause a job (it leaves the due index)",
    tags=["jobs"],
    responses=_responses({200: (Job, "The paused job")}, 404, 409),
)
def pause_job(id: JobId, api: ApiDep, owner: Owner) -> Job:
    return api.service.pause_job(owner, id)


@_route(
    "resumeJob",
    summary="Resume a job (missed fires follow its `missed` policy)",
    tags=["jobs"],
    responses=_responses({200: (Job, "The resumed job")}, 404, 409),
)
def resume_job(id: JobId, api: ApiDep, owner: Owner) -> Job:
    return api.service.resume_job(owner, id)


@_route(
    "triggerJob",
    summary="Run a job once now, outside its schedule",
    tags=["runs"],
    responses=_responses({202: (Run, "The run, queued")}, 404, 409, 422, idempotent=True),
)
def trigger_job(
    id: JobId, api: ApiDep, owner: Owner, idempotency_key: IdempotencyKey = None
) -> Response[Run]:
    result = api.service.trigger_job(owner, id, idempotency_key=idempotency_key)
    return Response(
        status_code=HTTPStatus.ACCEPTED,
        content_type=content_types.APPLICATION_JSON,
        body=result.run,
        headers=_replay_headers(result.replayed),
    )


@_route(
    "listRuns",
    summary="A job's runs, newest first",
    description="Newest `scheduled_for` first, optionally only one `status`. A deleted job's runs stay "
    "listed for its owner until retention.",
    tags=["runs"],
    responses=_responses(
        {200: (Page[Run], "A page of runs")},
        404,
        descriptions={404: "No such job (or not the caller's), or a `cursor` this listing did not issue"},
    ),
)
def list_runs(
    id: JobId,
    api: ApiDep,
    owner: Owner,
    status: Annotated[RunStatus | None, Query(description="only runs in this status")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[Run]:
    return api.service.list_runs(owner, id, status=status, limit=limit, cursor=cursor)


@_route("getOpenApi", enable_validation=False)
def openapi_json() -> Response[dict[str, Any]]:
    """The OpenAPI document of this API with this deployment's limits (no credentials needed: it holds no
    data)."""
    return Response(
        status_code=HTTPStatus.OK,
        content_type=content_types.APPLICATION_JSON,
        body=app.openapi_document(current_api().settings),
    )
