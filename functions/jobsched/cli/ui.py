"""``jobsched ui``: the web console for a deployment, served from this machine.

A web server on 127.0.0.1 serves the console's files (``jobsched.console``) and forwards the console's API
calls (``/jobs...``, ``/runs...``, ``/openapi.json``) to ``--api``, authenticated as the CLI's client
authenticates them (``jobsched.client.connection_auth``): SigV4 from the user's AWS credentials for an API
Gateway URL (or with ``--sigv4-region``), a bearer token for local mode. No new public endpoint, user pool or
secret: the browser talks only to 127.0.0.1, and the credentials never leave this process.
"""

from __future__ import annotations

import json
import signal
import threading
import webbrowser
from collections.abc import Iterable
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import httpx
import typer

from jobsched.api.wsgi import read_body
from jobsched.cli.options import Connection, find_dev_token, injected, option_groups
from jobsched.client import ApiError, ApiUnreachable, connection_auth, is_loopback
from jobsched.console import PREFIX, ConsoleApp, StartResponse
from jobsched.exits import USAGE_ERROR, fail
from jobsched.local.server import ApiServer

__all__ = ["FORWARDED", "SigningProxy", "console_server", "ui_command"]

FORWARDED = ("/jobs", "/runs", "/openapi.json")
"""Path prefixes forwarded to the API (a path equal to one, or under it); others answer 404."""
_REQUEST_HEADERS = ("content-type", "accept", "idempotency-key")
_DROPPED_RESPONSE_HEADERS = {
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
}
_MAX_BODY_BYTES = 10 * 1024 * 1024


def _forwarded(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in FORWARDED)


class SigningProxy:
    """WSGI app that forwards API calls to ``api_url`` (the API root, e.g. an API Gateway stage URL) and
    answers with the API's status, headers and body unchanged.

    Only ``Content-Type``, ``Accept`` and ``Idempotency-Key`` are forwarded from the browser (never its
    ``Authorization``): each call is signed here (``connection_auth``: SigV4 with ``credentials``, a botocore
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
            timeout=timeout_s,
            transport=transport or httpx.HTTPTransport(retries=2),
        )

    def close(self) -> None:
        self._http.close()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
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
        out = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROPPED_RESPONSE_HEADERS]
        out.append(("Content-Length", str(len(data))))
        start_response(f"{response.status_code} {response.reason_phrase or 'Unknown'}", out)
        return [data]


def _environ_key(header: str) -> str:
    name = header.upper().replace("-", "_")
    return name if name == "CONTENT_TYPE" else f"HTTP_{name}"


def _answer(start_response: StartResponse, status: int, code: str, message: str) -> Iterable[bytes]:
    data = json.dumps({"error": {"code": code, "message": message, "field": None}}).encode()
    reason = {404: "Not Found", 502: "Bad Gateway"}[status]
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
) -> tuple[ApiServer, SigningProxy]:
    """A server on ``127.0.0.1:port`` (0: a free port) with the console at ``/ui/`` and the other paths
    forwarded by a ``SigningProxy`` to ``api_url``; not started (call ``start()``, then ``stop()`` and the
    proxy's ``close()``). Raises ``OSError`` when the port cannot be bound."""
    proxy = SigningProxy(
        api_url, token=token, sigv4_region=sigv4_region, credentials=credentials, transport=transport
    )
    try:
        return ApiServer(ConsoleApp(proxy), "127.0.0.1", port), proxy
    except OSError:
        proxy.close()
        raise


PortOpt = Annotated[int, typer.Option("--port", min=0, max=65535, help="Port of the console on 127.0.0.1.")]
OpenOpt = Annotated[bool, typer.Option("--open", help="Open the console in a web browser.")]


@option_groups
def ui_command(conn: Connection = Connection(), port: PortOpt = 8090, open_browser: OpenOpt = False) -> None:
    """Serve the web console on 127.0.0.1, its API calls forwarded to --api (SigV4-signed for API Gateway).

    Prints the console's address and runs until Ctrl-C; opens a browser only with --open."""
    parts = urlsplit(conn.api)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"--api must be an http:// or https:// URL, got {conn.api!r}", USAGE_ERROR, field="api")
    token = conn.token
    if token is None and is_loopback(conn.api):
        token = find_dev_token()
    try:
        server, proxy = console_server(
            conn.api, port=port, token=token, sigv4_region=conn.sigv4_region, transport=injected("transport")
        )
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
