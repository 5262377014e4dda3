"""Metrics from many threads at once (worker batch threads; local mode's scheduler, workers and sweeper in
one process): every value added is published exactly once, whoever flushes and when."""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from jobsched.observability import add_metric, add_metrics, flush_metrics, metrics

NAMES = [f"TestMetric{i}" for i in range(5)]


@pytest.fixture
def published(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Starts from an empty metric set (another test's leftovers dropped); returns a function giving the EMF
    documents printed since."""
    metrics.clear_metrics()
    capsys.readouterr()

    def documents() -> list[dict[str, Any]]:
        return [
            json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')
        ]

    yield documents
    metrics.clear_metrics()


def _values(document: dict[str, Any], name: str) -> list[float]:
    value = document.get(name, [])
    return value if isinstance(value, list) else [value]


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_values_added_from_many_threads_while_another_flushes_are_all_published(published: Any) -> None:
    # Given 8 threads each adding 300 values spread over 5 metrics, while another thread keeps flushing the
    # way the handlers' @metrics.log_metrics decorator does (the provider's own flush), thread switches forced
    # as often as the interpreter allows
    adders, per_thread = 8, 300
    start = threading.Barrier(adders + 1)
    done = threading.Event()

    def add(thread: int) -> None:
        start.wait()
        for i in range(per_thread):
            add_metric(NAMES[(thread + i) % len(NAMES)], "Count", 1)

    def flush() -> None:
        start.wait()
        while not done.is_set():
            metrics.flush_metrics()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=add, args=(n,)) for n in range(adders)]
        flusher = threading.Thread(target=flush)
        for thread in [*threads, flusher]:
            thread.start()
        for thread in threads:
            thread.join(60)
        done.set()
        flusher.join(60)
    finally:
        sys.setswitchinterval(interval)
    flush_metrics()
    # Then every value came out in some EMF document, none lost, none twice
    totals: Counter[str] = Counter()
    for document in published():
        for name in NAMES:
            totals[name] += len(_values(document, name))
    assert sum(totals.values()) == adders * per_thread
    assert totals == {name: adders * per_thread // len(NAMES) for name in NAMES}


def test_add_metrics_with_flush_publishes_them_together_in_one_document(published: Any) -> None:
    add_metrics([(NAMES[0], "Count", 3), (NAMES[1], "Milliseconds", 250), (NAMES[1], "Milliseconds", 9)])
    add_metrics([(NAMES[2], "Count", 1)], flush=True)
    (document,) = published()
    assert _values(document, NAMES[0]) == [3] and _values(document, NAMES[1]) == [250, 9]
    assert _values(document, NAMES[2]) == [1]
    units = {m["Name"]: m["Unit"] for m in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units == {NAMES[0]: "Count", NAMES[1]: "Milliseconds", NAMES[2]: "Count"}
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "jobsched"
    assert document["service"] == "jobsched"


def test_a_bad_unit_is_refused_and_leaves_the_set_usable(published: Any) -> None:
    from aws_lambda_powertools.metrics import MetricUnitError

    with pytest.raises(MetricUnitError):
        add_metric(NAMES[0], "Parsecs", 1)
    add_metric(NAMES[0], "Count", 1)  # the lock was released
    flush_metrics()
    (document,) = published()
    assert _values(document, NAMES[0]) == [1]
