"""One contract for the recount of jobs written without quota usage (``ports.quotas.QuotaRecount``, design §4.11)
on every job store: each job counts in its owner's usage exactly once, whether the recount runs once, twice,
from a lost progress, or beside an edit or a delete of the job; an edit or a delete read before a count lands
never undoes it; a delete takes away only what the job was counted with."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.clock import from_ms, to_ms
from jobsched.domain.quota_recount import RecountPass, recount_pass
from jobsched.domain.quotas import count_change, job_fire_rate
from jobsched.dynamodb.jobs import JobStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.models import Job
from jobsched.ports.errors import Conflict
from jobsched.ports.jobs import Rewrite
from jobsched.ports.quotas import OwnerUsage, RecountProgress
from jobsched.sqlite.jobs import SqliteJobStore

from .conftest import BACKENDS, adapter_on, on_table
from .test_job_store_contract import T0, job, state

RATE = job_fire_rate(job(1).schedule, job(1).timezone)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    return adapter_on(request, MemoryJobStore, SqliteJobStore, on_table(JobStore, "jobs_table"))


def _counted(store: Any, made: Job) -> Job:
    """``made`` created as this version creates a job: counted with its rate, in the create's write."""
    marked = made.model_copy(update={"quota_rate": RATE})
    store.create(marked, state(marked), usage=count_change(made.owner, None, RATE))
    return marked


def _uncounted(store: Any, made: Job) -> Job:
    """``made`` created as a version without quotas wrote it: no usage, no count on the job."""
    store.create(made, state(made))
    return made


def _edited(read: Job, rate: int | None) -> Rewrite:
    """An edit of the job as ``read`` (a millisecond later) that counts it with ``rate``, as the API makes it."""
    changed = read.model_copy(update={"updated_at": from_ms(to_ms(read.updated_at) + 1), "quota_rate": rate})
    usage = count_change(read.owner, read.quota_rate, rate) if rate != read.quota_rate else None
    return Rewrite(
        changed, state(changed), to_ms(read.updated_at), usage=usage, expected_quota_rate=read.quota_rate
    )


def test_jobs_written_without_usage_are_counted_once_however_often_the_recount_runs(store: Any) -> None:
    _counted(store, job(1))
    _uncounted(store, job(2))
    _uncounted(store, job(3))
    _uncounted(store, job(4, owner="team-b"))
    assert store.usage("team-a") == OwnerUsage(1, RATE)

    first = recount_pass(store, now_ms=T0, settle_ms=0, seconds=60)
    again = recount_pass(store, now_ms=T0, settle_ms=0, seconds=60)
    store.save_recount_progress(RecountProgress())  # a lost progress: the whole store read again
    lost = recount_pass(store, now_ms=T0, settle_ms=0, seconds=60)

    assert (first.counted, first.done) == (3, True)
    assert (again.counted, lost.counted, lost.done) == (0, 0, True)
    assert store.usage("team-a") == OwnerUsage(3, 3 * RATE)
    assert store.usage("team-b") == OwnerUsage(1, RATE)
    assert store.get(job(2).id).job.quota_rate == RATE


def test_the_recount_goes_on_from_its_saved_progress_pass_after_pass(store: Any) -> None:
    for number in range(1, 8):
        _uncounted(store, job(number))

    passes = [
        recount_pass(store, now_ms=T0, settle_ms=0, seconds=60, budget=2, page_size=2) for _ in range(5)
    ]

    assert [each.done for each in passes] == [False, False, False, True, True]
    assert sum(each.counted for each in passes) == 7
    assert store.usage("team-a") == OwnerUsage(7, 7 * RATE)


def test_deleting_a_job_never_counted_takes_nothing_from_the_usage(store: Any) -> None:
    counted, old = _counted(store, job(1)), _uncounted(store, job(2))

    store.delete(old, deleted_at_ms=T0, retention_days=1, usage=None)
    assert store.usage("team-a") == OwnerUsage(1, RATE)
    store.delete(counted, deleted_at_ms=T0, retention_days=1, usage=count_change("team-a", RATE, None))
    assert store.usage("team-a") == OwnerUsage(0, 0)


def test_an_edit_or_a_delete_read_before_the_recount_counted_the_job_is_refused(store: Any) -> None:
    read = _uncounted(store, job(1))
    assert recount_pass(store, now_ms=T0, settle_ms=0, seconds=60).counted == 1

    with pytest.raises(Conflict):  # it would count the job a second time
        store.replace(_edited(read, RATE))
    with pytest.raises(Conflict):  # it would leave the job's count in the usage
        store.delete(read, deleted_at_ms=T0, retention_days=1, usage=None)

    again = store.get(read.id).job
    store.delete(
        again, deleted_at_ms=T0, retention_days=1, usage=count_change("team-a", again.quota_rate, None)
    )
    assert store.usage("team-a") == OwnerUsage(0, 0)


