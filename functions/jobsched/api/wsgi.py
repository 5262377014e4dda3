"""A WSGI app that serves the API through the SAME Lambda handler API Gateway calls.

Each HTTP request becomes an API Gateway REST proxy event (payload v1: ``httpMethod``, ``path``, ``resource``,
``pathParameters``, ``queryStringParameters``, ``multiValue*``, ``headers``, ``body``, ``isBase64Encoded``,
``requestContext`` with ``identity``/``requestId``/``stage``), the handler resolves it, and its proxy response
becomes the HTTP response. Local mode serves this app over HTTP; tests drive it in-process.

Requests are handled one at a time (a lock), like one Lambda execution environment: Powertools' resolver
keeps the current event in class state. Local mode has no IAM in front, so ``identity.userArn`` is empty and
the API authenticates the bearer token (``Settings.local_tokens_file``).
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from jobsched.api import routes
from jobsched.lambda_context import LOCAL_ACCOUNT_ID, LocalLambdaContext

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
StartResponse = Callable[..., Any]

_TEXT_TYPES = ("application/json", "text/", "application/x-www-form-urlencoded")


API_TIMEOUT_S = 30
"""The local API function's timeout (API Gateway ends an integration after 29 s)."""


def api_context() -> LocalLambdaContext:
    """The Lambda context of one local API invocation."""
    return LocalLambdaContext("jobsched-api-local", timeout_s=API_TIMEOUT_S, memory_limit_in_mb=512)


def _match_resource(path: str) -> tuple[str, dict[str, str] | None]:
    """``/jobs/j_1/runs`` -> ``("/jobs/{id}/runs", {"id": "j_1"})`` (the resource templates of
    ``jobsched.api.routes``, as API Gateway maps them); unknown paths map to themselves."""
    matched = routes.match(path)
    if matched is None:
        return path, None
    template, parameters = matched
    return template, parameters or None


def _headers(environ: Mapping[str, Any]) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:]
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = key
        else:
            continue
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value == "":
            continue  # WSGI servers set these empty when the request has none
        title = "-".join(word.capitalize() for word in name.split("_"))
        headers.setdefault(title, []).append(str(value))
    return headers


def _is_text(content_type: str) -> bool:
    return not content_type or content_type.startswith(_TEXT_TYPES) or "+json" in content_type


def event_from_environ(environ: Mapping[str, Any], body: bytes, *, stage: str = "local") -> dict[str, Any]:
    """The API Gateway REST proxy event (v1) of one WSGI request with its ``body`` bytes."""
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    raw_path = str(environ.get("PATH_INFO", "") or "/")
    path = raw_path.encode("latin-1", "replace").decode("utf-8", "replace")  # PEP 3333 "bytes as latin-1"
    query = str(environ.get("QUERY_STRING", ""))
    pairs = [
        (
            k.encode("latin-1", "replace").decode("utf-8", "replace"),
            v.encode("latin-1", "replace").decode("utf-8", "replace"),
        )
        for k, v in parse_qsl(query, keep_blank_values=True)
    ]
    multi_query: dict[str, list[str]] = {}
    for key, value in pairs:
        multi_query.setdefault(key, []).append(value)
    multi_headers = _headers(environ)
    content_type = (multi_headers.get("Content-Type") or [""])[0].lower()
    text = _is_text(content_type)
    body_text: str | None
    if not body:
        body_text, encoded = None, False
    elif text:
        try:
            body_text, encoded = body.decode("utf-8"), False
        except UnicodeDecodeError:
            body_text, encoded = base64.b64encode(body).decode(), True
    else:
        body_text, encoded = base64.b64encode(body).decode(), True
    resource, path_parameters = _match_resource(path)
    now = time.time()
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": {name: values[-1] for name, values in multi_headers.items()} or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": path_parameters,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": path,  # as the client sent it: local mode serves the API at the root, without the stage
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "accountId": LOCAL_ACCOUNT_ID,
            "apiId": "local",
            "protocol": str(environ.get("SERVER_PROTOCOL", "HTTP/1.1")),
            "identity": {
                "sourceIp": str(environ.get("REMOTE_ADDR", "127.0.0.1")),
                "userAgent": multi_headers["User-Agent"][0] if "User-Agent" in multi_headers else None,
                "userArn": None,
                "user": None,
                "caller": None,
                "accountId": None,
                "accessKey": None,
            },
        },
        "body": body_text,
        "isBase64Encoded": encoded,
    }


def read_body(environ: Mapping[str, Any], limit: int) -> bytes:
    """The request body of a WSGI ``environ``, at most ``limit + 1`` bytes (enough for the API to answer 413);
    empty when there is none or ``CONTENT_LENGTH`` is not a number."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    stream = environ.get("wsgi.input")
    if stream is None or length <= 0:
        return b""
    return bytes(stream.read(min(length, limit + 1)))


def _response_headers(response: Mapping[str, Any]) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, values in (response.get("multiValueHeaders") or {}).items():
        for value in values if isinstance(values, list) else [values]:
            headers.append((str(name), str(value)))
        seen.add(str(name).lower())
    for name, value in (response.get("headers") or {}).items():
        if str(name).lower() not in seen:
            headers.append((str(name), str(value)))
    return headers


class ApiWsgiApp:
    """WSGI application calling ``handler`` once per request: the API's Lambda handler
    (``jobsched.handlers.api.handler``; the caller passes it in, since this adapter does not import the
    layer above it) or any function of an API Gateway REST proxy event and a Lambda context returning a
    proxy response.

    ``max_body_bytes`` bounds how much of a body is read (the handler itself answers 413 past its limit).
    """

    def __init__(
        self, handler: Handler, *, stage: str = "local", max_body_bytes: int = 10 * 1024 * 1024
    ) -> None:
        self.handler = handler
        self.stage = stage
        self.max_body_bytes = max_body_bytes
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        body = read_body(environ, self.max_body_bytes)
        event = event_from_environ(environ, body, stage=self.stage)
        with self._lock:
            response = self.handler(event, api_context())
        status = int(response.get("statusCode", 500))
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else str(payload).encode("utf-8")
        headers = [(k, v) for k, v in _response_headers(response) if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(data))))
        start_response(f"{status} {_reason(status)}", headers)
        return [data]


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
