"""``jobsched ui``'s signing proxy and command: what it forwards, how it signs, and how it fails."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials
from typer.testing import CliRunner

from jobsched.cli import app
from jobsched.cli.ui import SigningProxy, console_server
from jobsched.local.server import ApiServer
from tests.support.aws import remove_aws_credentials

GATEWAY = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"


def recording(status: int = 200, body: object = None) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            status, json={"items": []} if body is None else body, headers={"Idempotent-Replayed": "true"}
        )

    return seen, httpx.MockTransport(answer)


CONSOLE = {"Origin": "http://127.0.0.1:8090", "X-Jobsched-Console": "1"}
"""What the console's page sends with a change: its own origin and the console's header."""


@contextmanager
def serving(transport: httpx.MockTransport, **options: Any) -> Iterator[ApiServer]:
    """A started ``console_server`` forwarding to :data:`GATEWAY` through ``transport``; stopped, and its proxy
    closed, on leaving."""
    server, proxy = console_server(GATEWAY, credentials=Credentials("a", "b"), transport=transport, **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        proxy.close()


def browser(proxy: SigningProxy, headers: dict[str, str] | None = None) -> httpx.Client:
    """What the console's page does: calls on its own origin (``headers``: default :data:`CONSOLE`)."""
    return httpx.Client(
        transport=httpx.WSGITransport(app=proxy),
        base_url="http://127.0.0.1:8090",
        headers=CONSOLE if headers is None else headers,
    )


