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

from jobsched.observability import add_labelled, add_metric, add_metrics, flush_metrics, metrics
from jobsched.ports.lateness import OTHER_OWNERS, LatenessLabels

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


def _dimensions(document: dict[str, Any]) -> list[list[str]]:
    return [sorted(names) for names in document["_aws"]["CloudWatchMetrics"][0]["Dimensions"]]


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_labelled_values_go_out_at_the_flush_one_document_per_labels_by_priority_and_owner(
    published: Any,
) -> None:
    # Given start lateness of three runs under two labels, and a value of the shared set
    from jobsched.aws.metrics import PowertoolsRunMetrics

    run_metrics = PowertoolsRunMetrics()
    run_metrics.run_late(100, LatenessLabels("high", "big"))
    run_metrics.run_late(300, LatenessLabels("high", "big"))
    run_metrics.run_late(7, LatenessLabels("normal", OTHER_OWNERS))

    # When the set is flushed (as a handler's decorator or local mode does)
    metrics.flush_metrics()

    # Then the shared document has the three values without labels, and each labels' document its own values,
    # with the dimension sets [service, priority, owner] and [service, priority]
    documents = published()
    [shared] = [d for d in documents if "priority" not in d]
    labelled = [d for d in documents if "priority" in d]
    assert _values(shared, "RunLatenessMs") == [100, 300, 7] and "priority" not in shared
    by_owner = {(d["priority"], d["owner"]): d for d in labelled}
    assert set(by_owner) == {("high", "big"), ("normal", OTHER_OWNERS)}
    assert _values(by_owner[("high", "big")], "RunLatenessMs") == [100, 300]
    assert _values(by_owner[("normal", OTHER_OWNERS)], "RunLatenessMs") == [7]
    for document in labelled:
        assert _dimensions(document) == [["owner", "priority", "service"], ["priority", "service"]]
        assert document["service"] == "jobsched"
    # and nothing is published twice
    flush_metrics()
    assert published() == []


def test_a_ticks_dispatch_lateness_goes_out_with_and_without_its_labels(published: Any) -> None:
    from jobsched.aws.metrics import PowertoolsTickMetrics
    from jobsched.domain.tick_records import TickResult

    result = TickResult(now=0, term=1, enqueued=2, dispatch_lateness_ms=[12, 40])
    result.labelled_lateness = [(LatenessLabels("low", "big"), 12), (LatenessLabels("low", OTHER_OWNERS), 40)]

    PowertoolsTickMetrics().record(result)

    documents = published()
    [shared] = [d for d in documents if "priority" not in d]
    labelled = [d for d in documents if "priority" in d]
    assert _values(shared, "DispatchLatenessMs") == [12, 40]
    assert {(d["owner"], tuple(_values(d, "DispatchLatenessMs"))) for d in labelled} == {
        ("big", (12,)),
        (OTHER_OWNERS, (40,)),
    }


def test_more_than_a_hundred_values_of_one_labels_all_go_out(published: Any) -> None:
    for ms in range(250):
        add_labelled("RunLatenessMs", "Milliseconds", ms, LatenessLabels("normal", "big"))
    add_metric(NAMES[0], "Count", 1)
    flush_metrics()

    values = [v for d in published() if d.get("owner") == "big" for v in _values(d, "RunLatenessMs")]
    assert sorted(values) == list(range(250))
