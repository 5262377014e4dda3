"""The ``RunLatenessMs`` metric (the lateness alarm's input) counts scheduled runs only: a backfilled run, or a
skipped fire re-run, starts when its owner asked, hours after its ``scheduled_for``, and is not late. A run whose
message carries lateness labels (the tick's: priority, owner or ``other``) is also counted under them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from jobsched.aws.queue import delivery_of
from jobsched.aws.wire import run_message_body
from jobsched.clock import FakeClock
from jobsched.domain.retries import Outcome
from jobsched.domain.runs import new_run
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import Job, RunKind
from jobsched.observability import MetricName
from jobsched.ports.lateness import LatenessLabels
from jobsched.ports.run_messages import RunMessage
from tests.support.worker import T0, sqs_record

HOUR = 3_600_000


@pytest.fixture
def lateness(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The values the worker adds to ``RunLatenessMs``."""
    seen: list[float] = []

    def add(name: str, unit: Any, value: float) -> None:
        if name == MetricName.RUN_LATENESS:
            seen.append(value)

    monkeypatch.setattr("jobsched.aws.metrics.add_metric", add)
    return seen


def test_a_scheduled_run_reports_its_lateness(
    make_job: Callable[..., Job],
    make_run: Callable[..., Any],
    deliver: Callable[..., str],
    lateness: list[float],
) -> None:
    job = make_job()
    make_run(job)
    assert deliver(job) == Outcome.SUCCEEDED
    assert lateness == [1_500]  # the clock is T0 + 1.5 s


@pytest.mark.parametrize("made", [{"kind": RunKind.BACKFILL}, {"reruns": 1}], ids=["backfill", "re-run"])
def test_a_run_made_on_request_does_not_feed_the_lateness_metric(
    make_job: Callable[..., Job],
    runs: MemoryRunStore,
    clock: FakeClock,
    deliver: Callable[..., str],
    lateness: list[float],
    made: dict[str, Any],
) -> None:
    # Given a run of a fire ten hours ago, made now by a backfill or a re-run
    job = make_job()
    row = new_run(
        job.id, T0 - 10 * HOUR, now_ms=clock(), retention_days=90, owner=job.owner, sweep_after_ms=None
    )
    assert runs.put_new(replace(row, **made)) is None
    # When it runs
    assert deliver(job, T0 - 10 * HOUR) == Outcome.SUCCEEDED
    # Then the lateness alarm does not see ten hours
    assert lateness == []


def test_a_run_whose_message_carries_labels_reports_its_lateness_under_them_too(
    make_job: Callable[..., Job],
    make_run: Callable[..., Any],
    worker: Any,
    lateness: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    labelled: list[tuple[str, float, LatenessLabels]] = []
    monkeypatch.setattr(
        "jobsched.aws.metrics.add_labelled",
        lambda name, unit, value, labels: labelled.append((name, value, labels)),
    )
    job = make_job()
    make_run(job)
    labels = LatenessLabels("high", "team-a")
    record = sqs_record(job.id, T0)
    record["body"] = run_message_body(RunMessage(job.id, T0, labels=labels))

    assert worker.handle(delivery_of(record)) == Outcome.SUCCEEDED

    assert lateness == [1_500]
    assert labelled == [(MetricName.RUN_LATENESS, 1_500, labels)]


def test_a_run_whose_message_carries_no_labels_reports_its_lateness_without_them(
    make_job: Callable[..., Job],
    make_run: Callable[..., Any],
    deliver: Callable[..., str],
    lateness: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    labelled: list[Any] = []
    monkeypatch.setattr("jobsched.aws.metrics.add_labelled", lambda *args: labelled.append(args))
    job = make_job()
    make_run(job)

    assert deliver(job) == Outcome.SUCCEEDED

    assert lateness == [1_500] and labelled == []