def raw_request(url: str, method: str, target: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """Send ``target`` exactly as given (httpx would remove its dot segments) to the server at ``url``:
    ``(status, body)``."""
    parts = httpx.URL(url)
    connection = http.client.HTTPConnection(parts.host, parts.port, timeout=10)
    try:
        connection.request(method, target, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_calls_are_forwarded_under_the_stage_and_signed_not_the_browsers_authorization() -> None:
    seen, transport = recording()
    proxy = SigningProxy(
        GATEWAY, credentials=Credentials("AKIDEXAMPLE", "secret", "session-token"), transport=transport
    )

    response = browser(proxy).post(
        "/jobs/j_1/trigger?x=1",
        headers={"Authorization": "Bearer from-the-page", "Idempotency-Key": "k-1", "Cookie": "c=1"},
        json={"a": 1},
    )

    (request,) = seen
    assert str(request.url) == "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/jobs/j_1/trigger?x=1"
    assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in request.headers["Authorization"]
    assert request.headers["X-Amz-Security-Token"] == "session-token"
    assert request.headers["Idempotency-Key"] == "k-1"
    assert "cookie" not in request.headers
    assert json.loads(request.content) == {"a": 1}
    # the API's answer comes back unchanged
    assert response.status_code == 200 and response.json() == {"items": []}
    assert response.headers["Idempotent-Replayed"] == "true"


def test_api_errors_pass_through_as_the_api_words_them() -> None:
    error = {"error": {"code": "invalid_schedule", "message": "bad minute", "field": "schedule"}}
    _, transport = recording(400, error)
    proxy = SigningProxy("http://127.0.0.1:8080", token="dev-1", transport=transport)

    response = browser(proxy).post("/jobs", json={})

    assert response.status_code == 400 and response.json() == error


def test_a_local_api_gets_the_bearer_token() -> None:
    seen, transport = recording()
    proxy = SigningProxy("http://127.0.0.1:8080", token="dev-1", transport=transport)

    browser(proxy).get("/openapi.json")

    assert seen[0].headers["Authorization"] == "Bearer dev-1"


@pytest.mark.parametrize("path", ["/", "/etc/passwd", "/jobsx", "/favicon.ico"])
def test_only_api_paths_are_forwarded(path: str) -> None:
    seen, transport = recording()
    proxy = SigningProxy(GATEWAY, credentials=Credentials("a", "b"), transport=transport)

    response = browser(proxy).get(path)

    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert seen == []


def test_an_unreachable_api_is_a_502_in_the_api_error_shape() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    proxy = SigningProxy(GATEWAY, credentials=Credentials("a", "b"), transport=httpx.MockTransport(refuse))

    response = browser(proxy).get("/jobs")

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "unreachable"
    assert GATEWAY in response.json()["error"]["message"]


def test_no_aws_credentials_is_a_502_saying_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    remove_aws_credentials(monkeypatch, tmp_path)
    seen, transport = recording()
    proxy = SigningProxy(GATEWAY, transport=transport)

    response = browser(proxy).get("/jobs")

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "no_credentials"
    assert "no AWS credentials found" in response.json()["error"]["message"]
    assert seen == []


@pytest.mark.enable_socket  # a real socket on 127.0.0.1 (see tests/conftest.py)
def test_the_console_and_the_api_share_one_origin() -> None:
    seen, transport = recording()
    with serving(transport) as server:
        page = httpx.get(f"{server.url}/ui/")
        jobs = httpx.get(f"{server.url}/jobs")

    assert page.status_code == 200 and "app.js" in page.text
    assert jobs.json() == {"items": []} and [r.url.path for r in seen] == ["/prod/jobs"]


@pytest.mark.parametrize("api", ["ftp://example.com", "not a url", "http://"])
def test_a_bad_api_url_is_a_usage_error(api: str) -> None:
    result = CliRunner().invoke(app, ["ui", "--api", api])

    assert result.exit_code == 2
    assert result.stderr.startswith("error: api: --api must be an http:// or https:// URL")


@pytest.mark.enable_socket  # a real socket on 127.0.0.1 (see tests/conftest.py)
def test_a_busy_port_is_one_error_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        result = CliRunner().invoke(app, ["ui", "--api", GATEWAY, "--port", str(port)])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}")
    assert len(result.stderr.strip().splitlines()) == 1


# --- the guards: DNS rebinding (Host), cross-site requests (Origin and the console's header), path escapes


@pytest.mark.enable_socket  # a real socket on 127.0.0.1 (see tests/conftest.py)
def test_a_request_for_another_host_name_is_refused_not_forwarded() -> None:
    # Given the proxy, and a page of rebind.example whose name now resolves to 127.0.0.1 (DNS rebinding)
    seen, transport = recording()
    with serving(transport) as server:
        # When that page calls the proxy (its Host is its own name), and the console calls it as it does
        rebound = httpx.get(f"{server.url}/jobs", headers={"Host": f"rebind.example:{server.port}"})
        page = httpx.get(f"{server.url}/ui/", headers={"Host": f"rebind.example:{server.port}"})
        other_port = httpx.get(f"{server.url}/jobs", headers={"Host": "127.0.0.1:1"})
        no_port = httpx.get(f"{server.url}/jobs", headers={"Host": "localhost"})
        own = [
            httpx.get(f"{server.url}/jobs", headers={"Host": f"{name}:{server.port}"})
            for name in ("127.0.0.1", "localhost", "[::1]")
        ]

    # Then the foreign names are refused with a short plain answer, and only the console's calls got through
    for refused in (rebound, page, other_port, no_port):
        assert refused.status_code == 421, refused.text
        assert refused.headers["Content-Type"].startswith("text/plain")
        assert "--accept-host" in refused.text and len(refused.text.splitlines()) == 1
    assert [reply.status_code for reply in own] == [200, 200, 200]
    assert len(seen) == 3


@pytest.mark.enable_socket  # a real socket on 127.0.0.1 (see tests/conftest.py)
def test_accept_host_adds_a_name_at_the_proxys_port_or_at_the_port_it_gives() -> None:
    seen, transport = recording()
    with serving(transport, accept_hosts=["Console.Example", "forwarded.example:9000"]) as server:
        named = httpx.get(f"{server.url}/jobs", headers={"Host": f"console.example:{server.port}"})
        forwarded = httpx.get(f"{server.url}/jobs", headers={"Host": "forwarded.example:9000"})
        wrong_port = httpx.get(f"{server.url}/jobs", headers={"Host": "console.example:9000"})

    assert (named.status_code, forwarded.status_code, wrong_port.status_code) == (200, 200, 421)
    assert len(seen) == 2


@pytest.mark.parametrize(
    "value", ["http://console.example", "console.example/ui", "::1", "x:0", "user@x", "x:"]
)
def test_a_bad_accept_host_is_a_usage_error(value: str) -> None:
    result = CliRunner().invoke(app, ["ui", "--api", GATEWAY, "--accept-host", value])

    assert result.exit_code == 2
    assert result.stderr.startswith("error: accept-host: --accept-host takes NAME or NAME:PORT")


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        # a form or script of another site: its Origin, and no console header (a form cannot send one)
        ({"Origin": "http://evil.example"}, "X-Jobsched-Console"),
        # a script of another site that sends the header (after a preflight the proxy never grants)
        ({"Origin": "http://evil.example", "X-Jobsched-Console": "1"}, "Origin"),
        ({"Origin": "null", "X-Jobsched-Console": "1"}, "Origin"),
        ({"Origin": "http://127.0.0.1:8091", "X-Jobsched-Console": "1"}, "Origin"),
        ({"Origin": "https://127.0.0.1:8090", "X-Jobsched-Console": "1"}, "Origin"),
        ({"Sec-Fetch-Site": "cross-site", "X-Jobsched-Console": "1"}, "Origin"),
        ({"Sec-Fetch-Site": "same-site", "X-Jobsched-Console": "1"}, "Origin"),
        ({"X-Jobsched-Console": "1"}, "Origin"),  # neither Origin nor Sec-Fetch-Site
        ({"Origin": "http://127.0.0.1:8090"}, "X-Jobsched-Console"),
        ({"Origin": "http://127.0.0.1:8090", "X-Jobsched-Console": "yes"}, "X-Jobsched-Console"),
    ],
)
@pytest.mark.parametrize("method", ["POST", "PATCH", "DELETE", "PUT"])
def test_a_change_not_from_the_consoles_page_is_refused_not_forwarded(
    headers: dict[str, str], field: str, method: str
) -> None:
    seen, transport = recording()
    proxy = SigningProxy(GATEWAY, credentials=Credentials("a", "b"), transport=transport)

    response = browser(proxy, headers).request(
        method,
        "/jobs/j_1/resume",
        content=b"reason=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )

    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "forbidden"
    assert response.json()["error"]["field"] == field
    assert seen == []


@pytest.mark.parametrize(
    "headers",
    [
        CONSOLE,
        {"Sec-Fetch-Site": "same-origin", "X-Jobsched-Console": "1"},  # a browser that sends no Origin
        {"Origin": "http://127.0.0.1:8090", "Sec-Fetch-Site": "same-origin", "X-Jobsched-Console": "1"},
    ],
)
def test_a_change_from_the_consoles_page_is_forwarded(headers: dict[str, str]) -> None:
    seen, transport = recording()
    proxy = SigningProxy(GATEWAY, credentials=Credentials("a", "b"), transport=transport)

    response = browser(proxy, headers).post("/jobs/j_1/trigger", headers={"Idempotency-Key": "k"})

    assert response.status_code == 200 and [r.url.path for r in seen] == ["/prod/jobs/j_1/trigger"]
    assert "origin" not in seen[0].headers and "x-jobsched-console" not in seen[0].headers


def test_reads_need_neither_origin_nor_the_consoles_header() -> None:
    seen, transport = recording()
    proxy = SigningProxy(GATEWAY, credentials=Credentials("a", "b"), transport=transport)

    replies = [browser(proxy, {}).request(method, "/jobs") for method in ("GET", "HEAD", "OPTIONS")]

    assert [reply.status_code for reply in replies] == [200, 200, 200]
    assert [r.method for r in seen] == ["GET", "HEAD", "OPTIONS"]


@pytest.mark.enable_socket  # a real socket on 127.0.0.1: the request target goes exactly as written
@pytest.mark.parametrize(
    "target",
    [
        "/jobs/..%2F..%2Fprod%2Fadmin%2Fusers",
        "/jobs/..%2f..%2fadmin",
        "/jobs/%2e%2e/%2e%2e/admin",
        "/jobs/%2E%2E/admin",
        "/jobs/../../admin",
        "/jobs/./j_1",
        "/runs/..",
        "/jobs/j_1%2Fruns",  # an encoded slash: one path segment to the proxy, two upstream
        "/jobs/j_1%5C..%5Cadmin",
        "/jobs/j_1%252e%252e",  # double-encoded
        "/jobs/a\\..\\admin",
    ],
)
def test_a_path_with_dot_segments_or_encoded_slashes_is_refused_not_forwarded(target: str) -> None:
    seen, transport = recording()
    with serving(transport) as server:
        status, body = raw_request(server.url, "GET", target)
        ok, _ = raw_request(server.url, "GET", "/jobs/j_1/runs?limit=1")

    assert status == 400, body
    assert json.loads(body)["error"] == {
        "code": "invalid_input",
        "message": json.loads(body)["error"]["message"],
        "field": "path",
    }
    assert ok == 200 and [str(r.url) for r in seen] == [f"{GATEWAY}/jobs/j_1/runs?limit=1"]


def test_a_dot_segment_is_refused_also_without_the_raw_target() -> None:
    # a WSGI server that gives only the decoded PATH_INFO (httpx's in-process transport)
    seen, transport = recording()
    proxy = SigningProxy(GATEWAY, credentials=Credentials("a", "b"), transport=transport)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/jobs/../../prod/admin/users", "QUERY_STRING": ""}
    statuses: list[str] = []

    body = b"".join(proxy(environ, lambda status, headers: statuses.append(status)))

    assert statuses == ["400 Bad Request"] and json.loads(body)["error"]["field"] == "path"
    assert seen == []


@pytest.mark.enable_socket  # a real socket on 127.0.0.1 (see tests/conftest.py)
def test_any_server_of_this_machine_answers_only_its_loopback_names() -> None:
    def hello(environ: dict[str, object], start_response: object) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])  # type: ignore[operator]
        return [b"ok"]

    server = ApiServer(hello, "127.0.0.1", 0)
    server.start()
    try:
        own = httpx.get(server.url)
        rebound = httpx.get(server.url, headers={"Host": f"rebind.example:{server.port}"})
        status, _ = raw_request(server.url, "GET", "/", headers={"Host": ""})
    finally:
        server.stop()

    assert (own.status_code, rebound.status_code, status) == (200, 421, 421)


