"""An idle tick costs the same requests with 100 and with 5,000 jobs (design §4.1)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from jobsched.dynamodb.due_index import LAYOUT_KEY
from jobsched.ports.jobs import HIGH_LANES


def idle_tick(harness: Any, contender: Any, at: int) -> Counter[str]:
    counts = harness.count_requests()
    counts.clear()
    harness.clock.now_ms = at
    result = contender.step()
    assert result is not None and result.due == 0
    return Counter(counts)


def test_idle_tick_cost_does_not_grow_with_the_number_of_jobs(harness: Any) -> None:
    # Given a deployment whose due index is all timer items, and 100 jobs: half due later in the current
    # bucket, half tomorrow
    harness.aws.table(harness.settings.jobs_table).put_item(Item={**LAYOUT_KEY, "timers_only": True})
    harness.add_many(50, "at 2026-03-02T10:00:55Z")
    harness.add_many(50, "0 3 * * *")
    a = harness.contender()
    harness.clock.now_ms = harness.T0 + 20_000
    a.step()  # acquire the lease and load the watermark
    harness.clock.now_ms = harness.T0 + 30_000
    a.step()
    with_100 = idle_tick(harness, a, harness.T0 + 40_000)

    # When 4,900 more are added the same way
    harness.add_many(2450, "at 2026-03-02T10:00:55Z")
    harness.add_many(2450, "0 3 * * *")
    with_5000 = idle_tick(harness, a, harness.T0 + 50_000)

    # Then the idle tick makes the same requests: one query per lane (early, late) and shard of the current
    # bucket, one per high lane of the high shard, one renewal
    queries = 2 * harness.settings.due_shards + len(HIGH_LANES)
    assert with_100 == with_5000 == Counter({"Query": queries, "UpdateItem": 1})
