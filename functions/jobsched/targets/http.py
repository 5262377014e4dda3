"""``http`` targets (httpx), with the server-side request forgery guard.

The request: ``method url`` with body ``input`` as JSON (none for GET or a null input), the job's headers,
then ``Idempotency-Key: <run id>``, ``X-Jobsched-Scheduled-For`` (ISO 8601 UTC), ``X-Jobsched-Attempt``,
``X-Jobsched-Run-Id`` and ``X-Jobsched-Job-Id`` (ours win over the job's). 2xx is success (design §5.5);
redirects are not followed (a 3xx fails the try); proxies from the environment are ignored.

Address guard: every address the host resolves to is checked when the connection is made (not in a
separate look-up before it, which DNS rebinding would defeat), and the connection goes to a checked
address. Loopback (127.0.0.0/8, ::1, and the unspecified 0.0.0.0/::, which reaches the local host) is
refused unless ``Settings.allow_loopback_http_targets`` (and then still for an owner outside
``HttpExecutor.loopback_owners``); any other non-global address (private, link-local
such as 169.254.169.254, shared 100.64.0.0/10, reserved, multicast) unless
``Settings.allow_private_http_targets``. An IPv6 address that carries an IPv4 address is judged as that IPv4
address (``embedded_ipv4``): IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible ``::/96``, NAT64 ``64:ff9b::/96``
(RFC 6052), 6to4 ``2002::/16`` (RFC 3056) and Teredo ``2001::/32`` (its client, RFC 4380); the local-use NAT64
prefix ``64:ff9b:1::/48`` (RFC 8215) and every other IPv6 range outside global unicast are not public.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import socket
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import httpcore
import httpx

from jobsched.domain.redaction import MARK, Redactor, redactor_for
from jobsched.models import HttpTarget
from jobsched.ports.targets import (
    TargetCall,
    TargetFailed,
    TargetTimedOut,
    head_bytes,
    output_limit,
    truncate,
)

Resolver = Callable[[str, int], list[str]]
"""``(host, port) -> IP address strings``; raises OSError when the name does not resolve."""

MAX_BODY_EXCERPT = 2048  # bytes of a failed response's body kept in the error


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the system resolver (getaddrinfo), every address, in its order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class AddressRefused(Exception):
    """The target's host resolves to an address the deployment does not allow."""


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses ``http`` targets may reach (the deployment's switches)."""

    allow_private: bool = False
    allow_loopback: bool = False

    def refusal(self, address: str) -> str | None:
        """Why ``address`` is refused (e.g. ``"link-local"``), or None when allowed.

        Raises ValueError for a string that is not an IP address.
        """
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.teredo is not None:  # judged as its client, and then as what it is: not globally reachable
                return self.refusal(str(ip.teredo[1])) or self._judge(ip)
            ip = embedded_ipv4(ip) or ip
        return self._judge(ip)

    def _judge(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
        if ip.is_loopback or ip.is_unspecified:
            return None if self.allow_loopback else "loopback"
        if _is_public(ip) or self.allow_private:
            return None
        if ip.is_link_local:
            return "link-local"
        if ip.is_multicast:
            return "multicast"
        if ip.is_private:
            return "private"
        return "not a public address"


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a packet to ``ip`` ends up at, when ``ip`` is one of the IPv6 forms that embed one:
    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``, but ``::`` and ``::1``), NAT64 well-known
    prefix (``64:ff9b::a.b.c.d``, RFC 6052) or 6to4 (``2002:AABB:CCDD::/48``, RFC 3056); else None. (A Teredo
    address's client, RFC 4380, is ``ip.teredo[1]``: ``AddressPolicy.refusal`` judges both.)"""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip))
    return ip.sixtofour


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address: ``is_global`` but neither multicast nor reserved (Python counts IPv4
    multicast and unassigned IPv6 ranges as global), nor the local-use NAT64 prefix."""
    if ip.is_multicast or ip.is_reserved or not ip.is_global:
        return False
    return not (isinstance(ip, ipaddress.IPv6Address) and (ip in _NAT64_LOCAL or ip.is_site_local))


_trying = threading.local()
"""The ``CancelToken`` of the try the calling thread sends a request for (``HttpExecutor._send``), so the
connection it opens is shut when the try is cancelled."""


def _shut(stream: httpcore.NetworkStream) -> None:
    """Shut the socket under ``stream`` both ways: a read or write blocked on it (in another thread) returns at
    once with an error. Errors are ignored (already closed)."""
    sock = stream.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _GuardedBackend(httpcore.SyncBackend):
    """httpcore network backend that resolves the host itself, checks every address, and connects to one."""

    def __init__(self, policy: AddressPolicy, resolver: Resolver) -> None:
        self.policy = policy
        self.resolver = resolver

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self.resolver(host, port)
        except OSError as error:
            raise httpcore.ConnectError(f"cannot resolve {host}: {error}") from error
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host}: no addresses")
        for address in addresses:
            reason = self.policy.refusal(address)
            if reason:
                raise AddressRefused(
                    f"refused: {host} resolves to {address} ({reason}); this deployment does not allow "
                    "http targets on such addresses"
                )
        last: Exception | None = None
        for address in addresses:
            try:
                stream = super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                last = error
                continue
            cancel = getattr(_trying, "cancel", None)
            if cancel is not None:
                cancel.on_cancel(functools.partial(_shut, stream))
            return stream
        assert last is not None
        raise last


class GuardedTransport(httpx.HTTPTransport):
    """httpx transport whose connections go through the address guard (TLS still verifies the host name:
    httpcore takes the server name from the URL, not from the address connected to)."""

    def __init__(self, policy: AddressPolicy, resolver: Resolver = system_resolver) -> None:
        super().__init__(trust_env=False)
        # httpx.HTTPTransport has no parameter for httpcore's network backend: rebuild its pool with ours.
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=100,
            max_keepalive_connections=0,  # a connection per try: the try's cancel shuts it (``_shut``)
            keepalive_expiry=5.0,
            network_backend=_GuardedBackend(policy, resolver),
        )


def display_url(url: str, *, secret_path: bool = False) -> str:
    """``url`` without its query, fragment or credentials (errors and logs must not leak tokens), and with
    ``secret_path`` its path shown as ``/[redacted]`` (``HttpTarget.secret_path``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    path = f"/{MARK}" if secret_path and parts.path.strip("/") else parts.path
    return f"{parts.scheme}://{host}{port}{path}"


class HttpExecutor:
    """Runs ``http`` targets. One pooled client per address policy (thread-safe); per-try timeout ``timeout_s``.

    ``loopback_owners``: the owners whose targets may reach loopback when ``policy`` allows it (None: every
    owner). Local mode with a tokens file passes the owners granted shell targets
    (``jobsched.api.auth.shell_owners``): a loopback address reaches the laptop's own services (another
    ``jobsched local``, ``jobsched ui``, which signs what it forwards with the user's AWS credentials), as
    much the user's own as a shell; another owner's try is judged with loopback refused."""

    def __init__(
        self,
        policy: AddressPolicy,
        resolver: Resolver = system_resolver,
        *,
        loopback_owners: frozenset[str] | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.loopback_owners = loopback_owners
        self._lock = threading.Lock()
        self._clients: dict[AddressPolicy, httpx.Client] = {}

    @property
    def client(self) -> httpx.Client:
        """The pooled client of ``policy``, created on first use."""
        return self._client_of(self.policy)

    def policy_for(self, owner: str | None) -> AddressPolicy:
        """The address policy of ``owner``'s tries: ``policy``, with loopback refused for an owner outside
        ``loopback_owners``."""
        if self.loopback_owners is None or owner in self.loopback_owners:
            return self.policy
        return replace(self.policy, allow_loopback=False)

    def _client_of(self, policy: AddressPolicy) -> httpx.Client:
        with self._lock:
            client = self._clients.get(policy)
            if client is None:
                client = httpx.Client(
                    transport=GuardedTransport(policy, self.resolver), follow_redirects=False, trust_env=False
                )
                self._clients[policy] = client
            return client

    def execute(self, target: HttpTarget, call: TargetCall) -> str:
        """Send the request; 2xx -> ``"HTTP 200"``; else ``TargetFailed`` with the status and a body
        excerpt; past ``call.timeout_s`` (httpx connect/read/write timeouts) ``TargetTimedOut``. ``call.output``
        gets the status and the head of the body. The target's secrets (``HttpTarget.secret_values``: secret
        header values, the URL's credentials, query values and marked path) are redacted from the error and the
        output wherever the server echoed them, in any spelling (``jobsched.domain.redaction``), before either
        is cut to its limit."""
        headers = httpx.Headers(target.headers)
        headers["Idempotency-Key"] = call.idempotency_key
        headers["X-Jobsched-Scheduled-For"] = call.scheduled_for
        headers["X-Jobsched-Attempt"] = str(call.attempt)
        headers["X-Jobsched-Run-Id"] = call.run_id
        headers["X-Jobsched-Job-Id"] = call.job_id
        if call.upstream_run_id is not None:  # a chained run (design §2.1); the body stays the owner's input
            headers["X-Jobsched-Upstream-Run-Id"] = call.upstream_run_id
        content: bytes | None = None
        if call.input is not None and target.method != "GET":
            content = json.dumps(call.input, separators=(",", ":")).encode()
            if "content-type" not in headers:
                headers["Content-Type"] = "application/json"
        shown = f"{target.method} {display_url(target.url, secret_path=target.secret_path)}"
        redact = redactor_for(target)
        try:
            return self._send(target, call, headers, content, shown, redact)
        except TargetFailed as error:
            # the message as sent unredacted stays out of any traceback: no chained cause
            raise type(error)(truncate(redact(str(error)))) from None

    def _send(
        self,
        target: HttpTarget,
        call: TargetCall,
        headers: httpx.Headers,
        content: bytes | None,
        shown: str,
        redact: Redactor,
    ) -> str:
        """One request (see ``execute``) under a hard total deadline of ``call.timeout_s``: httpx's timeouts bound
        each connect, read and write, and at the deadline (or when the try is cancelled) the try's connection
        is shut, so a server that trickles its answer cannot keep the request going past it; sets
        ``call.output`` to the status and the head of the body, redacted before it is cut. A ``TargetFailed``
        raised here is neither redacted nor cut yet (``execute`` does both)."""
        timed_out = f"timed out after {call.timeout_s:g} s (timeout_s): {shown}"
        deadline = threading.Timer(call.timeout_s, call.cancel.cancel)
        deadline.daemon = True
        deadline.start()
        _trying.cancel = call.cancel
        try:
            with self._client_of(self.policy_for(call.owner)).stream(
                target.method, target.url, headers=headers, content=content, timeout=call.timeout_s
            ) as response:
                excerpt = _read_prefix(response, MAX_BODY_EXCERPT)
                if call.cancel.cancelled:
                    raise TargetTimedOut(timed_out)
        except AddressRefused as error:
            raise TargetFailed(str(error)) from error
        except httpx.TimeoutException as error:
            raise TargetTimedOut(timed_out) from error
        except httpx.HTTPError as error:
            if call.cancel.cancelled:  # the connection was shut at the deadline
                raise TargetTimedOut(timed_out) from error
            raise TargetFailed(f"{shown} failed: {type(error).__name__}: {error}") from error
        finally:
            _trying.cancel = None
            deadline.cancel()
        body = excerpt.decode("utf-8", "replace").strip()
        failed = not 200 <= response.status_code < 300
        said = f"HTTP {response.status_code}" + (f"\n{body}" if body else "")
        call.output = head_bytes(redact(said), output_limit(failed))
        if failed:
            raise TargetFailed(f"HTTP {response.status_code} from {shown}: {body}")
        return f"HTTP {response.status_code}"


def _read_prefix(response: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of the body; the rest is not downloaded."""
    data = b""
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return data[:limit]
