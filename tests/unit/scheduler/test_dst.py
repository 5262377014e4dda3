"""A daily Europe/Berlin job over the spring-forward and fall-back days: exactly one run per local day."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jobsched.clock import from_ms, to_ms

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("first_day", "days", "expected_local"),
    [
        # 2026-03-29 02:00 does not exist (clocks jump 02:00 -> 03:00): that day's run is at 03:00 CEST
        ("2026-03-27", 5, ["02:00+01:00", "02:00+01:00", "03:00+02:00", "02:00+02:00", "02:00+02:00"]),
        # 2026-10-25 02:00 happens twice (03:00 CEST -> 02:00 CET): the run is on the first pass only
        ("2026-10-23", 5, ["02:00+02:00", "02:00+02:00", "02:00+02:00", "02:00+01:00", "02:00+01:00"]),
    ],
    ids=["spring-forward", "fall-back"],
)
def test_daily_berlin_job_runs_exactly_once_per_day(
    harness: Any, first_day: str, days: int, expected_local: list[str]
) -> None:
    # Given the job registered at local midnight of the first day; one-hour buckets, one shard, a lease that
    # outlives the (sparse, every 30 simulated minutes) steps
    harness.settings = harness.settings.model_copy(
        update={"due_bucket_s": 3600, "due_shards": 1, "lease_ttl_s": 7200}
    )
    start = to_ms(datetime.fromisoformat(first_day).replace(tzinfo=BERLIN))
    harness.clock.now_ms = start
    job = harness.add("0 2 * * *", timezone="Europe/Berlin")
    a = harness.contender()

    # When the scheduler steps every 30 minutes for five days
    end = start + days * 86400_000
    while harness.clock() < end:
        harness.clock.advance(30 * 60_000)
        a.step()

    # Then there is exactly one run per local day, at the ISC-cron instant of that day
    fires = [from_ms(r["scheduled_for"]).astimezone(BERLIN) for r in harness.runs_of(job.id)]
    assert len({f.date() for f in fires}) == len(fires) == days
    assert [f.strftime("%H:%M%z")[:-2] + ":" + f.strftime("%z")[-2:] for f in fires] == expected_local
