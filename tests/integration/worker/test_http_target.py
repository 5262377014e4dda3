"""``http`` targets against a local HTTP server on 127.0.0.1 (loopback allowed, as local mode does), and the
address guard that refuses metadata, private and loopback addresses elsewhere."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Worker
from jobsched.models import HttpTarget, RunStatus
from jobsched.ports.runs import run_id
from jobsched.ports.targets import TargetCall, TargetFailed, TargetTimedOut
from jobsched.settings import Settings
from jobsched.targets.http import AddressPolicy, HttpExecutor
from tests.support.worker import Kit

from .conftest import T0, SimWaiter


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler], ending: threading.Event) -> Iterator[str]:
    """Serve ``handler`` on a free 127.0.0.1 port from a thread of its own; yields the server's URL. On exit
    sets ``ending`` (answers still waiting end), then shuts the server down."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        ending.set()
        httpd.shutdown()
        httpd.server_close()


@dataclass
class Server:
    """A local HTTP server: answers with ``responses`` in order (status, body, delay_s), then 200. A delayed
    answer waits ``delay_s`` real seconds or until the test ends (``closing``), whichever comes first."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    responses: list[tuple[int, str, float]] = field(default_factory=list)
    closing: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server(url="")

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            state.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": self.rfile.read(length) if length else b"",
                }
            )
            status, body, delay = state.responses.pop(0) if state.responses else (200, "ok", 0.0)
            if delay:
                state.closing.wait(delay)
            payload = body.encode()
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, *args: Any) -> None:
            pass

    with _serving(Handler, state.closing) as state.url:
        yield state


@pytest.fixture
def loopback_worker(settings: Settings, build_worker: Callable[..., Worker]) -> Worker:
    return build_worker(settings.model_copy(update={"allow_loopback_http_targets": True}))


def _call(**kwargs: Any) -> TargetCall:
    return TargetCall(
        **{
            "run_id": "j_1@1767578400000",
            "job_id": "j_1",
            "scheduled_for_ms": T0,
            "attempt": 1,
            "input": {"a": 1},
            "timeout_s": 5.0,
            **kwargs,
        }
    )


LOOPBACK = AddressPolicy(allow_loopback=True)


def test_a_2xx_succeeds_with_the_input_as_body_and_the_run_headers(
    kit: Kit, loopback_worker: Worker, server: Server
) -> None:
    job = kit.make_job(
        target={"type": "http", "url": f"{server.url}/hook?token=s3cret", "headers": {"X-Team": "a"}},
        input={"report": "sales"},
    )
    kit.make_run(job)
    assert loopback_worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.SUCCEEDED
    (request,) = server.requests
    assert request["method"] == "POST" and request["path"] == "/hook?token=s3cret"
    assert json.loads(request["body"]) == {"report": "sales"}
    headers = request["headers"]
    assert headers["idempotency-key"] == run_id(job.id, T0)
    assert headers["x-jobsched-scheduled-for"] == "2026-01-05T02:00:00Z"
    assert headers["x-jobsched-attempt"] == "1"
    assert headers["content-type"] == "application/json"
    assert headers["x-team"] == "a"


def test_a_chained_run_names_its_upstream_run_in_a_header_and_keeps_the_input_as_body(server: Server) -> None:
    # design §2.1: the body is the owner's input; the upstream run is named beside it
    HttpExecutor(LOOPBACK).execute(HttpTarget(url=server.url), _call(upstream_run_id="j_0@1767578400000"))
    HttpExecutor(LOOPBACK).execute(HttpTarget(url=server.url), _call())
    chained, plain = server.requests
    assert chained["headers"]["x-jobsched-upstream-run-id"] == "j_0@1767578400000"
    assert json.loads(chained["body"]) == {"a": 1}
    assert "x-jobsched-upstream-run-id" not in plain["headers"]


def test_every_delivery_and_attempt_of_a_run_carries_the_same_idempotency_key(
    kit: Kit, loopback_worker: Worker, server: Server
) -> None:
    server.responses = [(503, "busy, try later", 0.0)]
    job = kit.due_job(target={"type": "http", "url": server.url}, retry={"backoff_s": 5})
    assert loopback_worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.error == f"HTTP 503 from POST {server.url}: busy, try later"
    kit.clock.advance(5_000)
    assert loopback_worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.SUCCEEDED
    assert (
        loopback_worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.DROPPED
    )  # duplicate: not sent
    keys = [r["headers"]["idempotency-key"] for r in server.requests]
    assert keys == [run_id(job.id, T0)] * 2
    assert [r["headers"]["x-jobsched-attempt"] for r in server.requests] == ["1", "2"]


@pytest.mark.parametrize("status", [302, 404, 500])
def test_a_non_2xx_fails_the_try_and_redirects_are_not_followed(server: Server, status: int) -> None:
    server.responses = [(status, "nope", 0.0)]
    with pytest.raises(TargetFailed, match=f"HTTP {status} from POST"):
        HttpExecutor(LOOPBACK).execute(HttpTarget(url=f"{server.url}/x"), _call())
    assert len(server.requests) == 1


def test_get_sends_no_body_and_secrets_in_the_query_stay_out_of_errors(server: Server) -> None:
    server.responses = [(500, "", 0.0)]
    with pytest.raises(TargetFailed) as failure:
        HttpExecutor(LOOPBACK).execute(HttpTarget(url=f"{server.url}/x?key=s3cret", method="GET"), _call())
    assert "s3cret" not in str(failure.value)
    assert server.requests[0]["body"] == b""


def test_a_slow_server_times_out(server: Server) -> None:
    # Given a server that answers only after a minute (or when the test ends)
    server.responses = [(200, "late", 60.0)]
    started = time.monotonic()
    # Then a try with a 1 s timeout gives up (real time: httpx's own timeout), long before the answer
    with pytest.raises(TargetTimedOut, match="timed out after 1 s"):
        HttpExecutor(LOOPBACK).execute(HttpTarget(url=server.url), _call(timeout_s=1.0))
    assert time.monotonic() - started < 30


def test_a_slow_server_through_the_worker_fails_the_try_as_timed_out(kit: Kit, server: Server) -> None:
    # Given a server that answers only after the test ends; simulated time moves once it has the request
    server.responses = [(200, "late", 60.0)]
    waiter = SimWaiter(kit.clock, parked=lambda: bool(server.requests))
    worker = kit.build_worker(
        kit.settings.model_copy(update={"allow_loopback_http_targets": True}), waiter=waiter
    )
    job = kit.due_job(target={"type": "http", "url": server.url}, timeout_s=20)
    # When the try passes its timeout, it fails as timed out (to be retried)
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.RETRYING
    assert row.error == "timed out after 20 s (timeout_s)"
    assert not waiter.stuck


def test_a_connection_error_fails_the_try() -> None:
    with pytest.raises(TargetFailed, match="ConnectError"):
        HttpExecutor(LOOPBACK).execute(HttpTarget(url="http://127.0.0.1:9/"), _call(timeout_s=2.0))


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("169.254.169.254", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.5", "private"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("0.0.0.0", "loopback"),
    ],
)
def test_internal_addresses_are_refused_by_default(address: str, reason: str) -> None:
    # Given a host name that resolves to an internal address (the resolver is the only fake here)
    executor = HttpExecutor(AddressPolicy(), resolver=lambda host, port: [address])
    with pytest.raises(TargetFailed, match=f"resolves to .* \\({reason}\\)"):
        executor.execute(HttpTarget(url="http://innocent.example/hook"), _call())


def test_every_resolved_address_is_checked() -> None:
    executor = HttpExecutor(AddressPolicy(), resolver=lambda host, port: ["93.184.216.34", "10.0.0.1"])
    with pytest.raises(TargetFailed, match=re.escape("10.0.0.1")):
        executor.execute(HttpTarget(url="http://mixed.example/"), _call())


def test_the_local_server_is_refused_without_the_loopback_switch(kit: Kit, server: Server) -> None:
    job = kit.due_job(target={"type": "http", "url": server.url})
    assert kit.deliver(job) == Outcome.RETRYING
    row = kit.runs.get(job.id, T0)
    assert row is not None and "refused: 127.0.0.1 resolves to 127.0.0.1 (loopback)" in row.error
    assert server.requests == []


def test_loopback_is_only_for_the_owners_given(server: Server) -> None:
    # Given local mode's executor: loopback allowed, for the owners granted shell targets alone
    executor = HttpExecutor(LOOPBACK, loopback_owners=frozenset({"ops"}))
    # When another owner's target, then ops', calls the local server
    with pytest.raises(TargetFailed, match=r"resolves to 127\.0\.0\.1 \(loopback\)"):
        executor.execute(HttpTarget(url=f"{server.url}/billing"), _call(owner="billing"))
    assert executor.execute(HttpTarget(url=f"{server.url}/ops"), _call(owner="ops")) == "HTTP 200"
    # Then only ops' request reached it
    assert [request["path"] for request in server.requests] == ["/ops"]


def test_the_private_switch_does_not_open_loopback(server: Server) -> None:
    with pytest.raises(TargetFailed, match="loopback"):
        HttpExecutor(AddressPolicy(allow_private=True)).execute(HttpTarget(url=server.url), _call())
    assert server.requests == []


# --- what a try records (design §5.7) ----------------------------------------------------------------


def test_the_output_is_the_status_and_the_head_of_the_body(server: Server) -> None:
    server.responses = [(200, "accepted " + "z" * 1_000, 0.0), (500, "database down " + "y" * 5_000, 0.0)]
    ok = _call()
    HttpExecutor(LOOPBACK).execute(HttpTarget(url=server.url), ok)
    assert ok.output is not None and ok.output.startswith("HTTP 200\naccepted zzz")
    assert len(ok.output.encode()) <= 256
    failed = _call()
    with pytest.raises(TargetFailed):
        HttpExecutor(LOOPBACK).execute(HttpTarget(url=server.url), failed)
    assert failed.output is not None and failed.output.startswith("HTTP 500\ndatabase down yyy")
    assert 256 < len(failed.output.encode()) <= 3072


def test_secret_header_values_never_reach_the_output_or_the_error(server: Server) -> None:
    # Given a server that echoes the request's headers, and a target marking X-Api-Key secret
    target = HttpTarget(
        url=server.url,
        headers={"X-Api-Key": "k-123456789", "Authorization": "Bearer tok-abcdef", "X-Team": "billing"},
        secret_headers=["x-api-key"],
    )
    echoed = "seen X-Api-Key: k-123456789, Authorization: Bearer tok-abcdef, X-Team: billing"
    server.responses = [(200, echoed, 0.0), (401, echoed + " cut at k-1234", 0.0)]
    ok = _call()
    HttpExecutor(LOOPBACK).execute(target, ok)
    assert ok.output == ("HTTP 200\nseen X-Api-Key: [redacted], Authorization: [redacted], X-Team: billing")
    failed = _call()
    with pytest.raises(TargetFailed) as failure:
        HttpExecutor(LOOPBACK).execute(target, failed)
    for text in (str(failure.value), failed.output or ""):
        assert "k-123456789" not in text and "tok-abcdef" not in text and "k-1234" not in text
        assert "X-Team: billing" in text


def test_a_secret_at_the_cut_of_an_error_is_redacted_before_the_cut(server: Server) -> None:
    # Given a server echoing a secret header so that the error's 2,000-character cut falls inside it
    secret = "k-" + "0123456789abcdefghijklmnopqrstuvwxyzAB"[:36]
    target = HttpTarget(url=server.url, headers={"X-Api-Key": secret}, secret_headers=["X-Api-Key"])
    prefix = f"HTTP 401 from POST {server.url}: "
    body = "e" * (2000 - len(" ... [truncated]") - 30 - len(prefix)) + secret + " and more" + "f" * 100
    server.responses = [(401, body, 0.0)]
    failed = _call()
    with pytest.raises(TargetFailed) as failure:
        HttpExecutor(LOOPBACK).execute(target, failed)
    # Then no part of it is left in the error, cut or not, nor in the output
    error = str(failure.value)
    assert error.endswith(" ... [truncated]") and len(error) <= 2000
    for text in (error, failed.output or ""):
        assert secret[:8] not in text and secret[-8:] not in text


def test_a_secret_echoed_json_escaped_is_redacted(server: Server) -> None:
    secret = "tok/abc/0123456789"
    target = HttpTarget(url=server.url, headers={"Authorization": f"Bearer {secret}"})
    server.responses = [(403, json.dumps({"token": secret}).replace("/", "\\/"), 0.0)]
    failed = _call()
    with pytest.raises(TargetFailed) as failure:
        HttpExecutor(LOOPBACK).execute(target, failed)
    for text in (str(failure.value), failed.output or ""):
        assert "0123456789" not in text and '{"token": "[redacted]"}' in text


def test_a_webhook_path_marked_secret_never_shows(server: Server) -> None:
    # Given a webhook whose path is its credential, and a server naming the path it did not find
    path = "/services/T0AB12CD/B0EF34GH/XyZsecretXyZsecret"
    target = HttpTarget(url=server.url + path, secret_path=True)
    server.responses = [(404, f"no hook at {path}", 0.0)]
    failed = _call()
    with pytest.raises(TargetFailed) as failure:
        HttpExecutor(LOOPBACK).execute(target, failed)
    # Then the error names the host and hides the path, and the echo is redacted
    assert str(failure.value) == f"HTTP 404 from POST {server.url}/[redacted]: no hook at [redacted]"
    for text in (str(failure.value), failed.output or ""):
        assert "XyZsecret" not in text and "B0EF34GH" not in text


def test_a_secret_header_must_be_one_of_the_targets_headers() -> None:
    with pytest.raises(ValueError, match="secret header 'X-Token' is not one of the target's headers"):
        HttpTarget(url="https://example.com/", headers={"X-Api-Key": "k"}, secret_headers=["X-Token"])


@dataclass
class Trickler:
    """A local server that answers 200 at once, then trickles its body one byte every 0.1 s for a minute (or
    until the test ends): each read gets a byte well within any per-read timeout. ``closed`` is set when the
    client has gone (a write failed)."""

    url: str
    closed: threading.Event = field(default_factory=threading.Event)
    ending: threading.Event = field(default_factory=threading.Event)
    serving: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def trickler() -> Iterator[Trickler]:
    state = Trickler(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "600")
            self.end_headers()
            state.serving.set()
            try:
                for _ in range(600):
                    if state.ending.wait(0.1):
                        return
                    self.wfile.write(b"x")
                    self.wfile.flush()
            except OSError:
                state.closed.set()

        do_POST = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    with _serving(Handler, state.ending) as state.url:
        yield state


def test_a_server_trickling_its_answer_is_cut_off_at_the_tries_timeout(trickler: Trickler) -> None:
    # Given a server that keeps each read busy with a byte every 0.1 s (httpx's per-read timeout never fires)
    outcome: list[BaseException] = []

    def try_it() -> None:
        try:
            HttpExecutor(LOOPBACK).execute(HttpTarget(url=trickler.url), _call(timeout_s=1.0))
        except BaseException as error:
            outcome.append(error)

    # When a try with a 1 s timeout sends its request
    thread = threading.Thread(target=try_it, daemon=True)
    thread.start()
    thread.join(10)
    # Then it has stopped by then, as timed out, and the server saw its connection go: no request runs on
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], TargetTimedOut)
    assert trickler.closed.wait(5)


def test_a_cancelled_try_shuts_its_connection_at_once(trickler: Trickler) -> None:
    # Given a try whose request is being trickled an answer
    call = _call(timeout_s=60.0)
    outcome: list[BaseException] = []

    def try_it() -> None:
        try:
            HttpExecutor(LOOPBACK).execute(HttpTarget(url=trickler.url), call)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=try_it, daemon=True)
    thread.start()
    assert trickler.serving.wait(10)  # the request is under way: the server trickles its answer
    # When the worker cancels it (its timeout as the supervisor measured it, or a lost heartbeat)
    call.cancel.cancel()
    # Then the request ends within moments and the server sees the connection closed
    thread.join(5)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], TargetTimedOut)
    assert trickler.closed.wait(5)
