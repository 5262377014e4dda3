"""``jobsched smoke``: after a deploy, prove on the live API that one job really runs, on time, once.

The check, step by step (each step prints one line; the first that fails ends the check):

1. ``create``: a uniquely named one-off job (``smoke-<UTC time>-<random>``), ``lead_s`` seconds ahead, with
   the ``echo`` command target (ships with every worker: nothing of the user's is needed) and one try, sent
   with an ``Idempotency-Key``; the API must answer 201, and its ``Location`` must resolve to the job.
2. ``replay``: the same request with the same key must replay the first response (200, the same job id,
   ``Idempotent-Replayed: true``), creating nothing.
3. ``enqueued``, ``started``, ``succeeded``: the job's run is polled every ``poll_s`` seconds until it
   succeeded; the lines give the run id, the dispatch lateness (``enqueued_at - scheduled_for``) and the start
   lateness (the run's ``lateness_ms``). The whole wait ends ``timeout_s`` after the job's instant.
4. ``cleanup``: the job is deleted, whatever happened before (its run history stays until retention).

Time comes from an injected clock (epoch ms) and sleep (seconds), so tests drive the waits without sleeping.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from jobsched.client import ApiError, JobschedClient
from jobsched.clock import Clock, system_clock

STEPS = ("create", "replay", "enqueued", "started", "succeeded", "cleanup")
"""The steps of the check, in order; a failure names one of them."""
SMOKE_COMMAND = "echo"
"""The target: a command every worker ships, which succeeds and returns its input."""
REPLAYED_HEADER = "Idempotent-Replayed"
"""The API's replay header (``jobsched.api.app.REPLAYED_HEADER``; not imported, to keep the CLI light)."""


@dataclass(frozen=True)
class SmokeSettings:
    """``lead_s``: how far ahead of now the one-off is scheduled (seconds); ``timeout_s``: how long after
    that instant the run may take to succeed; ``poll_s``: seconds between reads of the run."""

    lead_s: float = 5.0
    timeout_s: float = 120.0
    poll_s: float = 1.0


@dataclass(frozen=True)
class SmokeResult:
    """What a passing check saw. Lateness in milliseconds (``None`` when the API did not report it)."""

    job_id: str
    run_id: str
    dispatch_lateness_ms: int | None
    start_lateness_ms: int | None
    elapsed_ms: int


