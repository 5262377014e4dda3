"""The scheduler harnesses' shared parts (tests/integration/scheduler on moto, tests/unit/scheduler on the
fakes): the start instant and the fault-injecting recorder around adapters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from jobsched.models import to_ms

# 2026-03-02T10:00:00Z, a Monday, on a whole minute.
T0 = to_ms(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))


class Recorder:
    """Counts calls through a wrapper and can inject a fault before (``before``) or after (``after``) the real
    call: a callable receiving the call's arguments that may raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.results: list[tuple[str, tuple[Any, ...], Any]] = []
        self.before: dict[str, Callable[..., None]] = {}
        self.after: dict[str, Callable[..., None]] = {}

    def count(self, name: str) -> int:
        return sum(1 for call in self.calls if call[0] == name)


class Wrapped:
    """A fault-injecting proxy around an adapter: every method call is recorded in ``recorder``."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target
        recorder = self._recorder

        def call(*args: Any, **kwargs: Any) -> Any:
            recorder.calls.append((name, args, kwargs))
            if name in recorder.before:
                recorder.before[name](*args, **kwargs)
            value = target(*args, **kwargs)
            recorder.results.append((name, args, value))
            if name in recorder.after:
                recorder.after[name](*args, **kwargs)
            return value

        return call
