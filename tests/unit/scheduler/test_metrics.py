"""The tick metrics go out through Powertools as one EMF document per tick."""

from __future__ import annotations

import json
from typing import Any

from jobsched.aws.metrics import PowertoolsTickMetrics
from jobsched.domain.tick_records import TickResult
from jobsched.observability import MetricName


def test_each_tick_publishes_enqueued_lag_skipped_and_lateness(capsys: Any) -> None:
    result = TickResult(now=0, term=1, enqueued=3, skipped=2, lag_ms=1500, dispatch_lateness_ms=[5, 7, 900])
    PowertoolsTickMetrics().record(result)
    PowertoolsTickMetrics().record(TickResult(now=1000, term=1))
    first, second = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert first[MetricName.RUNS_ENQUEUED] in (3, [3])
    assert first[MetricName.RUNS_SKIPPED] in (2, [2])
    assert first[MetricName.SCHEDULER_LAG] in (1500, [1500])
    assert first[MetricName.DISPATCH_LATENESS] == [5, 7, 900]
    units = {m["Name"]: m["Unit"] for m in first["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert (
        units[MetricName.DISPATCH_LATENESS] == "Milliseconds" and units[MetricName.RUNS_ENQUEUED] == "Count"
    )
    # An idle tick still reports enqueued=0 and lag=0 (so alarms see data), without skipped or lateness
    assert second[MetricName.RUNS_ENQUEUED] in (0, [0]) and second[MetricName.SCHEDULER_LAG] in (0, [0])
    assert MetricName.RUNS_SKIPPED not in second and MetricName.DISPATCH_LATENESS not in second
