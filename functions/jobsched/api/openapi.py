"""OpenAPI handling: the Powertools REST resolver with request validation after admission, the OpenAPI
document it generates (cleaned up to describe this API's own error shape), and the routes' documented
responses.

Request validation after admission, with public Powertools API only. Powertools 3.37 always runs its own
request validation first, before any user middleware (a known limitation, Powertools discussion #4656),
and admission must come before it (``jobsched.api.admission``). So the resolver keeps validation on (the
document is generated with the models and the 422/500 handling), and each admitted route turns the
resolver's validation off for itself (``enable_validation=False``, a documented per-route setting) and
runs the same public middlewares in its own ``middlewares`` list instead:
``[Admission, OpenAPIRequestValidationMiddleware, OpenAPIResponseValidationMiddleware]``, which is the
order Powertools builds with admission in front.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.middlewares import BaseMiddlewareHandler
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
    OpenAPIResponseValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseHeader

from jobsched.api.admission import parse_json_body
from jobsched.api.document import describe_rules, for_deployment
from jobsched.api.errors import IDEMPOTENCY_HEADER, ErrorBody
from jobsched.api.schemas import drop_null
from jobsched.settings import Settings

__all__ = ["API_TITLE", "API_VERSION", "REPLAYED_HEADER", "JobschedResolver", "responses"]

API_TITLE = "jobsched"
API_VERSION = "1.0.0"
REPLAYED_HEADER = "Idempotent-Replayed"
"""Response header, ``true`` on the stored response of an earlier request with the same Idempotency-Key."""

_DESCRIPTION = (
    "Register jobs (one-off, cron, rate) and read their runs. Every run starts on time and runs "
    "effectively once; targets receive the run id as their idempotency key. Errors are "
    '`{"error": {"code", "message", "field"}}`. In AWS every call is signed with SigV4 (IAM); '
    "locally, send `Authorization: Bearer <token>`."
)


class JobschedResolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` with validation on, ``admission`` before it on admitted routes, and the
    OpenAPI document of this API.

    Request bodies are parsed with ``admission.parse_json_body``; a response that fails validation is a
    500. Register routes with :meth:`admitted_route` (admission, request validation, response validation)
    or, for a route that needs neither, Powertools' ``route``.
    """

    def __init__(self, admission: BaseMiddlewareHandler) -> None:
        super().__init__(
            enable_validation=True,
            response_validation_error_http_code=HTTPStatus.INTERNAL_SERVER_ERROR,
            json_body_deserializer=parse_json_body,
        )
        self._admitted: list[Callable[..., Any]] = [
            admission,
            OpenAPIRequestValidationMiddleware(),
            OpenAPIResponseValidationMiddleware(has_response_validation_error=True),
        ]
        self._document: dict[str, Any] | None = None

    def admitted_route(self, rule: str, method: str, **options: Any) -> Callable[[Any], Any]:
        """Powertools' ``route(rule, method, **options)`` whose requests pass admission, then request
        validation, and whose responses are validated (see the module docstring for why this is done with
        the route's own middlewares)."""
        return self.route(rule, method, enable_validation=False, middlewares=self._admitted, **options)

    def openapi_document(self, settings: Settings | None = None) -> dict[str, Any]:
        """The OpenAPI 3.1 document, generated from the routes and models (computed once; a fresh copy),
        with the limits of the deployment ``settings`` describes when given (``document.for_deployment``)."""
        if self._document is None:
            self._document = self._generate_document()
        if settings is not None:
            return for_deployment(self._document, settings)
        return copy.deepcopy(self._document)

    def _generate_document(self) -> dict[str, Any]:
        document: dict[str, Any] = self.get_openapi_schema(
            title=API_TITLE,
            version=API_VERSION,
            description=_DESCRIPTION,
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
        _clean_up(document)
        describe_rules(document)
        return document


def _clean_up(document: dict[str, Any]) -> None:
    """Make Powertools' generated ``document`` say what this API answers.

    Powertools documents its own 422 "detail" body on every route; this API answers bad input with 400 in
    its error shape (see ``errors``) and uses 422 only for a reused Idempotency-Key, documented per route.
    A 204 has no content; a 500 has the error shape; optional parameters are plain (see
    :func:`_tidy_parameter`).
    """
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                _tidy_parameter(parameter)
            declared = operation.get("responses", {})
            if "204" in declared:
                declared["204"].pop("content", None)
            if "HTTPValidationError" in str(declared.get("422", "")):
                del declared["422"]
            server_error = declared.get("500")
            if server_error is not None:
                server_error["description"] = "Internal error (logged; never caused by bad input)"
                server_error["content"] = {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                }
    schemas = document.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)


def _tidy_parameter(parameter: dict[str, Any]) -> None:
    """An optional parameter is documented as ``required: false`` with its plain schema (a header or query
    value is never JSON null), and headers keep their canonical spelling (``Idempotency-Key``)."""
    drop_null(parameter.get("schema", {}))
    if parameter.get("in") == "header" and parameter.get("name", "").lower() == IDEMPOTENCY_HEADER.lower():
        parameter["name"] = IDEMPOTENCY_HEADER


# --- the routes' documented responses -------------------------------------------------------------

_ERROR_DESCRIPTIONS = {
    400: "Bad input: `error.field` names the field",
    401: "No or bad credentials",
    403: "The caller has no owner (`owner_from` is `tag:<key>` and the caller's role or user has no such tag)",
    404: "No such job (or not the caller's)",
    409: "Conflict",
    410: "Runs past the retention, and no archive keeps them: `error.message` says where the history went",
    413: "Request body too large",
    422: "Idempotency-Key reused with a different request",
    429: "Throttled; retry after a pause",
}

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


def responses(
    success: dict[int, tuple[type | None, str]],
    *errors: int,
    idempotent: bool = False,
    descriptions: dict[int, str] | None = None,
) -> dict[int, OpenAPIResponse]:
    """The documented responses of a route: its successes ``{status: (model or None, description)}``,
    400/401/403/429 and ``errors`` (described by ``descriptions``, else the standard description of the status),
    each error with the error body and its headers (``WWW-Authenticate``, ``Retry-After``). ``idempotent``
    documents ``Idempotent-Replayed`` on the successes; a 201 documents ``Location``."""
    declared: dict[int, OpenAPIResponse] = {}
    for status, (model, description) in success.items():
        response: OpenAPIResponse = {"description": description}
        if model is not None:
            response["content"] = {"application/json": {"model": model}}
        headers = {**(_REPLAYED if idempotent else {}), **(_LOCATION if status == HTTPStatus.CREATED else {})}
        if headers:
            response["headers"] = headers
        declared[status] = response
    for status in (400, 401, 403, *errors, 429):
        declared[status] = {
            "description": (descriptions or {}).get(status, _ERROR_DESCRIPTIONS[status]),
            "content": {"application/json": {"model": ErrorBody}},
        }
        if status in _ERROR_HEADERS:
            declared[status]["headers"] = _ERROR_HEADERS[status]
    return declared
