"""``jobsched ui``: the web console for a deployment, served from this machine.

A web server on 127.0.0.1 serves the console's files (``jobsched.console``) and forwards the console's API
calls (``/jobs...``, ``/runs...``, ``/openapi.json``) to ``--api``, authenticated as the CLI's client
authenticates them (``jobsched.client.connection_auth``): SigV4 from the user's AWS credentials for an API
Gateway URL (or with ``--sigv4-region``), a bearer token for local mode. No new public endpoint, user pool or
secret: the browser talks only to 127.0.0.1, and the credentials never leave this process.

Since the proxy adds credentials to what it forwards, it answers only its console (``docs/security.md``):
the server answers only its own loopback names in ``Host`` (``jobsched.local.server.HostGuard``, against DNS
rebinding; ``--accept-host`` adds names), a request that changes something must come from the console's
own page (:func:`cross_site_problem`, against cross-site request forgery), and only paths under the API's
prefixes, without dot segments or encoded slashes, are forwarded (:func:`path_problem`).
"""

from __future__ import annotations

import json
import re
import signal
import threading
import webbrowser
from collections.abc import Iterable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import httpx
import typer

from jobsched.api.wsgi import read_body
from jobsched.cli.options import Connection, find_dev_token, injected, option_groups
from jobsched.client import ApiError, ApiUnreachable, connection_auth, is_loopback
from jobsched.console import PREFIX, ConsoleApp, StartResponse
from jobsched.exits import USAGE_ERROR, fail
from jobsched.local.command import AcceptHostOpt
from jobsched.local.server import ApiServer

__all__ = [
    "CONSOLE_HEADER",
    "FORWARDED",
    "SigningProxy",
    "console_server",
    "cross_site_problem",
    "path_problem",
    "ui_command",
]

FORWARDED = ("/jobs", "/runs", "/openapi.json")
"""Path prefixes forwarded to the API (a path equal to one, or under it); others answer 404."""
_REQUEST_HEADERS = ("content-type", "accept", "idempotency-key")
_DROPPED_RESPONSE_HEADERS = {
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "set-cookie",  # a cookie for localhost would reach every server on this machine, whatever its port
}
_MAX_BODY_BYTES = 10 * 1024 * 1024


CONSOLE_HEADER = "X-Jobsched-Console"
"""The header the console sends on every call (value ``1``): a page of another origin cannot send it
without a CORS preflight, which the proxy never grants (it drops every ``Access-Control-*`` header of the
API's answers)."""
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
_ENCODED_DOT_OR_SLASH = re.compile(r"%(2e|2f|5c)", re.IGNORECASE)


def _forwarded(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in FORWARDED)


def path_problem(environ: dict[str, Any]) -> str | None:
    """Why a request's path must not be forwarded, or None. A path is refused when it has a dot segment
    (``.`` or ``..``, sent as such or percent-encoded as ``%2e``), an encoded slash or backslash (``%2F``,
    ``%5C``, also double-encoded) or a backslash: forwarded, such a path could name a resource outside
    :data:`FORWARDED` once the upstream or httpx resolves it. Reads ``REQUEST_URI`` (the target as sent,
    ``jobsched.local.server``) when the server gives it, and ``PATH_INFO`` (decoded) always."""
    raw = str(environ.get("REQUEST_URI") or "").split("?", 1)[0]
    path = str(environ.get("PATH_INFO") or "/")
    if _ENCODED_DOT_OR_SLASH.search(raw) or _ENCODED_DOT_OR_SLASH.search(path):
        return "the path has an encoded dot, slash or backslash (%2E, %2F, %5C)"
    if "\\" in path or any(segment in (".", "..") for segment in path.split("/")):
        return "the path has a dot segment (. or ..) or a backslash"
    return None


