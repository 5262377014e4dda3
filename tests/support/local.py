"""Local mode as the tests start it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from jobsched.local.config import LocalConfig
from jobsched.local.runtime import LocalRuntime


def quiet_runtime(data_dir: Path, lines: list[str], **config: Any) -> LocalRuntime:
    """Local mode on an ephemeral port over ``data_dir`` with one worker, its lines kept in ``lines``, errors
    only in its logs and the sweeper idle for an hour; ``config`` sets further ``LocalConfig`` fields (or
    overrides those)."""
    defaults: dict[str, Any] = {"port": 0, "workers": 1, "log_level": "ERROR", "sweep_interval_s": 3600}
    return LocalRuntime(LocalConfig(data_dir=data_dir, emit=lines.append, **(defaults | config)))


@contextmanager
def serving(data_dir: Path, lines: list[str], **config: Any) -> Iterator[tuple[LocalRuntime, httpx.Client]]:
    """A ``quiet_runtime`` started, and an HTTP client of its API with its token; stopped at the end (also when
    its start is refused, which raises here)."""
    runtime = quiet_runtime(data_dir, lines, **config)
    try:
        runtime.start()
        with httpx.Client(
            base_url=runtime.url, headers={"Authorization": f"Bearer {runtime.token}"}
        ) as client:
            yield runtime, client
    finally:
        runtime.stop()
