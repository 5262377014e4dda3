"""The ``command`` registry and the commands the package ships (echo, sleep, fail)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from jobsched.models import CommandTarget
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.targets import CommandExecutor, CommandRegistry, commands


def _call(input: object = None, attempt: int = 1) -> TargetCall:
    return TargetCall(run_id="j_1@0", job_id="j_1", scheduled_for_ms=0, attempt=attempt, input=input)


def run(name: str, call: TargetCall, registry: CommandRegistry = commands) -> str:
    return CommandExecutor(registry).execute(CommandTarget(name=name), call)


def test_the_package_ships_echo_sleep_and_fail() -> None:
    assert {"echo", "sleep", "fail"} <= set(commands.names())


def test_echo_returns_its_input() -> None:
    assert commands.get("echo")(_call({"x": [1, 2]})) == {"x": [1, 2]}  # type: ignore[misc]
    assert run("echo", _call({"x": 1})) == 'command echo returned {"x": 1}'


def test_sleep_sleeps_the_given_seconds() -> None:
    started = time.monotonic()
    assert commands.get("sleep")(_call({"seconds": 0.05})) == {"slept_s": 0.05}  # type: ignore[misc]
    assert time.monotonic() - started >= 0.05


@pytest.mark.parametrize("bad", [None, {}, {"seconds": "5"}, {"seconds": -1}, {"seconds": True}])
def test_sleep_rejects_bad_input(bad: object) -> None:
    with pytest.raises(TargetFailed, match=re.escape('sleep expects input {"seconds": N}')):
        run("sleep", _call(bad))


def test_sleep_stops_when_the_try_is_cancelled() -> None:
    call = _call({"seconds": 60})
    threading.Timer(0.05, call.cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(TargetFailed, match="sleep cancelled"):
        run("sleep", call)
    assert time.monotonic() - started < 30  # woken by the cancel, long before the 60 s were up


@pytest.mark.parametrize(
    ("times", "attempt", "fails"), [(2, 1, True), (2, 2, True), (2, 3, False), (0, 1, False)]
)
def test_fail_fails_the_first_n_attempts(times: int, attempt: int, fails: bool) -> None:
    call = _call({"times": times}, attempt=attempt)
    if fails:
        with pytest.raises(TargetFailed, match=f"attempt {attempt} failed on purpose"):
            run("fail", call)
    else:
        assert run("fail", call) == f'command fail returned {{"attempt": {attempt}}}'


@pytest.mark.parametrize("input", [None, {}, {"other": 1}])
def test_fail_without_times_fails_every_attempt(input: object) -> None:
    for attempt in (1, 5, 10):
        with pytest.raises(TargetFailed, match="every attempt"):
            run("fail", _call(input, attempt=attempt))


def test_fail_rejects_a_bad_times() -> None:
    with pytest.raises(TargetFailed, match=re.escape('fail expects input {"times": N}')):
        run("fail", _call({"times": "2"}))


def test_register_a_command_with_the_decorator() -> None:
    registry = CommandRegistry()

    @registry.register("send-report")
    def send_report(call: TargetCall) -> dict[str, str]:
        return {"key": call.idempotency_key}

    @registry.register()
    def cleanup(call: TargetCall) -> None:
        return None

    assert registry.names() == ["cleanup", "send-report"]
    assert run("send-report", _call(), registry) == 'command send-report returned {"key": "j_1@0"}'
    with pytest.raises(ValueError, match="already registered"):
        registry.register("cleanup")(send_report)
    registry.register("cleanup", replace=True)(send_report)
    registry.unregister("cleanup")
    assert registry.names() == ["send-report"]


def test_an_unknown_command_fails_the_try_naming_the_registered_ones() -> None:
    registry = CommandRegistry()
    registry.register("a")(lambda call: None)
    with pytest.raises(TargetFailed, match="unknown command 'zzz'; registered commands: a"):
        run("zzz", _call(), registry)


def test_an_exception_in_a_command_fails_the_try_with_its_type_and_message() -> None:
    registry = CommandRegistry()

    @registry.register("boom")
    def boom(call: TargetCall) -> None:
        raise KeyError("customer 42")

    with pytest.raises(TargetFailed, match="command boom raised KeyError: 'customer 42'"):
        run("boom", _call(), registry)
