"""The scheduler Lambda's AWS calls are bounded so that a slow one cannot run the invocation into its timeout."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
from botocore.exceptions import ReadTimeoutError

from jobsched.aws.clients import DEFAULT_CALLS, Aws, CallBounds
from jobsched.handlers import scheduler as handler_module
from jobsched.runtime.scheduler import SCHEDULER_CALLS, STOP_BEFORE_MS
from jobsched.settings import get_settings


def test_worst_case_counts_every_attempt_and_the_backoff_before_each_retry() -> None:
    # 3 attempts of (1 + 2) s, backoffs of at most 1 s and 2 s before the 2nd and 3rd attempts
    assert CallBounds(connect_timeout_s=1, read_timeout_s=2, max_attempts=3).worst_case_s == 9 + 1 + 2
    assert CallBounds(connect_timeout_s=1, read_timeout_s=2, max_attempts=1).worst_case_s == 3


def test_a_call_in_flight_and_the_lease_release_fit_in_the_stop_margin() -> None:
    assert 2 * SCHEDULER_CALLS.worst_case_s * 1000 < STOP_BEFORE_MS
    # The worker's bounds (27 s) would not fit: the scheduler needs its own
    assert DEFAULT_CALLS.worst_case_s * 1000 > STOP_BEFORE_MS


def test_the_scheduler_handlers_clients_carry_the_bounds(
    monkeypatch: pytest.MonkeyPatch, resource_env: dict[str, str]
) -> None:
    # Given the scheduler Lambda's own runtime (not a test's), from a deployment's environment
    for name, value in resource_env.items():
        monkeypatch.setenv(name, value)
    handler_module.default_components.cache_clear()
    get_settings.cache_clear()
    try:
        components = handler_module.default_components()
        # Then every client it builds times out and retries within SCHEDULER_CALLS
        aws = components.aws
        for client in (aws.dynamodb, aws.sqs, aws.dynamodb_resource.meta.client):
            config = client.meta.config
            assert config.connect_timeout == SCHEDULER_CALLS.connect_timeout_s
            assert config.read_timeout == SCHEDULER_CALLS.read_timeout_s
            assert config.retries == {"mode": "standard", "total_max_attempts": SCHEDULER_CALLS.max_attempts}
    finally:
        handler_module.default_components.cache_clear()
        get_settings.cache_clear()


def test_other_functions_keep_the_default_bounds(aws_credentials: None) -> None:
    config = Aws(region="us-east-1").sqs.meta.config
    assert (config.connect_timeout, config.read_timeout) == (3, 5)
    # 3 attempts in all (botocore's "max_attempts" would have meant 3 retries, 4 attempts)
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}


def _accept_all(server: socket.socket, accepted: list[socket.socket]) -> None:
    with contextlib.suppress(OSError):  # the server socket closed: the test is over
        while True:
            accepted.append(server.accept()[0])


@pytest.mark.enable_socket  # a real socket on 127.0.0.1 (see tests/conftest.py)
def test_a_hanging_endpoint_fails_the_call_after_the_bounded_attempts(aws_credentials: None) -> None:
    # Given an endpoint that accepts connections and never answers, and short reads
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    threading.Thread(target=_accept_all, args=(server, accepted), daemon=True).start()
    bounds = CallBounds(connect_timeout_s=1, read_timeout_s=0.2, max_attempts=2)
    aws = Aws(region="us-east-1", endpoint_url=f"http://127.0.0.1:{server.getsockname()[1]}", calls=bounds)
    try:
        # When a call is made, it raises after max_attempts requests instead of hanging
        with pytest.raises(ReadTimeoutError):
            aws.sqs.list_queues()
        assert len(accepted) == bounds.max_attempts
    finally:
        server.close()
        for connection in accepted:
            connection.close()
