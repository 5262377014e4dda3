"""The model-based test's machinery on each backend (``tests.support.backends``): its fault injection (crashes,
transient errors, a lagging due index) and its API keys reach the fakes as they reach the adapters on moto, so
a sequence judged on one backend means the same on the other."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

from jobsched.api.schemas import JobCreate
from jobsched.api.wsgi import api_context
from jobsched.ports.jobs import DueQuery, SchedulingState
from tests.integration.test_promises_model import OWNER, Faults, Faulty, PromisesMachine, _Given
from tests.support.backends import BACKENDS, backend


@pytest.fixture(params=BACKENDS)
def machine(request: pytest.FixtureRequest) -> Iterator[PromisesMachine]:
    built = PromisesMachine(request.param)
    try:
        yield built
    finally:
        built.teardown()


def _every_second(machine: PromisesMachine) -> str:
    machine.create(kind="every-second", missed="skip", grace_s=5, window_s=0, overlap="allow", max_attempts=1)
    return next(iter(machine.jobs))


def _fires(machine: PromisesMachine, job_id: str) -> set[int]:
    return {int(r["scheduled_for"]) for r in machine._rows() if r["job_id"] == job_id}


def test_a_crash_before_a_runs_write_kills_the_loop_and_its_successor_catches_up(
    machine: PromisesMachine,
) -> None:
    job_id = _every_second(machine)
    machine.tick(2)
    before, names = _fires(machine, job_id), machine.names
    # a scheduled run's first write is its message (its row is made by the worker's claim)
    machine.tick_with_fault(mode="before", method="send", nth=0)
    assert machine.faults.fired
    assert machine.names == names + 1  # the loop that crashed was replaced by a new process
    assert _fires(machine, job_id) == before  # the other loop was not the leader: no fire sent this second
    machine.settle()
    machine.no_violation_seen()
    machine.safety()


def test_a_transient_error_on_a_send_leaves_the_job_due_for_the_next_tick(machine: PromisesMachine) -> None:
    job_id = _every_second(machine)
    machine.tick(2)
    machine.deliver(limit=100, duplicate=False, postpone=False)
    before = machine.scheduling_state(job_id)
    assert isinstance(before, SchedulingState) and before.next_run_at is not None
    machine.tick_with_fault(mode="error", method="send", nth=0)
    assert machine.faults.fired
    assert machine._receive(100) == []  # nothing reached the queue this second
    # ... so the fire has no row yet and the job did not move past it: the next tick sends it
    assert machine.runstore.get(job_id, before.next_run_at) is None
    after = machine.scheduling_state(job_id)
    assert isinstance(after, SchedulingState) and after.next_run_at == before.next_run_at
    machine.settle()  # the liveness checks: every fire due by now has a row
    assert before.next_run_at in _fires(machine, job_id)
    machine.safety()


def test_a_lagging_due_index_reads_what_it_held_when_the_lag_began(machine: PromisesMachine) -> None:
    job_id = _every_second(machine)
    machine.tick(1)
    state = machine.scheduling_state(job_id)
    assert isinstance(state, SchedulingState) and state.due is not None
    machine.lag["snapshot"] = [state.due]
    machine.lag["active"] = True
    machine.api.service.pause_job(OWNER, job_id)  # leaves the due index
    lagging = Faulty(machine.jobstore, Faults(), machine.lag)
    due = state.due
    entries, _ = lagging.query_due(DueQuery(due.partition, due.bucket, due.shard, due.due_at))
    assert entries == [due]
    machine.lag["active"] = False
    assert lagging.query_due(DueQuery(due.partition, due.bucket, due.shard, due.due_at))[0] == []


def test_a_key_names_one_run_and_its_expired_in_flight_record_lets_the_retry_through(
    machine: PromisesMachine,
) -> None:
    job_id = _every_second(machine)
    service = machine.api.service
    machine.jobs[job_id].keys.add("k1")  # the model counts a run per key
    first = service.trigger_job(OWNER, job_id, idempotency_key="k1")
    again = service.trigger_job(OWNER, job_id, idempotency_key="k1")
    assert (again.run.id, again.replayed) == (first.run.id, True)
    with pytest.raises(IdempotencyValidationError):  # the same key for another request
        service.create_job(
            OWNER,
            JobCreate.model_validate({"name": "other", "schedule": "* * * * *", "command": "echo"}),
            idempotency_key="k1",
        )
    machine.trigger(_Given(machine.jobs[job_id]), key="k2", fail_after_save=True)  # dies, expires, retried
    manual = [r for r in machine._rows() if r.get("kind") == "manual"]
    assert len(manual) == 2
    machine.safety()


def test_a_key_whose_first_request_is_still_running_is_refused() -> None:
    with backend("memory") as ports:
        keys = ports.idempotency
        keys.bind_invocation(api_context())  # an in-flight record lasts as long as the invocation

        def nested() -> dict[str, str]:
            keys.run(OWNER, "k", {"op": "x"}, lambda: {"ok": "inner"})
            return {"ok": "outer"}

        with pytest.raises(IdempotencyAlreadyInProgressError):
            keys.run(OWNER, "k", {"op": "x"}, nested)
        assert keys.run(OWNER, "k", {"op": "x"}, lambda: {"ok": "again"}).result == {"ok": "again"}


def test_an_unknown_backend_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'dynamo'"), backend("dynamo"):
        pass
