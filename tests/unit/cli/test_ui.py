"""``jobsched ui``'s signing proxy and command: what it forwards, how it signs, and how it fails."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest
from botocore.credentials import Credentials
from typer.testing import CliRunner

from jobsched.cli import app
from jobsched.cli.ui import SigningProxy, console_server
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


def browser(proxy: SigningProxy) -> httpx.Client:
    """What the console's page does: calls on its own origin."""
    return httpx.Client(transport=httpx.WSGITransport(app=proxy), base_url="http://127.0.0.1:8090")


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
    server, proxy = console_server(GATEWAY, credentials=Credentials("a", "b"), transport=transport)
    server.start()
    try:
        page = httpx.get(f"{server.url}/ui/")
        jobs = httpx.get(f"{server.url}/jobs")
    finally:
        server.stop()
        proxy.close()

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
