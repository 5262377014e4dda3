"""The web console: static files (``index.html``, ``*.js``, ``*.css`` in this folder, no build step) and the
WSGI app that serves them at ``/ui/`` in front of an API app.

Two servers use it: local mode (``jobsched local``: the console on the API's own origin, asking for a bearer
token it keeps in the tab's ``sessionStorage``) and ``jobsched ui`` (``jobsched.cli.ui``: the console in front
of a proxy that signs each call to a deployment with SigV4). The console calls the API on its own origin
(``/jobs...``, ``/runs...``, ``/openapi.json``), so the same files serve both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["CONSOLE_DIR", "PREFIX", "ConsoleApp", "console_files"]

CONSOLE_DIR = Path(__file__).parent
PREFIX = "/ui"
"""Where the console is served: ``/ui`` redirects to ``/ui/`` (``index.html``), files are ``/ui/<name>``."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
_HEADERS = [
    ("Cache-Control", "no-cache"),
    ("X-Content-Type-Options", "nosniff"),
    # everything from this origin: no CDN, no inline script; style attributes are set by the views
    (
        "Content-Security-Policy",
        "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
    ),
]

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def console_files() -> dict[str, Path]:
    """The files the console serves, ``{name: path}``: the folder's HTML, JS and CSS files (nothing else,
    so no request path can reach another file)."""
    return {path.name: path for path in sorted(CONSOLE_DIR.iterdir()) if path.suffix in _TYPES}


class ConsoleApp:
    """WSGI app: ``GET``/``HEAD`` of ``/ui`` (302 to ``/ui/``), ``/ui/`` (``index.html``) and ``/ui/<file>``;
    any other path goes to ``api`` (a WSGI app) unchanged. A name under ``/ui/`` that is not a console file
    answers 404 with the API's error shape ``{"error": {"code": "not_found", "message"}}``; another method
    405 likewise."""

    def __init__(self, api: WsgiApp) -> None:
        self.api = api
        self.files = console_files()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "/")
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            return self.api(environ, start_response)
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        if method not in ("GET", "HEAD"):
            return _error(start_response, 405, "method_not_allowed", f"{method} is not allowed on {path}")
        if path == PREFIX:
            start_response("302 Found", [("Location", PREFIX + "/"), ("Content-Length", "0")])
            return [b""]
        name = path[len(PREFIX) + 1 :] or "index.html"
        file = self.files.get(name)
        if file is None:
            return _error(start_response, 404, "not_found", f"no console file {name!r}")
        data = file.read_bytes()
        headers = [("Content-Type", _TYPES[file.suffix]), ("Content-Length", str(len(data))), *_HEADERS]
        start_response("200 OK", headers)
        return [b"" if method == "HEAD" else data]


def _error(start_response: StartResponse, status: int, code: str, message: str) -> Iterable[bytes]:
    import json

    data = json.dumps({"error": {"code": code, "message": message}}).encode()
    reason = {404: "Not Found", 405: "Method Not Allowed"}[status]
    start_response(
        f"{status} {reason}", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]
