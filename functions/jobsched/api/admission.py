"""Admission: the checks a request passes before Powertools parses and validates it.

In order: the caller's identity -> owner (``Unauthorized``, 401), the body's size (``PayloadTooLarge``, 413,
above ``Settings.api_max_body_bytes``), a body sent with ``Content-Type: application/json`` (else
``InvalidInput``, 400, code ``unsupported_media_type``, field ``Content-Type``), a body that is JSON text
(``InvalidInput``, 400: this API takes no form data and no other encoding than UTF-8), a query parameter or a body the route does not take (``InvalidInput``,
400 naming it: ``jobsched.api.routes``). They come first so that an unauthenticated or oversized request
is refused before its body is parsed. Also here: :func:`parse_json_body`, the resolver's JSON parser, which
turns JSON Python cannot read into a 400 instead of a 500.

``jobsched.api.openapi.JobschedResolver`` runs :class:`Admission` ahead of request validation on every
documented route; the errors become responses in ``jobsched.api.errors``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.middlewares import BaseMiddlewareHandler, NextMiddleware

from jobsched.api import routes
from jobsched.api.auth import Authenticator
from jobsched.api.exceptions import JSON_BODY_ONLY, InvalidInput, PayloadTooLarge
from jobsched.settings import Settings

if TYPE_CHECKING:
    from jobsched.api.service import JobService

__all__ = ["Admission", "Admitting", "parse_json_body"]


class Admitting(Protocol):
    """What admission reads of the API's wiring (``jobsched.api.app.Api`` has it)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def authenticator(self) -> Authenticator: ...

    @property
    def service(self) -> JobService: ...


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
    """``application/json`` or ``application/*+json`` (any parameters). A body without a Content-Type is not
    taken as JSON: a form of another web site can send a body without one (or ``text/plain``) with no
    CORS preflight, so requiring ``application/json`` keeps such a body from reaching a route."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _spell_json_for_the_parser(event: dict[str, Any]) -> None:
    """Give a body admitted as JSON (``_is_json``) the Content-Type ``application/json`` in ``event``'s headers.
    Powertools parses a body as JSON only when its Content-Type starts with ``application/json`` as spelled
    (case-sensitive, no ``+json``) and refuses any other; ``_is_json`` is the one rule of what is JSON."""
    for field in ("headers", "multiValueHeaders"):
        headers = event.get(field)
        if not isinstance(headers, dict):
            continue
        for name in [name for name in headers if name.lower() == "content-type"]:
            headers[name] = ["application/json"] if field == "multiValueHeaders" else "application/json"


class Admission(BaseMiddlewareHandler):
    """A Powertools middleware admitting a request to request validation and the route.

    ``api`` returns the current wiring (read per request, so tests and local mode can swap it). Raises
    ``Unauthorized`` (no or bad credentials), then ``PayloadTooLarge`` (body over
    ``Settings.api_max_body_bytes``), then ``InvalidInput`` (a body without ``Content-Type:
    application/json``, field ``Content-Type``; a body that is not JSON text, or a JSON array; a query
    parameter or a body the route does not take); on success the
    owner is in ``app.context["owner"]``, the actor in ``app.context["actor"]`` and the idempotency layer knows the Lambda context.
    """

    def __init__(self, api: Callable[[], Admitting]) -> None:
        super().__init__()
        self._api = api

    def handler(self, app: Any, next_middleware: NextMiddleware) -> Response:
        api = self._api()
        event = app.current_event.raw_event
        caller = api.authenticator.caller_of(event)
        app.append_context(owner=caller.owner, actor=caller.actor)
        body, limit = _body_bytes(event), api.settings.api_max_body_bytes
        if len(body) > limit:
            raise PayloadTooLarge(len(body), limit)
        if body and not _is_json(app.current_event.headers.get("content-type")):
            raise InvalidInput("Content-Type", JSON_BODY_ONLY, code="unsupported_media_type")
        if body:
            _spell_json_for_the_parser(event)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(
                "body", "request body is not valid JSON: not UTF-8 text", code="invalid_json"
            ) from None
        if _is_array(text):
            # Powertools' body validation takes the one object of ``[{...}]`` as the body: refuse it here
            raise InvalidInput("body", "request body must be a JSON object")
        _refuse_what_the_route_does_not_take(app.current_event, bool(body))
        if api.service.idempotency is not None:
            api.service.idempotency.bind_invocation(app.lambda_context)
        return next_middleware(app)


def _refuse_what_the_route_does_not_take(event: Any, has_body: bool) -> None:
    """A query parameter the route does not take (``routes.Route.query``), or a body sent to a route that takes
    none (``routes.Route.body``), is refused naming it (``InvalidInput``), never ignored: a filter one listing
    takes and another does not (``since`` on ``GET /jobs/{id}/runs``), a misspelled one, or ``scheduled_for``
    sent to a trigger would otherwise be dropped and the answer read as if it had applied."""
    entry = routes.find(event.http_method, event.path)
    if entry is None:
        return
    unknown = sorted(set(event.query_string_parameters or {}) - set(entry.query))
    if unknown:
        takes = f"it takes {', '.join(entry.query)}" if entry.query else "it takes none"
        raise InvalidInput(
            unknown[0], f"{unknown[0]} is not a query parameter of {entry.method} {entry.path}; {takes}"
        )
    if has_body and not entry.body:
        raise InvalidInput("body", f"{entry.method} {entry.path} takes no request body; send none")


def _is_array(text: str) -> bool:
    """Whether a request body is a JSON array (every body of the API is an object, or absent). Malformed JSON is
    left to the body's own parsing, which names it ``invalid_json``."""
    if not text.lstrip().startswith("["):
        return False
    try:
        return isinstance(parse_json_body(text), list)
    except json.JSONDecodeError:
        return False


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
