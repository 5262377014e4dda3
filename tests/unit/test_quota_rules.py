"""The pure rules of quotas per owner (``jobsched.domain.quotas``, design §4.11): an owner's limits from the
default and its entry, a schedule's long-run fire rate, the refusals, what a write adds to the usage, and the
recount's pass (``jobsched.domain.quota_recount``, on the in-memory store)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from jobsched.clock import FakeClock
from jobsched.domain import quota_recount
from jobsched.domain.quotas import (
    MICRO,
    RATE_WINDOW,
    RATE_WINDOW_MINUTES,
    QuotaExceeded,
    QuotaTable,
    check_fire_rate,
    check_jobs,
    count_change,
    fire_rate,
    request_refused,
    stored_count,
    window_of,
)
from jobsched.domain.registration import scheduling_state
from jobsched.memory.jobs import MemoryJobStore
from jobsched.ports.quotas import OwnerUsage, UsageChange
from jobsched.schedule.engine import ScheduleError, parse_schedule
from tests.support.worker import T0, new_job


def test_an_owners_entry_replaces_only_the_fields_it_gives() -> None:
    table = QuotaTable.model_validate(
        {
            "default": {"jobs": 10, "fires_per_minute": 5, "triggers_per_minute": 2},
            "owners": {"big": {"jobs": 1000, "fires_per_minute": None}},
        }
    )

    big, other = table.for_owner("big"), table.for_owner("other")

    assert (big.jobs, big.fires_per_minute, big.triggers_per_minute) == (1000, None, 2)
    assert (other.jobs, other.fires_per_minute, other.triggers_per_minute) == (10, 5, 2)
    assert QuotaTable().for_owner("anyone").jobs is None


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"default": {"jobs": -1}}, "default.jobs"),
        ({"default": {"runs": 1}}, "default.runs"),
        ({"owners": {"a": {"fires_per_minute": "fast"}}}, "owners.a.fires_per_minute"),
        ({"default": {"jobs": True}}, "default.jobs"),
        ({"owners": {"a": {"triggers_per_minute": 2.5}}}, "owners.a.triggers_per_minute"),
        ({"owners": {"a": {"jobs": "5"}}}, "owners.a.jobs"),
        ({"owners": {"a": {"fires_per_minute": False}}}, "owners.a.fires_per_minute"),
        ({"owners": {"a": {"fires_per_minute": "inf"}}}, "owners.a.fires_per_minute"),
        ({"owners": {"": {"jobs": 1}}}, "owners"),
        ({"owners": {" team-a": {"jobs": 1}}}, "owners"),
    ],
)
def test_a_bad_table_is_refused_naming_its_field(table: dict, named: str) -> None:
    with pytest.raises(ValidationError) as refused:
        QuotaTable.model_validate(table)

    assert [".".join(map(str, error["loc"])) for error in refused.value.errors()] == [named]


@pytest.mark.parametrize(
    ("schedule", "timezone", "per_minute"),
    [
        ("every 10 seconds", "UTC", 6.0),
        ("* * * * *", "UTC", 1.0),
        ("*/15 * * * * *", "Europe/Paris", 4.0),
        ("0 0 * * *", "UTC", 1 / 1440),
        ("0 2 * * *", "Europe/Berlin", 1 / 1440),  # the spring-forward day's 02:00 fires once at 03:00
        ("0 9 * * MON-FRI", "America/New_York", 260 / RATE_WINDOW_MINUTES),  # 2028: 52 weeks, a Sat, a Sun
        ("at 2027-06-01T00:00:00", "UTC", 0.0),
    ],
)
def test_a_schedules_fire_rate_is_its_long_run_average(
    schedule: str, timezone: str, per_minute: float
) -> None:
    rate = fire_rate(schedule, timezone)

    assert rate / MICRO == pytest.approx(per_minute, abs=1 / MICRO)
    assert rate >= per_minute * MICRO  # rounded up, never under


def test_a_cron_rate_is_its_fires_over_the_reference_year() -> None:
    schedule = parse_schedule("7,37 */3 1-20 * *", "Australia/Sydney")
    fires = len(schedule.fires(RATE_WINDOW[0], RATE_WINDOW[1], 100_000))

    assert fire_rate("7,37 */3 1-20 * *", "Australia/Sydney") == -(-fires * MICRO // int(RATE_WINDOW_MINUTES))


@pytest.mark.parametrize(
    ("schedule", "every_year"),
    [
        ("cron(* * * * ? 2027)", "* * * * *"),
        ("CRON( 0/5 * * * ? 2026-2027 )", "*/5 * * * *"),
        ("cron(0 9 ? * MON-FRI 2030)", "cron(0 9 ? * MON-FRI *)"),
    ],
)
def test_a_cron_limited_to_years_outside_the_reference_year_counts_its_rate_in_the_years_it_fires(
    schedule: str, every_year: str
) -> None:
    assert fire_rate(schedule, "UTC") == fire_rate(every_year, "UTC") > 0


def test_a_schedule_that_does_not_parse_raises() -> None:
    with pytest.raises(ScheduleError):
        fire_rate("every never", "UTC")


def test_counts_over_the_limit_are_refused_with_the_numbers() -> None:
    quota = QuotaTable.model_validate({"default": {"jobs": 2, "fires_per_minute": 1}}).for_owner("a")

    check_jobs("a", quota, 1, 1)
    with pytest.raises(QuotaExceeded) as refused:
        check_jobs("a", quota, 2, 1)
    assert (refused.value.field, refused.value.limit, refused.value.use, refused.value.wanted) == (
        "jobs",
        2,
        2,
        3,
    )
    assert not refused.value.rate
    check_fire_rate("a", quota, 400_000, 600_000)
    with pytest.raises(QuotaExceeded) as over:
        check_fire_rate("a", quota, 400_000, 600_001)
    assert over.value.field == "fires_per_minute" and "limit 1" in over.value.message


def test_a_change_that_adds_nothing_passes_an_owner_already_over() -> None:
    quota = QuotaTable.model_validate({"default": {"jobs": 0, "fires_per_minute": 0}}).for_owner("a")

    check_jobs("a", quota, 5, 0)
    check_fire_rate("a", quota, 9_000_000, 0)
    check_fire_rate("a", quota, 9_000_000, -1_000_000)


def test_a_refused_request_waits_for_the_next_minute() -> None:
    now_ms = 1_800_000_012_345  # 12.345 s into its minute
    refused = request_refused("a", 3, now_ms)

    assert window_of(now_ms) == 1_800_000_000_000
    assert refused.rate and refused.field == "triggers_per_minute" and refused.retry_after_s == 48


def test_a_count_change_is_the_new_count_minus_the_old() -> None:
    assert count_change("a", None, 7) == UsageChange(
        "a", 1, 7
    )  # a create, or the recount of an uncounted job
    assert count_change("a", 7, 3) == UsageChange("a", 0, -4)  # a re-timing edit
    assert count_change("a", 7, None) == UsageChange("a", -1, -7)  # a delete
    assert count_change("a", None, None).empty  # the delete of a job never counted takes nothing


def test_the_recount_computes_a_rate_once_per_schedule_and_zone_in_a_pass(monkeypatch, settings) -> None:
    store = MemoryJobStore()
    numbers = iter(range(5))

    def make(**fields: str) -> None:  # written without usage, as a version without quotas wrote jobs
        job = new_job(FakeClock(T0), next(numbers), **fields)
        store.create(
            job,
            scheduling_state(
                job, anchor_at_ms=T0, next_run_at_ms=T0, partition=0, settings=settings, now_ms=T0
            ),
        )

    computed: list[tuple[str | None, str]] = []

    def rate_of(schedule: str | None, timezone: str) -> int:
        computed.append((schedule, timezone))
        return 5

    monkeypatch.setattr(quota_recount, "job_fire_rate", rate_of)
    for _ in range(4):
        make(schedule="0 2 * * *")
    make(schedule="0 2 * * *", timezone="Europe/Paris")

    done = quota_recount.recount_pass(store, now_ms=0, settle_ms=0, seconds=60)

    assert (done.counted, done.done) == (5, True)
    assert sorted(computed, key=str) == [("0 2 * * *", "Europe/Paris"), ("0 2 * * *", "UTC")]
    assert store.usage("team-a") == OwnerUsage(5, 25)


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (12, 12),
        (0, 0),
        (Decimal("12"), 12),
        (None, None),
        ("12", None),
        (12.0, None),
        (Decimal("1.5"), None),
        (Decimal("NaN"), None),
        (-1, None),
        (Decimal("-1"), None),
        (True, None),
    ],
)
def test_a_stored_count_is_a_whole_number_of_at_least_0_and_anything_else_is_no_count(
    value: object, count: int | None
) -> None:
    assert stored_count(value) == count
