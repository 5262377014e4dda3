"""The local HTTP server: the API's WSGI app (``jobsched.api.wsgi``) on a threaded stdlib server.

The WSGI app turns each request into an API Gateway proxy event for the same Lambda handler that runs in
AWS; this module only serves it, on 127.0.0.1, one thread per connection.
"""

from __future__ import annotations

import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from jobsched.observability import logger


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    """Request logs go to the structured logger at debug level, not to stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http request", line=format % args)


class ApiServer:
    """Serves ``app`` on ``host:port`` (port 0 picks a free one; see ``port``) in a background thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8080) -> None:
        self._server = make_server(
            host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
        )
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