class SmokeFailed(Exception):
    """The check failed at ``step`` (one of ``STEPS``); ``message`` says what was seen and where to look."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ms(value: Any) -> int | None:
    """An API instant (ISO 8601 text) as epoch ms; None when absent."""
    if not isinstance(value, str) or not value:
        return None
    return round(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)


def _seconds(ms: int | None) -> str:
    return "unknown" if ms is None else f"{ms / 1000:.2f} s"


@dataclass(eq=False)
class SmokeCheck:
    """One run of the check against ``client``'s API; ``say`` receives each step's line.

    ``clock`` returns epoch ms and ``sleep`` waits seconds (tests pass a ``FakeClock`` and its ``sleep``);
    ``suffix`` makes the job's name unique (random by default).
    """

    client: JobschedClient
    _: KW_ONLY
    say: Callable[[str], None]
    settings: SmokeSettings = SmokeSettings()
    clock: Clock = system_clock
    sleep: Callable[[float], None] = time.sleep
    suffix: str | None = None

    def __post_init__(self) -> None:
        self.suffix = self.suffix or secrets.token_hex(4)

    def run(self) -> SmokeResult:
        """Run every step; the job is deleted at the end, also when a step fails.

        Returns what was seen. Raises ``SmokeFailed`` naming the first failing step (``cleanup`` when only
        the deletion failed; a cleanup failure after another failure is reported as a line, the first
        failure is raised).
        """
        started_ms = self.clock()
        fire_ms = math.ceil((started_ms + self.settings.lead_s * 1000) / 1000) * 1000
        name = f"smoke-{_iso(started_ms).replace('-', '').replace(':', '')}-{self.suffix}"
        body = {
            "name": name,
            "schedule": f"at {_iso(fire_ms)}",
            "timezone": "UTC",
            "command": SMOKE_COMMAND,
            "input": {"smoke": name},
            "retry": {"max_attempts": 1},
        }
        key = f"{name}-create"
        job_id = self._create(body, key, fire_ms)
        try:
            self._replay(body, key, job_id)
            run = self._wait_for_success(job_id, fire_ms)
        except BaseException:
            self._cleanup(job_id, failing=True)
            raise
        self._cleanup(job_id, failing=False)
        result = SmokeResult(
            job_id=job_id,
            run_id=str(run.get("id")),
            dispatch_lateness_ms=_dispatch_lateness_ms(run),
            start_lateness_ms=run.get("lateness_ms"),
            elapsed_ms=self.clock() - started_ms,
        )
        self.say(
            f"passed     in {result.elapsed_ms / 1000:.1f} s: run {result.run_id}, dispatch lateness "
            f"{_seconds(result.dispatch_lateness_ms)}, start lateness {_seconds(result.start_lateness_ms)}"
        )
        return result

    # --- steps ------------------------------------------------------------------------------

    def _post(self, step: str, body: dict[str, Any], key: str) -> httpx.Response:
        try:
            return self.client.request("POST", "/jobs", json=body, headers={"Idempotency-Key": key})
        except ApiError as error:
            raise SmokeFailed(step, f"POST /jobs was refused: {error}") from None

    def _create(self, body: dict[str, Any], key: str, fire_ms: int) -> str:
        response = self._post("create", body, key)
        job = response.json()
        if response.status_code != 201 or not isinstance(job, dict) or not job.get("id"):
            raise SmokeFailed("create", f"POST /jobs answered {response.status_code}, expected 201 and a job")
        job_id = str(job["id"])
        location = response.headers.get("Location", "")
        try:
            found = self.client.request("GET", str(httpx.URL(self.client.base_url + "/").join(location)))
            resolves = found.json().get("id") == job_id
        except (ApiError, ValueError):
            resolves = False
        if not resolves:
            self._cleanup(job_id, failing=True)
            raise SmokeFailed("create", f"Location {location!r} of job {job_id} does not lead to the job")
        self.say(f"created    job {job_id} ({body['name']}), one-off at {_iso(fire_ms)}, echo command")
        return job_id

    def _replay(self, body: dict[str, Any], key: str, job_id: str) -> None:
        response = self._post("replay", body, key)
        replayed_id = (response.json() or {}).get("id")
        if replayed_id and replayed_id != job_id:
            self._cleanup(str(replayed_id), failing=True)  # the repeat made a second job: remove it too
        if replayed_id != job_id or response.headers.get(REPLAYED_HEADER) != "true":
            raise SmokeFailed(
                "replay",
                f"a repeat with Idempotency-Key {key} answered {response.status_code} with job {replayed_id} "
                f"and {REPLAYED_HEADER}: {response.headers.get(REPLAYED_HEADER)}; expected job {job_id}, true",
            )
        self.say(f"replayed   a repeat with the same Idempotency-Key returned job {job_id} again")

    def _wait_for_success(self, job_id: str, fire_ms: int) -> dict[str, Any]:
        deadline_ms = fire_ms + round(self.settings.timeout_s * 1000)
        reported: set[str] = set()
        run: dict[str, Any] | None = None
        while True:
            run = self._latest_run(job_id) or run
            if run is not None:
                self._report_progress(run, reported)
                status = run.get("status")
                if status == "succeeded":
                    return run
                if status in ("dead", "skipped"):
                    raise SmokeFailed(
                        "succeeded",
                        f"run {run.get('id')} ended {status}: {run.get('error') or 'no error given'}",
                    )
            if self.clock() >= deadline_ms:
                raise self._timed_out(run, fire_ms)
            self.sleep(self.settings.poll_s)

    def _latest_run(self, job_id: str) -> dict[str, Any] | None:
        try:
            items = self.client.list_runs(job_id, limit=1).get("items") or []
        except ApiError as error:
            raise SmokeFailed("enqueued", f"reading the job's runs failed: {error}") from None
        return dict(items[0]) if items else None

    def _report_progress(self, run: dict[str, Any], reported: set[str]) -> None:
        """Print the steps the run has reached (from its timestamps), each once, in order."""
        reached = {
            "enqueued": run.get("enqueued_at") is not None or run.get("started_at") is not None,
            "started": run.get("started_at") is not None,
            "succeeded": run.get("status") == "succeeded",
        }
        lines = {
            "enqueued": f"enqueued   run {run.get('id')} for {run.get('scheduled_for')} at "
            f"{run.get('enqueued_at')}, dispatch lateness {_seconds(_dispatch_lateness_ms(run))}",
            "started": f"started    at {run.get('started_at')} on {run.get('worker') or 'a worker'}, "
            f"start lateness {_seconds(run.get('lateness_ms'))}",
            "succeeded": f"succeeded  at {run.get('finished_at')}, try {run.get('attempt')}",
        }
        for step in ("enqueued", "started", "succeeded"):
            if reached[step] and step not in reported:
                reported.add(step)
                self.say(lines[step])

    def _timed_out(self, run: dict[str, Any] | None, fire_ms: int) -> SmokeFailed:
        waited = f"{self.settings.timeout_s:g} s after its instant {_iso(fire_ms)}"
        if run is None:
            return SmokeFailed(
                "enqueued",
                f"no run {waited}: is the scheduler running (local mode: the `jobsched local` process; "
                "AWS: the scheduler Lambda's logs and its EventBridge rule)?",
            )
        if run.get("started_at") is None:
            return SmokeFailed(
                "started",
                f"run {run.get('id')} is still {run.get('status')} {waited}: is a worker consuming the "
                "run queue (AWS: the worker Lambda's event source mapping and logs)?",
            )
        return SmokeFailed(
            "succeeded",
            f"run {run.get('id')} is still {run.get('status')} {waited} (try {run.get('attempt')})",
        )

    def _cleanup(self, job_id: str, *, failing: bool) -> None:
        try:
            self.client.delete_job(job_id)
        except ApiError as error:
            if not failing:
                raise SmokeFailed("cleanup", f"deleting job {job_id} failed: {error}") from None
            self.say(
                f"cleanup    FAILED too: deleting job {job_id}: {error}; delete it with `jobsched jobs delete`"
            )
            return
        self.say(f"cleaned up deleted job {job_id} (its run history stays until retention)")


def _dispatch_lateness_ms(run: dict[str, Any]) -> int | None:
    """``enqueued_at - scheduled_for`` of a run, in ms (None when either is missing)."""
    enqueued, scheduled = _ms(run.get("enqueued_at")), _ms(run.get("scheduled_for"))
    return None if enqueued is None or scheduled is None else enqueued - scheduled
