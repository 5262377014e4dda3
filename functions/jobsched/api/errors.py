"""The one place that turns exceptions into HTTP responses, in design §3's error shape.

Every error body is ``{"error": {"code": "...", "message": "...", "field": "..." | null}}``:

| status | code | raised by |
|---|---|---|
| 400 | ``invalid_input``, ``invalid_json``, ``invalid_schedule``, ``invalid_timezone``, ``unsupported_media_type`` | request validation (Powertools ``RequestValidationError``), ``InvalidInput``, ``ScheduleError`` |
| 401 | ``unauthorized`` | ``Unauthorized`` |
| 403 | ``forbidden`` | ``Forbidden`` (the caller has no owner: ``owner_from = "tag:<key>"`` and no usable tag) |
| 404 | ``not_found`` | ``JobNotFound`` (absent OR another owner's), ``CursorNotFound`` (field ``cursor``), ``UpstreamNotFound`` (field ``after.job``), ``ArchiveQueryNotFound`` (field ``query_id``), unknown path |
| 405 | ``method_not_allowed`` | a known path with another method |
| 409 | ``name_taken``, ``conflict``, ``request_in_progress`` | ``NameConflict``, ``ConcurrentChange``, ``RunNotRetryable``, ``RunNotCancellable``, ``IdempotencyAlreadyInProgressError`` |
| 410 | ``beyond_retention`` | ``HistoryGone`` (field ``since``: runs past the retention and no archive configured) |
| 413 | ``payload_too_large`` | ``PayloadTooLarge`` |
| 422 | ``idempotency_key_reused`` | ``IdempotencyValidationError`` |
| 429 | ``throttled``, ``quota_exceeded`` | DynamoDB/SQS throttling, ``QuotaExceeded`` (``jobs``, ``fires_per_minute``; ``triggers_per_minute`` with ``Retry-After``) |
| 500 | ``internal_error`` | anything else (logged with its stack; never for bad input) |

Codes 409 and 422 for key reuse follow the IETF draft "The Idempotency-Key HTTP Header Field".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
    ResponseValidationError,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from botocore.exceptions import ClientError
from pydantic import BaseModel, Field

from jobsched.api.exceptions import (
    JSON_BODY_ONLY,
    ApiProblem,
    ArchiveQueryNotFound,
    ConcurrentChange,
    CursorNotFound,
    Forbidden,
    HistoryGone,
    InvalidInput,
    JobNotFound,
    NameConflict,
    PayloadTooLarge,
    RunNotCancellable,
    RunNotRetryable,
    Unauthorized,
    UpstreamNotFound,
)
from jobsched.api.validation import describe
from jobsched.domain.quotas import QuotaExceeded
from jobsched.observability import logger
from jobsched.schedule.engine import ScheduleError

IDEMPOTENCY_HEADER = "Idempotency-Key"

THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "Throttling",
        "TooManyRequestsException",
    }
)


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``code``, a ``message`` a person can act on, the ``field`` concerned."""

    code: str = Field(examples=["invalid_schedule"])
    message: str
    field: str | None = Field(None, description="the request field (dotted for nested ones), or null")


class ErrorBody(BaseModel):
    """The body of every error response (design §3)."""

    error: ErrorDetail


ErrorResponse = Response[dict[str, Any]]
"""A response whose body is an ``ErrorBody`` as JSON."""


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers: Mapping[str, str] | None = None
) -> ErrorResponse:
    """A JSON error response in the API's error shape (design §3)."""
    body = ErrorBody(error=ErrorDetail(code=code, message=message, field=field))
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump(mode="json"),
        headers=dict(headers or {}),
    )


# --- request validation -------------------------------------------------------------------------


def validation_error_response(error: RequestValidationError) -> ErrorResponse:
    """400 naming the first invalid field (path, then query, header, body), or ``invalid_json``."""
    errors = list(error.errors())
    if not errors:
        return error_response(HTTPStatus.BAD_REQUEST, "invalid_input", "the request is not valid")
    first = errors[0]
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error") or "malformed JSON"
        return error_response(
            HTTPStatus.BAD_REQUEST, "invalid_json", f"request body is not valid JSON: {detail}", "body"
        )
    field, message = describe(first)
    return error_response(HTTPStatus.BAD_REQUEST, "invalid_input", message, field)


# --- the mapping --------------------------------------------------------------------------------


def _is_throttling(error: BaseException | None) -> bool:
    while error is not None:
        if isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") in THROTTLING_CODES:
            return True
        error = error.__cause__
    return False


def _internal(error: Exception) -> ErrorResponse:
    if _is_throttling(error):
        logger.warning("throttled by AWS", error=str(error))
        return error_response(
            HTTPStatus.TOO_MANY_REQUESTS,
            "throttled",
            "the service is busy; retry after a short pause",
            headers={"Retry-After": "1"},
        )
    logger.exception("unhandled error", error_type=type(error).__name__)
    return error_response(
        HTTPStatus.INTERNAL_SERVER_ERROR,
        "internal_error",
        "internal error; retry later or contact the operators",
    )


def _schedule_error(error: ScheduleError) -> ErrorResponse:
    code = {"schedule": "invalid_schedule", "timezone": "invalid_timezone"}.get(error.field, "invalid_input")
    return error_response(HTTPStatus.BAD_REQUEST, code, error.message, error.field)


