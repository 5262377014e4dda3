"""The run state machine's table (``jobsched.domain.run_states.TRANSITIONS``) walked on every run store: for each
transition, rows in every status (each with and without every field a condition of the table asks to be absent)
and no row at all, and parameters that meet and miss each clause of its condition (each comparison at and past
its bound, each optional clause given and not, each write's value given and not). Every case is applied through
the store's one conditional write (``apply_step``) and must do what the table says (``run_steps.outcome_of``):
applied or refused, the row as stored after it, and the row it answers with. Each case has a key of its own, so
a transition's rows are seeded together and read back together after its steps (few round trips on moto).
Everything is derived from the table, so a transition or a clause added to it is walked without a change here."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from jobsched.domain import run_states, run_steps
from jobsched.domain.run_states import (
    TRANSITIONS,
    Absent,
    Compare,
    Fill,
    IfGiven,
    Insert,
    Param,
    Set,
    StoredOr,
    Transition,
)
from jobsched.domain.run_steps import Step
from jobsched.domain.runs import new_run
from jobsched.dynamodb.layout import run_item
from jobsched.dynamodb.runs import RunStore
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import RunKind, RunStatus
from jobsched.ports.runs import RunKey, RunRow
from jobsched.ports.tries import TryRecord
from jobsched.sqlite.runs import SqliteRunStore

from .conftest import BACKENDS, adapter_on, on_table

T0 = 1_767_578_400_000  # 2026-01-05T02:00Z, epoch ms
JOB = "j_walk"

SAMPLES: dict[str, Any] = {
    "status": RunStatus.RETRYING,
    "worker": "w-sample",
    "error": "sample error",
    "owner": "team-s",
    "rerun_key": "digest-s",
    "tries": (TryRecord(1, T0, T0 + 5, "w1", "boom", None),),
    "notify_pending": True,
    "attempt": 3,
    "skipped_count": 4,
    "sweeps": 2,
    "kind": RunKind.MANUAL,
}
"""A value of each field for a write or a row that needs one (any other field: an instant, epoch ms)."""


def sample(field: str) -> Any:
    return SAMPLES.get(field, T0 + 77_000)


def status_rows(key: RunKey) -> dict[str, RunRow]:
    """A row of run ``key`` in each status, as the protocol leaves it there."""
    queued = new_run(key.job_id, key.scheduled_for, now_ms=T0, retention_days=90, owner="team-a")
    running = replace(
        queued,
        status=RunStatus.RUNNING,
        attempt=2,
        worker="w1",
        started_at=T0 + 1_000,
        heartbeat_at=T0 + 2_000,
        lateness_ms=400,
    )
    tries = (TryRecord(1, T0 + 500, T0 + 900, "w0", "HTTP 500", "out"),)
    retrying = replace(
        running,
        status=RunStatus.RETRYING,
        error="HTTP 500",
        retry_at=T0 + 60_000,
        sweep_at=T0 + 180_000,
        tries=tries,
    )
    finished = {"finished_at": T0 + 3_000, "sweep_at": None, "tries": tries}
    succeeded = replace(running, status=RunStatus.SUCCEEDED, **finished)
    dead = replace(
        running,
        status=RunStatus.DEAD,
        error="out",
        notify_pending=True,
        **{**finished, "sweep_at": T0 + 60_000},
    )
    skipped = replace(running, status=RunStatus.SKIPPED, error="overlap", **finished)
    cancelled = replace(
        running,
        status=RunStatus.CANCELLED,
        cancelled_by="alice",
        cancel_reason="wrong input",
        cancelled_from=RunStatus.RUNNING,
        **finished,
    )
    rows = [queued, running, retrying, succeeded, dead, skipped, cancelled]
    return {row.status.value: row for row in rows}


def absence_fields() -> list[str]:
    """The fields some condition of the table asks to be absent."""
    found: dict[str, None] = {}
    for transition in TRANSITIONS.values():
        for node in run_states.nodes(transition.condition):
            if isinstance(node, Absent):
                found[node.field] = None
    return list(found)


def rows_for(key: RunKey) -> Iterator[tuple[str, RunRow | None]]:
    """No row, and each status row with and without each field of :func:`absence_fields`."""
    yield "no row", None
    for status, row in status_rows(key).items():
        yield status, row
        for field in absence_fields():
            if run_steps.absent(row, field):
                yield f"{status} with {field}", replace(row, **{field: sample(field)})
            else:
                yield f"{status} without {field}", replace(row, **{field: run_steps.EMPTY[field]})


def _comparisons(transition: Transition) -> list[Compare]:
    return [n for n in run_states.nodes(transition.condition) if isinstance(n, Compare)]


def _optional(transition: Transition) -> list[str]:
    return [n.param for n in run_states.nodes(transition.condition) if isinstance(n, IfGiven)]


def _write_fields(transition: Transition) -> dict[str, str]:
    """Parameter -> the field a write of the transition puts it in."""
    out: dict[str, str] = {}
    for write in transition.writes:
        if isinstance(write, Set) and isinstance(write.value, Param):
            out[write.value.name] = write.field
        elif isinstance(write, Set) and isinstance(write.value, StoredOr):
            out[write.value.param] = write.value.field
    return out


def _other(value: Any) -> Any:
    """A value of the same type as ``value`` that differs from it."""
    if isinstance(value, RunStatus):
        statuses = list(RunStatus)
        return statuses[(statuses.index(value) + 1) % len(statuses)]
    if isinstance(value, str):
        return value + "-other"
    return value + 1


def params_for(
    transition: Transition, key: RunKey, row: RunRow | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parameter sets for ``transition`` on ``row``: one meeting every comparison, then one missing each (an
    equality by another value, a bound by one past it), each optional clause left out, each write's value None."""
    base: dict[str, Any] = {}
    misses: list[tuple[str, dict[str, Any]]] = []
    for write in transition.writes:
        if isinstance(write, Insert):
            base[write.param] = replace(status_rows(key)["queued"], kind=RunKind.MANUAL, term=3)
        elif isinstance(write, Fill):
            base[write.param] = new_run(
                key.job_id,
                key.scheduled_for,
                now_ms=T0,
                retention_days=90,
                sweep_after_ms=None,
                term=7,
                dispatch_at_ms=key.scheduled_for + 300,
            )
    for param, field in _write_fields(transition).items():
        base[param] = sample(field)
    for comparison in _comparisons(transition):
        stored = getattr(row, comparison.field) if row is not None else None
        value = (
            stored
            if stored is not None and not run_steps.absent(row, comparison.field)
            else sample(comparison.field)
        )
        if comparison.op == "=":
            base[comparison.param] = value
            misses.append((f"{comparison.param} differs", {comparison.param: _other(value)}))
        elif comparison.op == "<=":
            base[comparison.param] = value
            misses.append((f"{comparison.param} one above", {comparison.param: value + 1}))
            misses.append((f"{comparison.param} one below", {comparison.param: value - 1}))
        else:
            base[comparison.param] = value + 1
            misses.append((f"{comparison.param} at the value", {comparison.param: value}))
    for param in _optional(transition):
        base.setdefault(param, sample(param))
        misses.append((f"no {param}", {param: None}))
    unset = {p: None for p, f in _write_fields(transition).items() if f not in ("status", "attempt", "kind")}
    if unset:
        misses.append(("write values None", unset))
    missing = set(transition.params()) - set(base)
    assert not missing, f"the walk has no value for {sorted(missing)} of {transition.name}"
    yield "meets every clause", base
    for name, change in misses:
        yield name, {**base, **change}


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    """A run store: the fake, the DynamoDB adapter on the moto runs table, or the SQLite one."""
    return adapter_on(request, MemoryRunStore, SqliteRunStore, on_table(RunStore, "runs_table"))