def cross_site_problem(environ: dict[str, Any]) -> tuple[str, str] | None:
    """Why a request that changes something (any method but GET, HEAD, OPTIONS) does not come from the
    console's own page, as ``(field, message)``, or None. It must carry :data:`CONSOLE_HEADER` ``: 1`` and
    be same-origin: an ``Origin`` equal to ``http://`` + its ``Host`` (which ``HostGuard`` has accepted), or,
    without an ``Origin``, ``Sec-Fetch-Site: same-origin``. A form or script of another site can send
    neither, so it cannot have the proxy sign a change (cross-site request forgery)."""
    if str(environ.get("REQUEST_METHOD", "GET")).upper() in _SAFE_METHODS:
        return None
    if environ.get("HTTP_X_JOBSCHED_CONSOLE") != "1":
        return CONSOLE_HEADER, f"only the console may change things through jobsched ui ({CONSOLE_HEADER}: 1)"
    origin = environ.get("HTTP_ORIGIN")
    if origin is not None:
        if origin != f"http://{environ.get('HTTP_HOST', '')}":
            return "Origin", "a request from another origin is refused"
    elif environ.get("HTTP_SEC_FETCH_SITE") != "same-origin":
        return "Origin", "a request that changes something needs an Origin of this console"
    return None


class SigningProxy:
    """WSGI app that forwards API calls to ``api_url`` (the API root, e.g. an API Gateway stage URL) and
    answers with the API's status, headers and body unchanged, but for CORS headers (``Access-Control-*``,
    dropped: no page of another origin may read an answer the proxy signed for) and ``Set-Cookie`` (dropped,
    and no cookie is kept between calls).

    Only ``Content-Type``, ``Accept`` and ``Idempotency-Key`` are forwarded from the browser (never its
    ``Authorization``): a change that does not come from the console's page is refused 403 (code
    ``forbidden``, field ``X-Jobsched-Console`` or ``Origin``: :func:`cross_site_problem`), a path with dot
    segments or encoded slashes 400 (code ``invalid_input``, field ``path``: :func:`path_problem`), a path
    outside :data:`FORWARDED` 404; each call is signed here (``connection_auth``: SigV4 with ``credentials``, a botocore
    ``Credentials``, or the standard AWS chain when None; or ``token`` as a bearer). When no call can be made
    the answer is 502 in the API's error shape: code ``no_credentials`` (no AWS credentials found) or
    ``unreachable`` (connection refused, DNS failure, timeout). ``transport`` replaces the network (tests).
    """

    def __init__(
        self,
        api_url: str,
        *,
        token: str | None = None,
        sigv4_region: str | None = None,
        credentials: Any = None,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        auth, headers = connection_auth(
            self.api_url, token=token, credentials=credentials, sigv4_region=sigv4_region
        )
        self._http = httpx.Client(
            base_url=self.api_url,
            auth=auth,
            headers={"User-Agent": "jobsched-ui", **headers},
            # a jar that keeps no cookie: every call carries only its signature or token
            cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
            timeout=timeout_s,
            transport=transport or httpx.HTTPTransport(retries=2),
        )

    def close(self) -> None:
        self._http.close()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        refused = cross_site_problem(environ)
        if refused is not None:
            return _answer(start_response, 403, "forbidden", refused[1], refused[0])
        escape = path_problem(environ)
        if escape is not None:
            return _answer(start_response, 400, "invalid_input", escape, "path")
        path = str(environ.get("PATH_INFO") or "/")
        if not _forwarded(path):
            return _answer(start_response, 404, "not_found", f"no such resource: {path}")
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        query = str(environ.get("QUERY_STRING") or "")
        # PEP 3333: PATH_INFO is the decoded path as latin-1; quote it back into one URL path
        url = quote(path.encode("latin-1", "replace").decode("utf-8", "replace"), safe="/:@!$&'()*+,;=-._~")
        url += f"?{query}" if query else ""
        headers = {
            name: str(environ[key])
            for name in _REQUEST_HEADERS
            if (key := _environ_key(name)) in environ and environ[key] != ""
        }
        body = read_body(environ, _MAX_BODY_BYTES)  # the API answers 413 past its limit
        try:
            response = self._http.request(method, url, headers=headers, content=body or None)
        except ApiError as error:  # no AWS credentials to sign with
            return _answer(start_response, 502, error.code, error.message)
        except httpx.HTTPError as error:
            reason = str(error) or type(error).__name__
            return _answer(start_response, 502, "unreachable", ApiUnreachable(self.api_url, reason).message)
        data = response.content
        out = [
            (k, v)
            for k, v in response.headers.items()
            if k.lower() not in _DROPPED_RESPONSE_HEADERS and not k.lower().startswith("access-control-")
        ]
        out.append(("Content-Length", str(len(data))))
        start_response(f"{response.status_code} {response.reason_phrase or 'Unknown'}", out)
        return [data]


def _environ_key(header: str) -> str:
    name = header.upper().replace("-", "_")
    return name if name == "CONTENT_TYPE" else f"HTTP_{name}"


def _answer(
    start_response: StartResponse, status: int, code: str, message: str, field: str | None = None
) -> Iterable[bytes]:
    data = json.dumps({"error": {"code": code, "message": message, "field": field}}).encode()
    reason = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 502: "Bad Gateway"}[status]
    start_response(
        f"{status} {reason}", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]


