"""The scheduler side's promises, each in the scenario that breaks it when its rule is missing, driven with the
product's classes on the in-memory fakes and a FakeClock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobsched.api.schemas import JobCreate, JobPatch
from jobsched.api.service import JobService
from jobsched.clock import from_ms, to_ms
from jobsched.dynamodb import layout
from jobsched.models import MissedPolicy, RunStatus
from jobsched.ports.jobs import DueQuery

MIN = 60_000


def service(harness: Any) -> JobService:
    return JobService(**harness.parts())


def create(harness: Any, schedule: str, **fields: Any) -> str:
    body = {"name": f"job-{harness.clock()}-{len(fields)}", "schedule": schedule, "command": "echo", **fields}
    return service(harness).create_job("team-a", JobCreate.model_validate(body)).job.id


def fires(harness: Any, job_id: str) -> list[int]:
    return [row["scheduled_for"] for row in harness.runs_of(job_id)]


def test_a_patch_between_the_ticks_read_and_its_move_is_not_undone(harness: Any) -> None:
    # Daily 10:00 -> every minute, PATCHed at 10:00 while the tick that runs the 10:00 fire is between its read
    # and its move. An unconditioned move would write tomorrow's 10:00 under the new schedule text.
    harness.clock.now_ms = harness.T0 - 30 * MIN
    job_id = create(harness, "0 10 * * *")
    a = harness.contender()
    harness.run_seconds(a, 1)
    patched: list[Any] = []

    def patch_once(*_: Any, **__: Any) -> None:
        if not patched:
            patched.append(service(harness).update_job("team-a", job_id, JobPatch(schedule="* * * * *")))

    a.recorder.after["send"] = patch_once
    harness.clock.now_ms = harness.T0 - 1000
    harness.run_seconds(a, 1)  # 10:00:00.005: sends the 10:00 run, the PATCH lands, then the move
    assert patched, "the tick did not send the 10:00 run"
    del a.recorder.after["send"]
    harness.run_seconds(a, 3 * 60)

    assert fires(harness, job_id) == [harness.T0 + k * MIN for k in range(4)]
    stored = harness.sched(job_id)
    assert stored["schedule"] == "* * * * *" and stored["next_run_at"] == harness.T0 + 4 * MIN


def test_a_tick_reading_a_lagging_due_index_runs_no_fire_of_the_replaced_schedule(harness: Any) -> None:
    # Index lag: every minute -> daily 10:00 at 10:00:30; the due index still shows the old entry at 10:01, so a
    # tick planning from the entry would run a 10:01 fire the new schedule does not have.
    harness.clock.now_ms = harness.T0 + 20_000
    job_id = create(harness, "* * * * *")
    before_patch = dict(harness.sched(job_id))
    harness.clock.now_ms = harness.T0 + 30_000
    service(harness).update_job("team-a", job_id, JobPatch(schedule="0 10 * * *"))
    assert harness.sched(job_id)["next_run_at"] == harness.T0 + 86_400_000

    real_query = harness.jobs.query_due

    class LaggingIndex:
        def __getattr__(self, name: str) -> Any:
            return getattr(harness.jobs, name)

        def query_due(self, query: DueQuery) -> Any:
            items, key = real_query(query)
            items = [i for i in items if i.job_id != job_id]
            here = layout.due_pk(*query.key) == before_patch["due_pk"]
            if here and before_patch["due_at"] <= query.up_to_ms:
                items.append(layout.due_entry_from_item(before_patch))  # the projection from before the PATCH
            return items, key

    a = harness.contender(jobs=LaggingIndex())
    harness.run_seconds(a, 45)  # to 10:01:15
    assert fires(harness, job_id) == []
    assert harness.sched(job_id)["next_run_at"] == harness.T0 + 86_400_000


def test_a_skipped_range_whose_first_fire_has_a_run_keeps_every_fire_in_the_history(harness: Any) -> None:
    # A leader sent the run of the first fire, then died before moving the job, and a worker's claim made the
    # run's row. The next leader, an hour later, skips the range: a summary row over that run would collide with
    # it and vanish.
    harness.clock.now_ms = harness.T0
    job_id = create(harness, "every 10 seconds", missed="skip")
    a = harness.contender()

    def crash(*_: Any, **__: Any) -> None:
        raise ConnectionError("leader died after sending the run")

    a.recorder.before["move"] = crash
    harness.run_seconds(a, 1)
    (message,) = harness.drain()
    assert harness.claim(job_id, message.scheduled_for).claimed
    first = harness.runs_of(job_id)
    assert [(r["scheduled_for"], r["status"]) for r in first] == [(harness.T0, "running")]

    harness.clock.now_ms = harness.T0 + 3600_000
    b = harness.contender("b")
    harness.run_seconds(b, 8)  # past a's lease

    rows = harness.runs_of(job_id)
    covered: set[int] = set()
    for row in rows:
        if row.get("skipped_count"):
            span = range(row["scheduled_for"], row["skipped_through"] + 1, 10_000)
            assert len(span) == row["skipped_count"]
            covered.update(span)
        else:
            covered.add(row["scheduled_for"])
    latest = max(covered)
    assert covered == set(range(harness.T0, latest + 1, 10_000))  # every fire has a row or a summary
    assert latest >= harness.clock() - 10_000
    # and the run the worker holds is kept as it is, not sent again
    assert [(r["scheduled_for"], r["status"]) for r in rows if r["scheduled_for"] == harness.T0] == [
        (harness.T0, "running")
    ]
    assert not any(m.scheduled_for == harness.T0 for m in harness.drain())


def test_a_one_off_accepted_a_little_late_runs_whatever_its_missed_policy(harness: Any) -> None:
    # "at" 30 s in the past is accepted (the registration grace); missed: skip with a 5 s grace, or catch_up with
    # a window of 0, must not record it skipped at the first tick.
    a = harness.contender()
    harness.run_seconds(a, 1)
    instant = harness.clock() - 30_000
    at = "at " + from_ms(instant).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    skip = create(harness, at, missed=MissedPolicy.SKIP.value, misfire_grace_s=5)
    window0 = create(harness, at, catch_up_window_s=0)
    harness.clock.now_ms += 1500
    harness.run_seconds(a, 1)
    for job_id in (skip, window0):
        (row,) = harness.runs_of(job_id)
        assert row["scheduled_for"] == instant and row["status"] == RunStatus.QUEUED.value


def test_a_one_off_at_a_sub_millisecond_instant_runs_once_and_leaves_the_index(harness: Any) -> None:
    # "at ...T10:00:30.0004Z" is stored rounded up: rounded down, next_fire would return the same fire again and
    # the job would never leave the due index (a put and a message every second, for one run).
    harness.clock.now_ms = harness.T0
    job_id = create(harness, "at 2026-03-02T10:00:30.0004Z")
    assert harness.sched(job_id)["next_run_at"] == harness.T0 + 30_001  # rounded up: never early
    a = harness.contender()
    results = harness.run_seconds(a, 40)
    assert fires(harness, job_id) == [harness.T0 + 30_001]
    assert "due_pk" not in harness.sched(job_id)
    assert sum(r.created + r.existing for r in results) == 1
    assert len(harness.drain()) == 1


def test_instants_are_whole_milliseconds_from_parsing_on() -> None:
    job = JobCreate.model_validate(
        {
            "name": "sub-ms",
            "schedule": "every 1 second",
            "command": "echo",
            "start_at": "2026-03-02T10:00:00.0004Z",
            "end_at": "2026-03-02T11:00:00.000001Z",
        }
    )
    assert job.start_at == datetime(2026, 3, 2, 10, 0, 0, 1000, tzinfo=UTC)
    assert job.end_at == datetime(2026, 3, 2, 11, 0, 0, 0, tzinfo=UTC)  # a last allowed instant rounds down
    assert to_ms(job.start_at) % 1000 == 1


def test_a_summary_saved_by_a_tick_whose_move_failed_is_not_counted_twice(harness: Any) -> None:
    # A skip-policy job 1 h behind: the tick saves one summary row for the missed range, then its move fails
    # (a throttle). The next tick plans the same range again; its summary put is refused by the first one and
    # the "split around existing rows" treats that summary as ONE fire, writing a second summary over the
    # fires the first one already covers.
    harness.clock.now_ms = harness.T0
    job_id = create(harness, "every 10 seconds", missed="skip")
    a = harness.contender()
    harness.clock.now_ms = harness.T0 + 3600_000
    failures: list[int] = []

    def throttled(*_: Any, **__: Any) -> None:
        if not failures:
            failures.append(1)
            raise ConnectionError("ProvisionedThroughputExceededException")

    a.recorder.before["move"] = throttled
    harness.run_seconds(a, 3)

    covered: list[int] = []
    for row in harness.runs_of(job_id):
        if row.get("skipped_count"):
            covered.extend(range(row["scheduled_for"], row["skipped_through"] + 1, 10_000))
        else:
            covered.append(row["scheduled_for"])
    assert len(covered) == len(set(covered)), f"{len(covered) - len(set(covered))} fires recorded twice"