def seed(store: Any, rows: list[RunRow]) -> None:
    """Store ``rows`` (each at a free key) as they are: on the runs table in batch writes (25 items a request),
    on the other stores by ``put_new``."""
    if isinstance(store, RunStore):
        with store.table.batch_writer() as batch:
            for row in rows:
                batch.put_item(Item=run_item(row))
        return
    for row in rows:
        assert store.put_new(row) is None


def cases(transition: Transition) -> Iterator[tuple[str, RunRow | None, Step]]:
    """Each case of the walk of ``transition``: its name, the row it finds (None: no row) and the step, each at
    a key of its own."""
    slot = 0
    for row_name, row in rows_for(RunKey(JOB, T0)):
        for params_name, params in params_for(transition, RunKey(JOB, T0), row):
            slot += 1
            key = RunKey(JOB, T0 + slot)
            seeded = replace(row, scheduled_for=key.scheduled_for) if row is not None else None
            keyed = {
                p: replace(v, scheduled_for=key.scheduled_for) if isinstance(v, RunRow) else v
                for p, v in params.items()
            }
            yield f"{transition.name} on {row_name}, {params_name}", seeded, Step(transition, key, keyed)


@pytest.mark.parametrize("name", list(TRANSITIONS))
def test_every_transition_does_what_the_table_says_on_every_store(store: Any, name: str) -> None:
    transition = TRANSITIONS[name]
    walk = list(cases(transition))
    seed(store, [seeded for _, seeded, _ in walk if seeded is not None])
    applied_in: set[str] = set()
    refused = 0
    expected_rows: dict[RunKey, RunRow | None] = {}
    for case, seeded, step in walk:
        expected, written = run_steps.outcome_of(step, seeded)

        outcome = store.apply_step(step)

        assert outcome.applied == expected.applied, case
        if transition.answers == "before":
            assert outcome.before == expected.before, case
        elif transition.answers == "after":
            assert outcome.after == expected.after, case
        expected_rows[step.key] = written if written is not None else seeded
        if expected.applied:
            applied_in.add(seeded.status.value if seeded is not None else "no row")
        else:
            refused += 1
    stored = {row.key: row for row in store.get_many(list(expected_rows))}
    for case, _, step in walk:
        assert stored.get(step.key) == expected_rows[step.key], case
    # the walk met the transition in every status the table lets it apply from, and saw it refused
    wanted = {s.value for s in run_states.from_statuses(transition)}
    if run_states.admits_no_row(transition.condition):
        wanted.add("no row")
    assert applied_in == wanted and refused > 0