@dataclass(frozen=True)
class Answer:
    """How one exception is answered: ``status``, ``code``, ``field`` and ``headers``, with ``message``, or when
    that is None the exception's own (``ApiProblem.message``). Called with the exception, returns the response."""

    status: HTTPStatus
    code: str
    field: str | None = None
    message: str | None = None
    headers: Mapping[str, str] | None = None

    def __call__(self, error: Exception) -> ErrorResponse:
        message = self.message
        if message is None:
            message = error.message if isinstance(error, ApiProblem) else str(error)
        return error_response(self.status, self.code, message, self.field, self.headers)


RETRY_SHORTLY = {"Retry-After": "1"}

ANSWERS: dict[type[Exception], Answer] = {
    RequestUnsupportedContentType: Answer(
        HTTPStatus.BAD_REQUEST, "unsupported_media_type", "Content-Type", JSON_BODY_ONLY
    ),
    JobNotFound: Answer(HTTPStatus.NOT_FOUND, "not_found"),
    UpstreamNotFound: Answer(HTTPStatus.NOT_FOUND, "not_found", "after.job"),
    CursorNotFound: Answer(HTTPStatus.NOT_FOUND, "not_found", "cursor"),
    ArchiveQueryNotFound: Answer(HTTPStatus.NOT_FOUND, "not_found", "query_id"),
    HistoryGone: Answer(HTTPStatus.GONE, "beyond_retention", "since"),
    NameConflict: Answer(HTTPStatus.CONFLICT, "name_taken", "name"),
    RunNotCancellable: Answer(HTTPStatus.CONFLICT, "conflict"),
    ConcurrentChange: Answer(HTTPStatus.CONFLICT, "conflict", headers=RETRY_SHORTLY),
    PayloadTooLarge: Answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large", "body"),
    IdempotencyValidationError: Answer(
        HTTPStatus.UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
        IDEMPOTENCY_HEADER,
        "this Idempotency-Key was already used with a different request; use a new key for a new request",
    ),
    IdempotencyAlreadyInProgressError: Answer(
        HTTPStatus.CONFLICT,
        "request_in_progress",
        IDEMPOTENCY_HEADER,
        "a request with this Idempotency-Key is still being processed; retry shortly",
        RETRY_SHORTLY,
    ),
}
"""The exceptions answered by status, code and field alone (the others have handlers below)."""


def register_error_handlers(app: APIGatewayRestResolver, allowed_methods: Callable[[str], list[str]]) -> None:
    """Register every exception handler on ``app``.

    ``allowed_methods(path)`` lists the methods of a known path (empty for unknown ones): a request for a
    known path with another method is answered 405 with ``Allow``, anything else unknown 404.
    """

    for kind, answer in ANSWERS.items():
        app.exception_handler(kind)(answer)

    @app.exception_handler(InvalidInput)
    def _invalid(error: InvalidInput) -> ErrorResponse:
        return error_response(HTTPStatus.BAD_REQUEST, error.code, error.message, error.field)

    @app.exception_handler(Forbidden)
    def _forbidden(error: Forbidden) -> ErrorResponse:
        return error_response(HTTPStatus.FORBIDDEN, "forbidden", error.message, error.field)

    @app.exception_handler(ScheduleError)
    def _schedule(error: ScheduleError) -> ErrorResponse:
        return _schedule_error(error)

    @app.exception_handler(RequestValidationError)
    def _request_validation(error: RequestValidationError) -> ErrorResponse:
        return validation_error_response(error)

    @app.exception_handler(QuotaExceeded)
    def _quota(error: QuotaExceeded) -> ErrorResponse:
        # a rate quota frees itself: Retry-After says when; a capacity quota (jobs, fires_per_minute) frees only
        # when the owner deletes or slows a job, or an operator raises it, so it names no wait
        headers = {"Retry-After": str(error.retry_after_s or 1)} if error.rate else None
        return error_response(
            HTTPStatus.TOO_MANY_REQUESTS, "quota_exceeded", error.message, error.field, headers
        )

    @app.exception_handler(RunNotRetryable)
    def _not_retryable(error: RunNotRetryable) -> ErrorResponse:
        wait = error.retry_after_s
        headers = None if wait is None else {"Retry-After": str(wait)}
        return error_response(HTTPStatus.CONFLICT, "conflict", error.message, headers=headers)

    @app.exception_handler(Unauthorized)
    def _unauthorized(error: Unauthorized) -> ErrorResponse:
        return error_response(
            HTTPStatus.UNAUTHORIZED,
            "unauthorized",
            error.message,
            headers={"WWW-Authenticate": error.challenge},
        )

    @app.exception_handler(IdempotencyPersistenceLayerError)
    def _keys_store(error: IdempotencyPersistenceLayerError) -> ErrorResponse:
        return _internal(error)

    @app.exception_handler(ResponseValidationError)
    def _bad_response(error: ResponseValidationError) -> ErrorResponse:
        logger.error("response failed its own schema", errors=[dict(e) for e in error.errors()][:5])
        return error_response(
            HTTPStatus.INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal error; retry later or contact the operators",
        )

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> ErrorResponse:
        return _internal(error)

    @app.not_found
    def _no_route(error: NotFoundError) -> ErrorResponse:
        event = app.current_event
        allowed = allowed_methods(event.path)
        if allowed and event.http_method.upper() not in allowed:
            return error_response(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "method_not_allowed",
                f"{event.http_method} is not supported on {event.path}; use {', '.join(allowed)}",
                headers={"Allow": ", ".join(allowed)},
            )
        return error_response(HTTPStatus.NOT_FOUND, "not_found", f"no such resource: {event.path}")