def console_server(
    api_url: str,
    *,
    port: int = 0,
    token: str | None = None,
    sigv4_region: str | None = None,
    credentials: Any = None,
    transport: httpx.BaseTransport | None = None,
    accept_hosts: Iterable[str] = (),
) -> tuple[ApiServer, SigningProxy]:
    """A server on ``127.0.0.1:port`` (0: a free port) with the console at ``/ui/`` and the other paths
    forwarded by a ``SigningProxy`` to ``api_url``, answering only its loopback names and ``accept_hosts``
    in ``Host`` (``jobsched.local.server.accepted_hosts``); not started (call ``start()``, then ``stop()``
    and the proxy's ``close()``). Raises ``OSError`` when the port cannot be bound, ``ValueError`` for a bad
    ``accept_hosts`` value."""
    proxy = SigningProxy(
        api_url, token=token, sigv4_region=sigv4_region, credentials=credentials, transport=transport
    )
    try:
        return ApiServer(ConsoleApp(proxy), "127.0.0.1", port, accept_hosts=accept_hosts), proxy
    except (OSError, ValueError):
        proxy.close()
        raise


PortOpt = Annotated[int, typer.Option("--port", min=0, max=65535, help="Port of the console on 127.0.0.1.")]
OpenOpt = Annotated[bool, typer.Option("--open", help="Open the console in a web browser.")]


@option_groups
def ui_command(
    conn: Connection = Connection(),
    port: PortOpt = 8090,
    open_browser: OpenOpt = False,
    accept_host: AcceptHostOpt = None,
) -> None:
    """Serve the web console on 127.0.0.1, its API calls forwarded to --api (SigV4-signed for API Gateway).

    Prints the console's address and runs until Ctrl-C; opens a browser only with --open. Answers only
    requests for localhost, 127.0.0.1 or [::1] at its port (add names with --accept-host), and takes a
    change only from the console's own page."""
    parts = urlsplit(conn.api)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"--api must be an http:// or https:// URL, got {conn.api!r}", USAGE_ERROR, field="api")
    token = conn.token
    if token is None and is_loopback(conn.api):
        token = find_dev_token()
    try:
        server, proxy = console_server(
            conn.api,
            port=port,
            token=token,
            sigv4_region=conn.sigv4_region,
            transport=injected("transport"),
            accept_hosts=accept_host or (),
        )
    except ValueError as error:  # a bad --accept-host, refused before the port is bound
        fail(str(error), USAGE_ERROR, field="accept-host")
    except OSError as error:
        fail(f"cannot listen on 127.0.0.1:{port} ({error.strerror or error}); pick another port with --port")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda number, frame: stop.set())
    server.start()
    url = f"{server.url}{PREFIX}/"
    typer.echo(f"jobsched ui: console on {url}  (API calls go to {conn.api}); Ctrl-C stops", err=False)
    if open_browser:
        webbrowser.open(url)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        proxy.close()
