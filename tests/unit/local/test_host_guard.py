"""The Host rule of every server on this machine (local mode, ``jobsched ui``): its loopback names at its own
port, and the names given with ``--accept-host`` (``jobsched.local.server``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from jobsched.cli import app
from jobsched.local.server import HostGuard, accepted_hosts, parse_accept_host


def hello(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


def status_for(hosts: frozenset[str], host: str) -> int:
    """The status ``HostGuard(hello, hosts)`` answers a request carrying ``Host: host``."""
    client = httpx.Client(transport=httpx.WSGITransport(app=HostGuard(hello, hosts)), base_url="http://x")
    return client.get("/", headers={"Host": host}).status_code


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost:8080", 200),
        ("127.0.0.1:8080", 200),
        ("[::1]:8080", 200),
        ("LocalHost:8080", 200),
        ("localhost:8081", 421),  # another port: another origin
        ("localhost", 421),  # no port: port 80
        ("127.0.0.2:8080", 421),
        ("rebind.example:8080", 421),
        ("127.0.0.1.nip.io:8080", 421),
        ("localhost:8080.evil", 421),
        ("", 421),
    ],
)
def test_only_the_loopback_names_at_the_servers_port_are_answered(host: str, status: int) -> None:
    assert status_for(accepted_hosts(8080), host) == status


def test_accept_host_adds_a_name_at_the_port_or_with_its_own() -> None:
    hosts = accepted_hosts(8080, ["Console.Example", "forwarded.example:9000", "[fd00::1]"])

    assert status_for(hosts, "console.example:8080") == 200
    assert status_for(hosts, "forwarded.example:9000") == 200
    assert status_for(hosts, "[fd00::1]:8080") == 200
    assert status_for(hosts, "forwarded.example:8080") == 421
    assert status_for(hosts, "console.example:9000") == 421


@pytest.mark.parametrize(
    "value",
    ["*", "*.example", "a.example,b.example", "a.example b.example", "a\tb", ".", "a..b", "[not-v6]", "-x"],
)
def test_an_accept_host_no_browser_sends_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ValueError, match="--accept-host takes NAME or NAME:PORT") as refused:
        parse_accept_host(value)
    assert repr(value) in str(refused.value)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("Dev-Box.Example", "dev-box.example"),
        ("dev_box:9000", "dev_box:9000"),
        ("10.0.0.5", "10.0.0.5"),
        ("name.", "name."),
        ("[FD00::1]:81", "[fd00::1]:81"),
    ],
)
def test_an_accept_host_is_a_host_name_or_address_with_an_optional_port(value: str, parsed: str) -> None:
    assert parse_accept_host(value) == parsed


def test_a_refusal_is_one_plain_line_that_does_not_echo_the_host() -> None:
    guard = HostGuard(hello, accepted_hosts(8080))
    client = httpx.Client(transport=httpx.WSGITransport(app=guard), base_url="http://x")

    reply = client.get("/", headers={"Host": "<script>.example:8080"})

    assert reply.status_code == 421 and reply.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script>" not in reply.text and len(reply.text.splitlines()) == 1
    assert "127.0.0.1:8080" in reply.text and "--accept-host" in reply.text


def test_local_mode_refuses_a_bad_accept_host_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = CliRunner().invoke(app, ["local", "--data-dir", str(data), "--accept-host", "http://x.example"])

    assert result.exit_code == 1
    assert (
        result.stderr
        == "error: --accept-host takes NAME or NAME:PORT (IPv6 in brackets), got 'http://x.example'\n"
    )
    assert not data.exists()
