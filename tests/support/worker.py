"""Shared pieces of the worker and sweeper tests (on moto in tests/integration/worker, on the in-memory fakes
in tests/unit/worker): the run instant ``T0``, simulated time (``SimWaiter``), jobs as the API saves them,
SQS event records, the ``record`` test command, a Lambda context, ``make_run`` (a run saved as the
scheduler saves it, through whichever ``runs`` store the directory's conftest provides), and ``kit``: the
common fixtures as one object, for the tests that use many of them."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import count
from typing import Any

import pytest

from jobsched.api.schemas import JobCreate
from jobsched.aws.queue import delivery_of
from jobsched.clock import FakeClock, from_ms, to_ms
from jobsched.domain.registration import scheduling_state
from jobsched.domain.runs import new_run
from jobsched.models import Job, JobEventKind
from jobsched.ports.jobs import AuditEvent, Rewrite, change_key
from jobsched.ports.runs import (
    Claim,
    ClaimRequest,
    OverlapHolder,
    OverlapRequest,
    Owned,
    RunKey,
    RunRow,
    run_id,
)
from jobsched.ports.targets import CancelToken, TargetCall
from jobsched.settings import Settings
from jobsched.targets import commands

T0 = to_ms(datetime(2026, 1, 5, 2, 0, tzinfo=UTC))
"""The scheduled_for of most test runs (epoch ms)."""


class SimTimeStuck(AssertionError):
    """A try under ``SimWaiter`` neither finished nor parked within its (real) patience: a test command that
    waits for simulated time must say so (``SimWaiter.sleep_until`` or the ``parked`` predicate)."""


class SimWaiter:
    """A ``Waiter`` in simulated time whose outcome does not depend on how busy the machine is.

    A try either finishes by itself (most commands: ``wait`` lets it, waiting in real time for as long as it
    takes, up to ``patience_s``), or waits for simulated time: a test command blocks in ``sleep_until`` (or a
    test passes ``parked``, a predicate that is true once its try can only wait, e.g. a subprocess that has
    started). Simulated time (``monotonic`` seconds and the fake ``clock`` together) moves only while the try
    is parked, by the waited seconds or up to the first sleeper's wake-up, whichever is earlier. So heartbeats
    and timeouts happen exactly where the test puts them, never because a slow machine ran a try late.
    """

    def __init__(
        self, clock: FakeClock, *, parked: Callable[[], bool] | None = None, patience_s: float = 30.0
    ) -> None:
        self.clock = clock
        self.parked = parked
        self.patience_s = patience_s
        self.stuck: list[str] = []
        self._now_ms = 0
        self._cond = threading.Condition()
        self._sleepers: dict[object, int | None] = {}  # sleeper -> wake-up (fake clock ms; None: cancel only)

    def monotonic(self) -> float:
        return self._now_ms / 1000

    @property
    def now(self) -> float:
        """Simulated monotonic seconds since the waiter was made."""
        return self.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait for ``event`` (the try's end) for ``seconds`` of simulated time; True when it ended."""
        target_ms = self._now_ms + max(0, round(seconds * 1000))
        while True:
            self._settle(event)
            if event.is_set():
                return True
            if self._now_ms >= target_ms:
                return False
            with self._cond:
                wakes = [
                    max(0, until - self.clock()) for until in self._sleepers.values() if until is not None
                ]
                step_ms = min([target_ms - self._now_ms, *wakes])
                self._now_ms += step_ms
                self.clock.advance(step_ms)
                now = self.clock()
                for sleeper, until in list(self._sleepers.items()):
                    if until is not None and until <= now:
                        del self._sleepers[sleeper]  # released here, so the next settle waits for it
                self._cond.notify_all()

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass at once (the worker's back-off between retried writes; no try
        is running): the fake clock moves with it, and test commands sleeping until then are released."""
        step_ms = max(0, round(seconds * 1000))
        with self._cond:
            self._now_ms += step_ms
            self.clock.advance(step_ms)
            now = self.clock()
            for sleeper, until in list(self._sleepers.items()):
                if until is not None and until <= now:
                    del self._sleepers[sleeper]
            self._cond.notify_all()

    def sleep_until(self, until_ms: int | None, cancel: CancelToken) -> bool:
        """For test commands: park the calling try until the fake clock reaches ``until_ms`` (epoch ms;
        None: until cancelled) or the try is cancelled. Returns True when cancelled."""
        sleeper = object()

        def release() -> None:
            with self._cond:
                self._sleepers.pop(sleeper, None)
                self._cond.notify_all()

        with self._cond:
            if until_ms is None or until_ms > self.clock():
                self._sleepers[sleeper] = until_ms
                self._cond.notify_all()
        cancel.on_cancel(release)
        with self._cond:
            self._cond.wait_for(lambda: sleeper not in self._sleepers, timeout=self.patience_s * 10)
        release()
        return cancel.cancelled

    def _is_parked(self) -> bool:
        return bool(self._sleepers) or (self.parked is not None and self.parked())

    def _settle(self, event: threading.Event) -> None:
        """Wait (real time, up to ``patience_s``) until the try has ended or is parked."""
        deadline = time.monotonic() + self.patience_s
        while not event.wait(0.002):
            with self._cond:
                if self._is_parked():
                    return
            if time.monotonic() >= deadline:
                self.stuck.append(f"a try neither ended nor parked within {self.patience_s:g} s")
                raise SimTimeStuck(self.stuck[-1])


def new_job(
    clock: FakeClock, number: int, owner: str = "team-a", name: str | None = None, **fields: Any
) -> Job:
    """A ``Job`` as the API creates it (``command: echo``, ``0 2 * * *`` unless given, or ``after``), id
    ``j_<number>``."""
    if "after" not in fields:
        fields.setdefault("schedule", "0 2 * * *")
    if "target" not in fields:
        fields.setdefault("command", "echo")
    create = JobCreate.model_validate({"name": name or f"job-{number}", **fields})
    now = datetime.fromtimestamp(clock() / 1000, tz=UTC)
    return Job.model_validate(
        {
            **create.model_dump(),
            "id": f"j_{number:020x}",
            "owner": owner,
            "created_at": now,
            "updated_at": now,
        }
    )


@pytest.fixture
def make_job(jobs: Any, clock: FakeClock, settings: Settings) -> Callable[..., Job]:
    """``make_job(name=..., owner=..., **JobCreate fields)``: a job saved in the test's job store (``jobs``: the
    DynamoDB adapter or its fake) as the API would (job + scheduling state), next fire a day after ``T0``."""
    numbers = count()

    def make(owner: str = "team-a", name: str | None = None, **fields: Any) -> Job:
        job = new_job(clock, next(numbers), owner, name, **fields)
        state = scheduling_state(
            job,
            anchor_at_ms=clock(),
            next_run_at_ms=T0 + 86_400_000 if job.schedule else None,
            partition=0,
            settings=settings.model_copy(update={"due_shards": 1, "due_bucket_s": 60}),
            now_ms=clock(),
        )
        jobs.create(job, state)
        return job

    return make


@pytest.fixture
def make_run(runs: Any, settings: Settings, clock: FakeClock) -> Callable[..., RunRow]:
    """``make_run(job, scheduled_for_ms=T0)``: the run row the scheduler saves before it enqueues."""

    def make(job: Job, scheduled_for_ms: int = T0, **kwargs: Any) -> RunRow:
        row = new_run(
            job.id,
            scheduled_for_ms,
            now_ms=clock(),
            retention_days=settings.retention_days,
            sweep_after_ms=settings.sweep_queued_after_s * 1000,
            owner=job.owner,
            **kwargs,
        )
        assert runs.put_new(row) is None
        return row

    return make


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + 1_500)


@pytest.fixture
def waiter(clock: FakeClock) -> Iterator[SimWaiter]:
    sim = SimWaiter(clock)
    yield sim
    assert not sim.stuck, sim.stuck  # the worker turns the waiter's error into a failed try: say it here


def sqs_record(
    job_id: str,
    scheduled_for_ms: int,
    *,
    message_id: str = "m-1",
    receive_count: int = 1,
    receipt_handle: str = "",
) -> dict[str, Any]:
    """An SQS event record as Lambda's event source mapping delivers it."""
    return {
        "messageId": message_id,
        "receiptHandle": receipt_handle,
        "body": json.dumps({"job_id": job_id, "scheduled_for": scheduled_for_ms}),
        "attributes": {"ApproximateReceiveCount": str(receive_count), "SentTimestamp": "0"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:test-RunQueue",
        "awsRegion": "us-east-1",
    }


@pytest.fixture
def record() -> Callable[..., dict[str, Any]]:
    return sqs_record


@pytest.fixture
def calls() -> Iterator[list[TargetCall]]:
    """Registers the command ``record`` (returns its input, remembering every call) for one test."""
    seen: list[TargetCall] = []

    @commands.register("record", replace=True)
    def record_command(call: TargetCall) -> Any:
        seen.append(call)
        return call.input

    yield seen
    commands.unregister("record")


@dataclass
class Context:
    """The Lambda context fields Powertools reads."""

    aws_request_id: str = "req-123"
    function_name: str = "jobsched-worker"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-worker"
    remaining_ms: int = 899_000  # a fresh invocation of the 900 s worker function

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def due_job(make_job: Callable[..., Job], make_run: Callable[..., RunRow]) -> Callable[..., Job]:
    """``due_job(**make_job arguments)``: a job as the API saves it, with its run at ``T0`` saved as the
    scheduler saves it (``make_job`` then ``make_run``)."""

    def make(*args: Any, **fields: Any) -> Job:
        job = make_job(*args, **fields)
        make_run(job)
        return job

    return make


@pytest.fixture
def deliver(worker: Any, record: Callable[..., dict[str, Any]]) -> Callable[..., str]:
    """``deliver(job, scheduled_for_ms=T0)``: the ``worker`` fixture handles one delivery of that run's
    message (``Worker.handle``: the ``Outcome`` value; raises as it does)."""
    return lambda job, scheduled_for_ms=T0: worker.handle(delivery_of(record(job.id, scheduled_for_ms)))


def claim_at(
    runs: Any, key: RunKey, worker: str, *, now_ms: int, stale_before_ms: int, create: RunRow | None = None
) -> Claim:
    """``worker``'s claim of run ``key`` in the run store ``runs`` at ``now_ms`` (epoch ms): a queued row, a retry
    due by then, or a running row whose heartbeat is older than ``stale_before_ms`` is taken; a row is made from
    ``create`` when it has none."""
    return runs.claim(
        ClaimRequest(
            key,
            worker=worker,
            now_ms=now_ms,
            stale_before_ms=stale_before_ms,
            retry_due_by_ms=now_ms,
            create=create,
        )
    )


def claim_now(
    kit: Kit, job: Job, worker: str, *, stale_before_ms: int, create: RunRow | None = None
) -> Claim:
    """``worker``'s claim, now (the kit's clock), of ``job``'s run at ``T0`` (:func:`claim_at`)."""
    return claim_at(
        kit.runs,
        RunKey(job.id, T0),
        worker,
        now_ms=kit.clock(),
        stale_before_ms=stale_before_ms,
        create=create,
    )


def claim_scheduled_now(kit: Kit, job: Job, worker: str) -> None:
    """``worker``'s claim, now, of ``job``'s scheduled run at ``T0`` (no row yet): the claim makes its row."""
    create = new_run(job.id, T0, now_ms=kit.clock(), retention_days=90, sweep_after_ms=None)
    assert claim_now(kit, job, worker, stale_before_ms=kit.clock() - 1, create=create).claimed


class Kit:
    """The fixtures most worker and sweeper tests share, as one object: ``kit.runs``, ``kit.due_job(...)``,
    ``kit.deliver(job)``... Each attribute is the test's fixture of that name (the in-memory fakes under
    tests/unit/worker, moto under tests/integration/worker; a test module's own override included), made on
    first use and the same object for the whole test. Make one in the test's thread before a thread of a try
    reads it. Fixtures that record from the moment they are made (``calls``, ``sent``, ``visibility_calls``,
    the test commands) stay parameters of the test, so they are in place before it starts."""

    settings: Settings
    clock: FakeClock
    waiter: SimWaiter
    aws: Any  # jobsched.aws.Aws (moto only)
    jobs: Any  # the job store: MemoryJobStore or the DynamoDB JobStore
    runs: Any  # the run store: MemoryRunStore or the DynamoDB RunStore
    queue: Any  # the run queue fake (fakes only)
    dead_runs: Any  # the dead-run notifier fake (fakes only)
    letters: Any  # the dead-letter queue fake (tests/unit/worker/test_dead_letters.py)
    registry: Any  # a command registry (tests/unit/worker/test_tries.py)
    make_job: Callable[..., Job]
    make_run: Callable[..., RunRow]
    due_job: Callable[..., Job]
    record: Callable[..., dict[str, Any]]
    delivered: Callable[[Job, int], dict[str, Any]]
    deliver: Callable[..., str]
    build_worker: Callable[..., Any]
    build_sweeper: Callable[..., Any]
    worker: Any  # jobsched.domain.worker.Worker
    sweeper: Any  # jobsched.domain.sweeper.Sweeper
    drain: Any  # reads a queue to the end (``drain(url)``, ``drain.bodies(url)``)

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request

    def __getattr__(self, name: str) -> Any:
        if name not in Kit.__annotations__:
            raise AttributeError(f"Kit has no {name!r}: take that fixture as a parameter of the test")
        value = self._request.getfixturevalue(name)
        setattr(self, name, value)  # later reads (from a try's thread, too) are plain attribute reads
        return value


@pytest.fixture
def kit(request: pytest.FixtureRequest) -> Kit:
    """The common fixtures as one object: see ``Kit``."""
    return Kit(request)


def owner_sets_paused(jobs: Any, job_id: str, *, paused: bool, at_ms: int) -> None:
    """The owner pauses or resumes job ``job_id`` at ``at_ms`` (epoch ms) as the API does: one conditional rewrite
    of the job and its scheduling state with its ``paused``/``resumed`` event, through ``jobs`` (the DynamoDB
    store or its fake)."""
    from dataclasses import replace as replace_state

    from jobsched.clock import from_ms
    from jobsched.models import JobEventKind, paused_fields
    from jobsched.ports.jobs import AuditEvent, Rewrite, change_key

    stored = jobs.get(job_id)
    assert stored.state is not None
    version = (stored.state.version or 0) + 1
    job = stored.job.model_copy(
        update={**paused_fields("ana", at_ms, None, paused=paused), "updated_at": from_ms(at_ms)}
    )
    kind = JobEventKind.PAUSED if paused else JobEventKind.RESUMED
    jobs.replace(
        Rewrite(
            job,
            replace_state(stored.state, paused=paused, version=version),
            to_ms(stored.job.updated_at),
            event=AuditEvent(job_id, at_ms, change_key(version), kind, "ana", {}),
        )
    )


def take_overlap_lock(
    kit: Kit, job: Job, scheduled_for: int, worker: str, *, stale_before_ms: int = 0, expires_at_s: int = 0
) -> OverlapHolder | None:
    """Try to take ``job``'s overlap lock for the first try of its run at ``scheduled_for`` (epoch ms) as
    ``worker``, now: a holder whose heartbeat is older than ``stale_before_ms`` (epoch ms) is taken over, and the
    lock expires at ``expires_at_s`` (epoch s; 0: no holder is stale, no expiry). The holder found, or None when
    taken."""
    return kit.jobs.acquire_overlap(
        OverlapRequest(
            job.id,
            run_id=run_id(job.id, scheduled_for),
            attempt=1,
            worker=worker,
            now_ms=kit.clock(),
            stale_before_ms=stale_before_ms,
            expires_at_s=expires_at_s,
        )
    )


def holder_running(kit: Kit, job: Job, worker: str = "w-holder") -> Owned:
    """The ``T0`` run of ``job`` claimed by ``worker`` now, its try holding the job's overlap lock: its claim."""
    assert kit.runs.claim(ClaimRequest(RunKey(job.id, T0), worker, kit.clock(), 0, 0)).claimed
    stale_before = kit.clock() - kit.settings.heartbeat_stale_s * 1000
    assert take_overlap_lock(kit, job, T0, worker, stale_before_ms=stale_before) is None
    return Owned(job.id, T0, 1, worker)


def job_with_runs(kit: Kit, count: int, *, overlap: str, **fields: Any) -> Job:
    """An every-minute job of ``overlap`` (the ``record`` command unless ``fields`` name another) with its runs at
    ``T0`` and the ``count - 1`` minutes after queued."""
    job = kit.make_job(schedule="* * * * *", overlap=overlap, **{"command": "record", **fields})
    for n in range(count):
        kit.make_run(job, T0 + n * 60_000)
    return job


def stored_run(kit: Kit, job: Job, scheduled_for: int) -> RunRow:
    """``job``'s run at ``scheduled_for`` (epoch ms) as stored; it must exist."""
    row = kit.runs.get(job.id, scheduled_for)
    assert row is not None
    return row


def owner_sets_overlap_skip(jobs: Any, job: Job, *, at_ms: int, overlap: str = "skip") -> None:
    """The owner's PATCH of ``overlap: skip`` (or ``overlap``) on ``job`` (as created, unedited since) at ``at_ms`` (epoch ms) as the
    API writes it, through ``jobs`` (the DynamoDB store or its fake): the job and its ``updated`` event naming the
    field."""
    stored = jobs.get(job.id)
    assert stored.state is not None
    edited = Job.model_validate(job.model_dump() | {"overlap": overlap, "updated_at": from_ms(at_ms)})
    event = AuditEvent(job.id, at_ms, change_key(1), JobEventKind.UPDATED, job.owner, {"fields": ["overlap"]})
    jobs.replace(Rewrite(edited, stored.state, expected_updated_at=to_ms(job.updated_at), event=event))


def resume_after_first_events_read(jobs: Any, job_id: str, *, at_ms: int) -> list[int]:
    """Make the owner's resume of job ``job_id`` (at ``at_ms``) land just after the first read of its audit events
    through ``jobs`` (the automatic pause's streak read), before anything the reader writes next. Returns the
    list the resume's instant is appended to once it landed."""
    landed: list[int] = []
    list_events = jobs.list_events

    def reading(*args: Any, **kwargs: Any) -> Any:
        answer = list_events(*args, **kwargs)
        if not landed:
            owner_sets_paused(jobs, job_id, paused=False, at_ms=at_ms)
            landed.append(at_ms)
        return answer

    jobs.list_events = reading
    return landed
