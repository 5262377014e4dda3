"""The cases of tests/unit/api/test_quotas.py on the DynamoDB stores (moto): quotas per owner, their refusals
naming the quota, and ``GET /limits``, with the usage kept in the job writes' transactions."""

from tests.unit.api.test_quotas import (
    test_a_change_that_does_not_raise_the_rate_passes_over_a_lowered_quota,
    test_a_create_over_the_jobs_quota_is_a_429_naming_jobs_with_the_owners_numbers,
    test_an_identical_repeat_of_a_create_at_the_jobs_quota_returns_the_existing_job,
    test_an_owners_entry_overrides_the_default_field_by_field,
    test_fires_per_minute_sums_the_schedules_long_run_rates_on_create_and_patch,
    test_get_limits_shows_no_limits_and_the_use_by_default,
    test_triggers_and_backfills_over_the_minute_quota_are_429_until_the_next_minute,
)

__all__ = [
    "test_a_change_that_does_not_raise_the_rate_passes_over_a_lowered_quota",
    "test_a_create_over_the_jobs_quota_is_a_429_naming_jobs_with_the_owners_numbers",
    "test_an_identical_repeat_of_a_create_at_the_jobs_quota_returns_the_existing_job",
    "test_an_owners_entry_overrides_the_default_field_by_field",
    "test_fires_per_minute_sums_the_schedules_long_run_rates_on_create_and_patch",
    "test_get_limits_shows_no_limits_and_the_use_by_default",
    "test_triggers_and_backfills_over_the_minute_quota_are_429_until_the_next_minute",
]