def test_cookies_neither_reach_the_browser_nor_stick_to_later_calls() -> None:
    # Given an upstream that sets a cookie (a load balancer's, say) on every answer
    seen: list[httpx.Request] = []

    def setting_cookies(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"items": []}, headers={"Set-Cookie": "lb=node-1; Path=/"})

    proxy = SigningProxy(
        GATEWAY, credentials=Credentials("a", "b"), transport=httpx.MockTransport(setting_cookies)
    )
    # When two calls go through (the second with the browser's own cookie for localhost)
    first = browser(proxy).get("/jobs")
    browser(proxy, {"Cookie": "other-app=1"}).get("/jobs")

    # Then the browser is set no cookie (one for localhost would reach every local port), and the proxy keeps
    # none of the API's nor forwards the browser's: each call carries only what it is signed with
    assert "set-cookie" not in first.headers
    assert [request.headers.get("cookie") for request in seen] == [None, None]


def test_no_cors_header_of_the_api_reaches_the_browser() -> None:
    # Given an upstream that would let any origin read its answers and send any header
    def permissive(request: httpx.Request) -> httpx.Response:
        cors = {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Headers": "X-Jobsched-Console",
            "Access-Control-Allow-Methods": "POST",
        }
        return httpx.Response(200, json={"items": []}, headers={**cors, "Idempotent-Replayed": "false"})

    proxy = SigningProxy(
        GATEWAY, credentials=Credentials("a", "b"), transport=httpx.MockTransport(permissive)
    )

    read = browser(proxy, {"Origin": "http://evil.example"}).get("/jobs")
    preflight = browser(proxy, {"Origin": "http://evil.example"}).options("/jobs/j_1/trigger")

    # Then the proxy grants no other origin anything: the browser keeps the answers from that page
    for reply in (read, preflight):
        assert not [name for name in reply.headers if name.lower().startswith("access-control-")]
    assert read.headers["Idempotent-Replayed"] == "false"
