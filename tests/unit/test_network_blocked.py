"""Unit tests cannot reach the network: pytest-socket blocks every internet socket under tests/unit (and
tests/contract), so a unit test that would call AWS, a web site or a local server fails at once."""

from __future__ import annotations

import socket

import httpx
import pytest
from pytest_socket import SocketBlockedError


def test_a_unit_test_cannot_open_an_internet_socket():
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with pytest.raises(SocketBlockedError):
        socket.create_connection(("127.0.0.1", 9))


def test_an_http_client_in_a_unit_test_is_refused_before_it_connects():
    with pytest.raises(SocketBlockedError):
        httpx.get("http://127.0.0.1:9/", timeout=1)


def test_unix_sockets_stay_allowed():
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        left.sendall(b"ok")
        assert right.recv(2) == b"ok"
