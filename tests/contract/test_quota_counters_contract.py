"""One contract for the quota counters (``ports.quotas.QuotaCounters``) on every job store: usage added in the
same write as a job's create, rewrite and delete (and not when that write is refused), and the fixed-window
counter of manual requests."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.clock import to_ms
from jobsched.domain.quotas import QuotaExceeded
from jobsched.dynamodb.jobs import JobStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.ports.errors import Conflict, NameTaken, NotFound
from jobsched.ports.jobs import Rewrite
from jobsched.ports.quotas import OwnerUsage, UsageChange
from jobsched.sqlite.jobs import SqliteJobStore

from .conftest import BACKENDS, adapter_on, on_table
from .test_job_store_contract import T0, job, state

WINDOW = 1_800_000_000_000


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    return adapter_on(request, MemoryJobStore, SqliteJobStore, on_table(JobStore, "jobs_table"))


def test_an_owner_without_jobs_has_no_usage(store: Any) -> None:
    assert store.usage("team-a") == OwnerUsage(0, 0)


def test_create_rewrite_and_delete_add_their_usage_to_the_owner_only(store: Any) -> None:
    first, second, other = job(1), job(2), job(3, owner="team-b")
    store.create(first, state(first), usage=UsageChange("team-a", 1, 1_000))
    store.create(second, state(second), usage=UsageChange("team-a", 1, 200))
    store.create(other, state(other), usage=UsageChange("team-b", 1, 7))
    assert store.usage("team-a") == OwnerUsage(2, 1_200)

    store.replace(Rewrite(first, state(first), to_ms(first.updated_at), usage=UsageChange("team-a", 0, -600)))
    assert store.usage("team-a") == OwnerUsage(2, 600)

    store.delete(second, deleted_at_ms=T0, retention_days=1, usage=UsageChange("team-a", -1, -200))
    assert store.usage("team-a") == OwnerUsage(1, 400)
    assert store.usage("team-b") == OwnerUsage(1, 7)


def test_a_refused_write_adds_no_usage(store: Any) -> None:
    first = job(1)
    store.create(first, state(first), usage=UsageChange("team-a", 1, 10))
    twin = job(2, name=first.name)
    with pytest.raises(NameTaken):
        store.create(twin, state(twin), usage=UsageChange("team-a", 1, 10))
    with pytest.raises(Conflict):
        store.replace(
            Rewrite(first, state(first), to_ms(first.updated_at) - 1, usage=UsageChange("team-a", 0, 5))
        )
    store.delete(first, deleted_at_ms=T0, retention_days=1, usage=UsageChange("team-a", -1, -10))
    with pytest.raises(NotFound):
        store.delete(first, deleted_at_ms=T0, retention_days=1, usage=UsageChange("team-a", -1, -10))
    assert store.usage("team-a") == OwnerUsage(0, 0)


def test_a_write_that_would_take_usage_over_the_limits_it_carries_is_refused_whole(store: Any) -> None:
    first, second, third = job(1), job(2), job(3)
    store.create(first, state(first), usage=UsageChange("team-a", 1, 1_500_000, limit_jobs=2))
    with pytest.raises(QuotaExceeded) as refused:  # another request took the last place since its check
        store.create(second, state(second), usage=UsageChange("team-a", 1, 0, limit_jobs=1))
    assert (refused.value.field, refused.value.limit, refused.value.use) == ("jobs", 1, 1)
    with pytest.raises(QuotaExceeded) as refused:
        store.create(second, state(second), usage=UsageChange("team-a", 1, 600_000, limit_fires_per_minute=2))
    assert (refused.value.field, refused.value.limit, refused.value.use) == ("fires_per_minute", 2, 1.5)
    assert store.job_id_by_name("team-a", second.name) is None
    assert store.usage("team-a") == OwnerUsage(1, 1_500_000)
    with pytest.raises(QuotaExceeded):
        store.replace(
            Rewrite(
                first,
                state(first),
                to_ms(first.updated_at),
                usage=UsageChange("team-a", 0, 600_000, limit_fires_per_minute=2),
            )
        )
    assert store.usage("team-a") == OwnerUsage(1, 1_500_000)

    store.create(
        second, state(second), usage=UsageChange("team-a", 1, 500_000, limit_jobs=2, limit_fires_per_minute=2)
    )
    store.create(third, state(third), usage=UsageChange("team-a", 1, 0))  # no limits carried: added as asked
    assert store.usage("team-a") == OwnerUsage(3, 2_000_000)


def test_a_window_counts_requests_up_to_its_limit_per_owner(store: Any) -> None:
    expires = WINDOW // 1000 + 120
    assert [store.count_request("team-a", WINDOW, 2, expires) for _ in range(3)] == [1, 2, None]
    assert store.requests_in("team-a", WINDOW) == 2
    assert store.count_request("team-b", WINDOW, 2, expires) == 1
    assert store.count_request("team-a", WINDOW + 60_000, 2, expires + 60) == 1
    assert store.requests_in("team-a", WINDOW + 120_000) == 0
