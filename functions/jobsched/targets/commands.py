"""``command`` targets: Python callables registered with the worker by name.

The package ships three (design §5.5): ``echo`` returns its input; ``sleep`` takes ``{"seconds": N}``;
``fail`` takes ``{"times": N}`` and fails the first N attempts of a run (every attempt when ``times`` is
absent). Register your own with the decorator, in code the worker imports::

    from jobsched.targets import command

    @command("send-report")
    def send_report(call: TargetCall) -> dict:
        report.send(idempotency_key=call.run_id, day=call.scheduled_for)
        return {"sent": True}

A command receives the ``TargetCall`` (input, run id, attempt, cancel token); it fails the try by raising
(any exception). A long command should poll ``call.cancel`` so a timeout stops it; one that does not is
abandoned in its thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from jobsched.models import CommandTarget
from jobsched.ports.targets import SUCCESS_OUTPUT_BYTES, TargetCall, TargetFailed, head_bytes, truncate

CommandFn = Callable[[TargetCall], Any]
F = TypeVar("F", bound=CommandFn)


class CommandRegistry:
    """Named command callables. ``register`` is a decorator; names follow the job-name pattern."""

    def __init__(self) -> None:
        self._commands: dict[str, CommandFn] = {}

    def register(self, name: str | None = None, *, replace: bool = False) -> Callable[[F], F]:
        """Decorator registering a function under ``name`` (default: the function's name).

        Raises ValueError when the name is taken (pass ``replace=True`` to override on purpose).
        """

        def decorate(fn: F) -> F:
            key = name or fn.__name__
            if key in self._commands and not replace:
                raise ValueError(f"command {key!r} is already registered")
            self._commands[key] = fn
            return fn

        return decorate

    def unregister(self, name: str) -> None:
        """Forget ``name`` (no error when absent)."""
        self._commands.pop(name, None)

    def get(self, name: str) -> CommandFn | None:
        return self._commands.get(name)

    def names(self) -> list[str]:
        return sorted(self._commands)


commands = CommandRegistry()
"""The process-wide registry the worker uses by default."""


def command(name: str | None = None, *, replace: bool = False) -> Callable[[F], F]:
    """Register a command in the process-wide registry (see the module docstring)."""
    return commands.register(name, replace=replace)


class CommandExecutor:
    """Runs ``command`` targets from a registry. The worker's supervisor applies the timeout."""

    def __init__(self, registry: CommandRegistry = commands) -> None:
        self.registry = registry

    def execute(self, target: CommandTarget, call: TargetCall) -> str:
        """Call the command; its exception (or an unknown name) fails the try with ``TargetFailed``. The returned
        value, as JSON, is the try's ``output``."""
        fn = self.registry.get(target.name)
        if fn is None:
            raise TargetFailed(
                f"unknown command {target.name!r}; registered commands: {', '.join(self.registry.names())}"
            )
        try:
            result = fn(call)
        except TargetFailed:
            raise
        except Exception as error:
            raise TargetFailed(f"command {target.name} raised {type(error).__name__}: {error}") from error
        call.output = head_bytes(json.dumps(result, default=str, ensure_ascii=False), SUCCESS_OUTPUT_BYTES)
        return f"command {target.name} returned {truncate(json.dumps(result, default=str), 200)}"


# --- the commands the package ships -------------------------------------------------------------


@command("echo")
def echo(call: TargetCall) -> Any:
    """Return the input unchanged."""
    return call.input


@command("sleep")
def sleep(call: TargetCall) -> dict[str, float]:
    """Sleep ``input.seconds`` seconds (stops early, failing, when the try is cancelled by its timeout)."""
    data = call.input if isinstance(call.input, dict) else {}
    seconds = data.get("seconds")
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        raise TargetFailed('sleep expects input {"seconds": N} with N >= 0')
    if call.cancel.wait(float(seconds)):
        raise TargetFailed("sleep cancelled")
    return {"slept_s": float(seconds)}


@command("fail")
def fail(call: TargetCall) -> dict[str, int]:
    """Fail attempts 1..``input.times`` of a run and succeed after; fail every attempt without ``times``."""
    data = call.input if isinstance(call.input, dict) else {}
    times = data.get("times")
    if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 0):
        raise TargetFailed('fail expects input {"times": N} with N >= 0, or no "times" to always fail')
    if times is None or call.attempt <= times:
        limit = "every attempt" if times is None else f"the first {times} attempt(s)"
        raise TargetFailed(f"fail: attempt {call.attempt} failed on purpose ({limit})")
    return {"attempt": call.attempt}
