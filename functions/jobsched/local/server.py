"""The local HTTP server: a WSGI app (local mode's API and console, or ``jobsched ui``'s proxy) on a threaded
stdlib server, on 127.0.0.1, one thread per connection, behind :class:`HostGuard`.

The Host rule (:func:`accepted_hosts`) holds against DNS rebinding: a web page whose name first resolves to
its own server and then to 127.0.0.1 is same-origin with this server in the browser, but its requests carry
its own name in ``Host``. Only the server's loopback names at its own port (and names the user adds with
``--accept-host``) are answered; kubectl proxy's ``--accept-hosts`` applies the same rule.
"""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Iterable
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from jobsched.observability import logger

__all__ = ["LOOPBACK_NAMES", "ApiServer", "HostGuard", "accepted_hosts", "parse_accept_host"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
"""The names a browser on this machine uses for a server on 127.0.0.1, as they appear in ``Host``."""


_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")
"""A DNS host name (or IPv4 address) as ``Host`` carries it, lower-cased: dot-separated labels."""


def _is_host(name: str, bracketed: bool) -> bool:
    if not bracketed:
        return _HOST_NAME.fullmatch(name) is not None
    try:
        ipaddress.IPv6Address(name)
    except ValueError:
        return False
    return True


def parse_accept_host(value: str) -> str:
    """One ``--accept-host`` value as it is matched against ``Host``: ``NAME`` or ``NAME:PORT``, NAME a DNS
    host name or IPv4 address, or an IPv6 address in brackets (``[fd00::1]:8090``), lower-cased. Raises
    ``ValueError`` naming the value when it is not that (a scheme, path, user, bad port, or a name no browser
    sends: ``*``, a list, a space)."""
    text = value.strip().lower()
    try:
        parts = urlsplit(f"//{text}")
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or not parts.hostname
        or not _is_host(parts.hostname, text.startswith("["))
        or not text.isprintable()
        or " " in text
        or parts.path
        or parts.query
        or parts.fragment
        or "@" in text
        or text.endswith(":")
        or (":" in parts.hostname and not text.startswith("["))
        or port == 0
    ):
        raise ValueError(f"--accept-host takes NAME or NAME:PORT (IPv6 in brackets), got {value!r}")
    return text


def accepted_hosts(port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` values a server on ``127.0.0.1:port`` answers: each of :data:`LOOPBACK_NAMES` at
    ``port``, and each of ``extra`` (``--accept-host`` values, see :func:`parse_accept_host`) at ``port``
    unless it gives its own port (a name reached through a port forward). Raises ``ValueError`` for a bad
    ``extra`` value."""
    hosts: set[str] = set()
    for value in (*LOOPBACK_NAMES, *extra):
        name = parse_accept_host(value)
        hosts.add(name if urlsplit(f"//{name}").port is not None else f"{name}:{port}")
    return frozenset(hosts)


class HostGuard:
    """WSGI middleware answering only requests whose ``Host`` header is one of ``hosts``
    (:func:`accepted_hosts`; a ``Host`` without a port means port 80). Any other request, or one without a
    ``Host``, gets ``421 Misdirected Request`` with a one-line ``text/plain`` body and never reaches ``app``."""

    def __init__(self, app: Any, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    def allows(self, host: str | None) -> bool:
        """Whether ``host`` (a ``Host`` header's value, or None when absent) is one this server answers."""
        if not host:
            return False
        name = host.strip().lower()
        try:
            explicit = urlsplit(f"//{name}").port is not None
        except ValueError:
            return False
        return (name if explicit else f"{name}:80") in self.hosts

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if self.allows(environ.get("HTTP_HOST")):
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        data = (
            f"421 Misdirected Request: this server answers only Host {', '.join(sorted(self.hosts))} "
            "(add a name with --accept-host)\n"
        ).encode()
        start_response(
            "421 Misdirected Request",
            [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(data))),
                ("X-Content-Type-Options", "nosniff"),
            ],
        )
        return [data]


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    """Request logs go to the structured logger at debug level, not to stderr. The request target as sent
    (path and query, still percent-encoded) is in the environ as ``REQUEST_URI``: ``PATH_INFO`` is decoded,
    so it cannot tell ``%2F`` from ``/``. A request without a ``Content-Type`` has no ``CONTENT_TYPE`` (wsgiref
    would put ``text/plain`` there), so the API sees that none was sent."""

    def get_environ(self) -> dict[str, Any]:
        environ = super().get_environ()
        environ["REQUEST_URI"] = self.path
        if self.headers.get("Content-Type") is None:
            environ.pop("CONTENT_TYPE", None)
        return environ  # type: ignore[no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http request", line=format % args)


class ApiServer:
    """Serves ``app`` on ``host:port`` (port 0 picks a free one; see ``port``) in a background thread, behind a
    :class:`HostGuard` accepting :func:`accepted_hosts` of the bound port and ``accept_hosts``. Raises
    ``OSError`` when the port cannot be bound, ``ValueError`` for a bad ``accept_hosts`` value."""

    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int = 8080, *, accept_hosts: Iterable[str] = ()
    ) -> None:
        extra = tuple(accept_hosts)
        accepted_hosts(port or 1, extra)  # a bad value fails before the port is bound
        self._server = make_server(
            host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
        )
        self._server.set_app(HostGuard(app, accepted_hosts(self.port, extra)))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="api-server", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting requests and close the socket (requests in flight finish on their threads)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()
