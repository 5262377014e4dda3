"""End-to-end helpers: ``jobsched local`` in a subprocess on a free port with a temporary data dir.

Each process is the real thing (``python -m jobsched.local``): embedded moto, the API over HTTP, scheduler
loops, workers, sweeper, snapshots. Tests talk to it over HTTP with the dev token it saved, and read what it
printed. Waits poll the API against a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 20.0, every_s: float = 0.2) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what} (last: {last!r})")


def python_process(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.Popen[str]:
    """``python *args`` (this interpreter) with ``env``, its stdout and stderr one text pipe."""
    return subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd
    )


class LocalProcess:
    """One ``jobsched local`` process; ``lines`` collects what it prints."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.lines: list[str] = []
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBSCHED_")}
        self.process = python_process(
            "-m", "jobsched.local", "--port", str(self.port), "--data-dir", str(data_dir), *args, env=env
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        wait_for("the local API to answer", self._ready, timeout_s=START_TIMEOUT_S, every_s=0.1)
        self.token = (data_dir / "dev-token").read_text().strip()
        self.http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10
        )

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(
                f"jobsched local exited with {self.process.returncode}:\n" + "\n".join(self.lines)
            )
        if not any("API on" in line for line in self.lines):  # the banner follows the start of every loop
            return False
        try:
            return httpx.get(f"{self.url}/openapi.json", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def output(self) -> str:
        return "\n".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        """Send ``sig`` and wait for the exit; returns the exit status."""
        self.http.close()
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code


def runs_of(local: LocalProcess, job_id: str, status: str | None = None) -> list[dict[str, Any]]:
    """The job's runs (newest first, at most 100; of ``status`` when given), read over HTTP."""
    params = {"limit": "100", **({"status": status} if status else {})}
    reply = local.http.get(f"/jobs/{job_id}/runs", params=params)
    assert reply.status_code == 200, reply.text
    return list(reply.json()["items"])


def create(local: LocalProcess, body: dict[str, Any]) -> dict[str, Any]:
    """POST /jobs that must answer 201; the job."""
    reply = local.http.post("/jobs", json=body)
    assert reply.status_code == 201, reply.text
    return dict(reply.json())


def instant(value: str) -> float:
    """An API instant (ISO 8601, ``Z``) as epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