def test_a_count_read_before_an_edit_or_a_delete_does_not_land(store: Any) -> None:
    edited, deleted = _uncounted(store, job(1)), _uncounted(store, job(2))
    page, _ = store.uncounted_jobs(None, 10)
    assert sorted(found.id for found in page) == sorted([edited.id, deleted.id])

    store.replace(_edited(edited, RATE))  # the edit counts the job whole
    store.delete(deleted, deleted_at_ms=T0, retention_days=1, usage=None)

    assert [store.count_job(found, RATE) for found in page] == [False, False]
    assert store.usage("team-a") == OwnerUsage(1, RATE)


class _RacingStore:
    """``store`` with ``race`` run after each page of uncounted jobs is read, before any of them is counted."""

    def __init__(self, store: Any, race: Any) -> None:
        self.store, self.race = store, race

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def uncounted_jobs(self, cursor: str | None, limit: int) -> tuple[list[Job], str | None]:
        page = self.store.uncounted_jobs(cursor, limit)
        self.race()
        self.race = lambda: None
        return page


def test_a_recount_beside_an_edit_and_a_delete_counts_each_job_once(store: Any) -> None:
    edited, deleted, kept = _uncounted(store, job(1)), _uncounted(store, job(2)), _uncounted(store, job(3))

    def race() -> None:
        store.replace(_edited(edited, RATE))
        store.delete(deleted, deleted_at_ms=T0, retention_days=1, usage=None)

    done = recount_pass(_RacingStore(store, race), now_ms=T0, settle_ms=0, seconds=60)

    assert (done.counted, done.changed, done.done) == (1, 2, True)  # a second round found nothing left
    assert store.usage("team-a") == OwnerUsage(2, 2 * RATE)
    assert store.get(kept.id).job.quota_rate == RATE


@pytest.fixture(params=["dynamodb", "sqlite"])
def stored(request: pytest.FixtureRequest) -> Any:
    """A job store that keeps its jobs as data (so may hold a count this code cannot read)."""
    return adapter_on(request, MemoryJobStore, SqliteJobStore, on_table(JobStore, "jobs_table"))


def _spoiled(store: Any, made: Job, value: Any) -> Job:
    """``made`` created uncounted, then its stored count set to ``value`` (not a count: bad data)."""
    _uncounted(store, made)
    if isinstance(store, JobStore):
        store.table.update_item(
            Key={"pk": f"job#{made.id}", "sk": "spec"},
            UpdateExpression="SET quota_rate = :value",
            ExpressionAttributeValues={":value": value},
        )
    else:
        with store.db.write() as conn:
            conn.execute(
                "UPDATE jobs SET spec = json_set(spec, '$.quota_rate', ?) WHERE job_id = ?", (value, made.id)
            )
    return made


@pytest.mark.parametrize("value", ["many", "12"])
def test_a_stored_count_that_is_not_a_number_is_read_as_not_counted(stored: Any, value: str) -> None:
    # Given jobs whose stored count is not a number
    counted, edited, deleted = (_spoiled(stored, job(n), value) for n in (1, 2, 3))

    # Then each is readable (the worker runs it) as a job never counted
    assert stored.get(counted.id).job.quota_rate is None
    assert stored.get_spec(counted.id).quota_rate is None
    # an edit counts it whole and a delete takes nothing away, each on the first try
    stored.replace(_edited(stored.get(edited.id).job, RATE))
    stored.delete(stored.get(deleted.id).job, deleted_at_ms=T0, retention_days=1, usage=None)
    assert stored.usage("team-a") == OwnerUsage(1, RATE)
    # and the recount counts the one left, once
    assert recount_pass(stored, now_ms=T0, settle_ms=0, seconds=60) == RecountPass(
        counted=1, changed=0, done=True
    )
    assert stored.usage("team-a") == OwnerUsage(2, 2 * RATE)
    assert stored.get(counted.id).job.quota_rate == RATE


def test_the_recount_is_done_only_by_a_clean_round_begun_once_the_deploy_settled(store: Any) -> None:
    # Given a job written without usage, counted by the recount's first round
    _uncounted(store, job(1))
    first = recount_pass(store, now_ms=T0, settle_ms=60_000, seconds=60)
    # When an API of the version without quotas, still serving, writes another job during the deploy
    _uncounted(store, job(2))
    during = recount_pass(store, now_ms=T0 + 30_000, settle_ms=60_000, seconds=60)
    settled = recount_pass(store, now_ms=T0 + 60_000, settle_ms=60_000, seconds=60)

    # Then the recount is not done until a clean round begun after the settle time, which counted it too
    assert (first.counted, first.done) == (1, False)
    assert (during.counted, during.done) == (1, False)
    assert (settled.counted, settled.done) == (0, True)
    assert store.usage("team-a") == OwnerUsage(2, 2 * RATE)
    assert store.recount_progress().done is True
