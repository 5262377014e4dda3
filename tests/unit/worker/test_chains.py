"""Chains on the in-memory fakes (design §2.1): each end of an upstream run makes exactly one run of each
downstream job, whatever is delivered again or re-run, and a worker lost between the upstream's outcome and
the downstream run leaves it to the sweeper."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from jobsched.domain.chains import Chains
from jobsched.domain.retries import Outcome
from jobsched.domain.runs import rerun_request
from jobsched.models import Job, RunKind, RunStatus
from jobsched.ports.runs import RunKey, RunRow, run_id
from jobsched.ports.targets import TargetCall
from jobsched.targets import commands
from tests.support.worker import T0, Kit, owner_sets_paused


class Crash(BaseException):
    """The worker process dying at a given write (nothing catches it, as nothing survives a crash)."""


@contextmanager
def failing_chained_inserts(
    kit: Kit, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> Iterator[None]:
    """Inside: every insert of a chained run raises ``error`` (the other inserts go through)."""
    put_new = kit.runs.put_new

    def failing(row: RunRow) -> RunRow | None:
        if row.kind is RunKind.CHAINED:
            raise error
        return put_new(row)

    monkeypatch.setattr(kit.runs, "put_new", failing)
    try:
        yield
    finally:
        monkeypatch.setattr(kit.runs, "put_new", put_new)


def downstream_rows(kit: Kit, job: Job) -> list[RunRow]:
    """Every run row of ``job``."""
    rows, _ = kit.runs.list_for_job(job.id, 100)
    return rows


def chain(
    kit: Kit, on: list[str] | None = None, command: str = "echo", **upstream_fields: Any
) -> tuple[Job, Job]:
    """An upstream job with its run at ``T0`` saved, and a job that runs after it (``on`` its given ends); both
    run ``command`` unless ``upstream_fields`` say otherwise."""
    upstream = kit.due_job(name="extract", **{"command": command, **upstream_fields})
    after: dict[str, Any] = {"job": upstream.id, **({"on": on} if on else {})}
    downstream = kit.make_job(name="load", command=command, after=after)
    return upstream, downstream


def test_an_upstream_run_that_succeeds_makes_one_run_of_its_downstream_job_carrying_its_id(
    kit: Kit, calls: list[TargetCall], sent: list[dict[str, Any]]
) -> None:
    upstream, downstream = chain(kit, command="record")

    assert kit.deliver(upstream) == Outcome.SUCCEEDED

    (made,) = downstream_rows(kit, downstream)
    assert (made.scheduled_for, made.kind, made.status) == (T0, RunKind.CHAINED, RunStatus.QUEUED)
    assert made.upstream_run_id == run_id(upstream.id, T0)
    assert made.owner == downstream.owner
    upstream_row = kit.runs.get(upstream.id, T0)
    assert upstream_row.status is RunStatus.SUCCEEDED and upstream_row.sweep_at is None  # left the index
    assert [m["MessageBody"] for m in sent] == [
        f'{{"job_id":"{downstream.id}","scheduled_for":{T0},"enqueued_at":{made.enqueued_at}}}'
    ]
    # and the downstream run's try is told its upstream run
    assert kit.deliver(downstream) == Outcome.SUCCEEDED
    assert [(c.job_id, c.upstream_run_id) for c in calls] == [
        (upstream.id, None),
        (downstream.id, run_id(upstream.id, T0)),
    ]


def test_a_redelivered_outcome_and_the_sweeper_make_no_second_downstream_run(
    kit: Kit, calls: list[TargetCall]
) -> None:
    upstream, downstream = chain(kit, command="record")
    assert kit.deliver(upstream) == Outcome.SUCCEEDED
    (first,) = downstream_rows(kit, downstream)

    # the upstream's message delivered again, the chain followed again, and a sweep long after
    assert kit.deliver(upstream) == Outcome.DROPPED
    assert kit.worker.chains.follow(upstream.id, T0, RunStatus.SUCCEEDED) == 0
    kit.clock.advance(3_600_000)
    kit.build_sweeper().sweep()

    (only,) = downstream_rows(kit, downstream)  # the same run (the sweeper re-sent its message meanwhile)
    assert (only.enqueued_at, only.upstream_run_id) == (first.enqueued_at, first.upstream_run_id)
    assert [c.job_id for c in calls] == [upstream.id]


@pytest.fixture
def fails_once() -> Iterator[str]:
    """Registers the command ``fails-once``: its first call fails, every later one succeeds."""
    seen: list[TargetCall] = []

    def command(call: TargetCall) -> None:
        seen.append(call)
        if len(seen) == 1:
            raise RuntimeError("the first round fails")

    commands.register("fails-once", replace=True)(command)
    yield "fails-once"
    commands.unregister("fails-once")


@pytest.mark.parametrize(
    ("on", "made_at"),
    [(["any"], RunStatus.DEAD), (["dead"], RunStatus.DEAD), (["succeeded"], RunStatus.SUCCEEDED)],
)
def test_an_upstream_run_that_dies_then_is_re_run_and_succeeds_makes_one_downstream_run_in_all(
    kit: Kit, fails_once: str, on: list[str], made_at: RunStatus
) -> None:
    # Given an upstream run that dies (one attempt), then is re-run and succeeds
    upstream, downstream = chain(kit, on=on, command=fails_once, retry={"max_attempts": 1})
    assert kit.deliver(upstream) == Outcome.DEAD
    after_dead = downstream_rows(kit, downstream)
    rerun = rerun_request(
        RunKey(upstream.id, T0), now_ms=kit.clock(), sweep_at_ms=kit.clock(), retention_days=90
    )
    assert kit.runs.rerun(rerun).done
    assert kit.deliver(upstream) == Outcome.SUCCEEDED

    # Then the downstream job has one run, made at the end the chain asks for and never made again
    (made,) = downstream_rows(kit, downstream)
    assert made.upstream_run_id == run_id(upstream.id, T0)
    assert after_dead == ([made] if made_at is RunStatus.DEAD else [])


def test_a_worker_lost_between_the_upstreams_success_and_its_downstream_run_leaves_it_to_the_sweeper(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream, downstream = chain(kit)

    crash = Crash("worker lost after the upstream's outcome")
    with failing_chained_inserts(kit, monkeypatch, crash), pytest.raises(Crash):
        kit.deliver(upstream)

    # the outcome stands, and the run waits in the sweep index; no downstream run yet
    upstream_row = kit.runs.get(upstream.id, T0)
    assert upstream_row.status is RunStatus.SUCCEEDED and upstream_row.sweep_at is not None
    assert downstream_rows(kit, downstream) == []
    # the sweeper, once the run is due, makes the downstream run and takes the upstream out of its index
    kit.clock.advance(upstream_row.sweep_at - kit.clock())
    kit.build_sweeper().sweep()
    (made,) = downstream_rows(kit, downstream)
    assert made.upstream_run_id == run_id(upstream.id, T0) and made.status is RunStatus.QUEUED
    assert kit.runs.get(upstream.id, T0).sweep_at is None
    # and a later pass makes nothing more
    kit.clock.advance(3_600_000)
    kit.build_sweeper().sweep()
    (only,) = downstream_rows(kit, downstream)
    assert only.enqueued_at == made.enqueued_at


def test_a_dead_upstream_whose_downstream_run_failed_is_notified_only_after_the_sweeper_made_it(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream, downstream = chain(kit, on=["dead"], command="fail", retry={"max_attempts": 1})
    with failing_chained_inserts(kit, monkeypatch, OSError("store unavailable")):
        assert kit.deliver(upstream) == Outcome.DEAD
    assert kit.runs.get(upstream.id, T0).notify_pending and kit.dead_runs.notified == []

    kit.clock.advance(kit.runs.get(upstream.id, T0).sweep_at - kit.clock())
    kit.build_sweeper().sweep()

    assert [r.upstream_run_id for r in downstream_rows(kit, downstream)] == [run_id(upstream.id, T0)]
    assert [d.run_id for d in kit.dead_runs.notified] == [run_id(upstream.id, T0)]


def test_ends_the_chain_does_not_ask_for_make_no_run_and_a_paused_downstream_job_gets_none(kit: Kit) -> None:
    upstream, on_dead = chain(kit, on=["dead"])
    paused = kit.make_job(name="paused-load", command="echo", after={"job": upstream.id})
    owner_sets_paused(kit.jobs, paused.id, paused=True, at_ms=kit.clock())

    assert kit.deliver(upstream) == Outcome.SUCCEEDED

    assert downstream_rows(kit, on_dead) == [] and downstream_rows(kit, paused) == []
    assert kit.runs.get(upstream.id, T0).sweep_at is None


def test_a_job_without_downstream_jobs_writes_nothing_more_per_run(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = kit.due_job(command="echo")
    steps: list[str] = []
    apply_step = kit.runs.apply_step

    def recording(step: Any) -> Any:
        steps.append(step.transition.name)
        return apply_step(step)

    monkeypatch.setattr(kit.runs, "apply_step", recording)
    assert kit.deliver(job) == Outcome.SUCCEEDED

    assert steps == ["claim", "succeed"]
    assert kit.runs.get(job.id, T0).sweep_at is None


def test_downstream_jobs_that_cannot_be_read_keep_the_run_in_the_sweep_index(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream, downstream = chain(kit)
    monkeypatch.setattr(kit.jobs, "dependents", lambda job_id: (_ for _ in ()).throw(OSError("throttled")))

    assert kit.deliver(upstream) == Outcome.SUCCEEDED

    assert kit.runs.get(upstream.id, T0).sweep_at is not None  # the sweeper will look
    monkeypatch.undo()
    kit.clock.advance(kit.runs.get(upstream.id, T0).sweep_at - kit.clock())
    kit.build_sweeper().sweep()
    assert len(downstream_rows(kit, downstream)) == 1


def test_chains_make_runs_only_for_the_job_their_after_names(kit: Kit) -> None:
    upstream, downstream = chain(kit)
    other = kit.make_job(name="other", command="echo")
    chains = Chains(jobs=kit.jobs, runs=kit.runs, queue=kit.queue, settings=kit.settings, clock=kit.clock)

    assert chains.follow(other.id, T0, RunStatus.SUCCEEDED) == 0
    assert chains.follow(upstream.id, T0, RunStatus.SKIPPED) == 0  # a skipped fire never ran
    assert downstream_rows(kit, downstream) == []


def test_the_lambda_and_sqs_envelope_of_a_chained_run_names_its_upstream_run() -> None:
    chained = TargetCall(
        run_id=f"j_1@{T0}", job_id="j_1", scheduled_for_ms=T0, attempt=1, upstream_run_id="j_0@1"
    )
    plain = TargetCall(run_id=f"j_1@{T0}", job_id="j_1", scheduled_for_ms=T0, attempt=1)

    assert chained.envelope()["upstream_run_id"] == "j_0@1"
    assert "upstream_run_id" not in plain.envelope()  # the envelope of any other run is as it was
