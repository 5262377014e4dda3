"""Local mode's lateness summary (the metrics' figures, design §8): the scheduler loop that local mode builds
(``SqliteComponents``) saves its partition's dispatch lateness to the SQLite CONTROL store once a minute, and the
API local mode serves reads it back for ``GET /health``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobsched.api.schemas import JobCreate
from jobsched.aws.clients import Aws
from jobsched.clock import FakeClock
from jobsched.local.components import SqliteComponents
from jobsched.settings import Settings
from jobsched.sqlite.database import SqliteDatabase

T0 = 1_767_578_400_000


@pytest.fixture
def components(aws: Aws, settings: Settings, tmp_path: Path) -> Iterator[SqliteComponents]:
    database = SqliteDatabase(tmp_path / "jobsched.sqlite3")
    try:
        yield SqliteComponents(settings, aws, clock=FakeClock(T0 - 30_000), database=database)
    finally:
        database.close()


def test_a_minute_of_ticks_saves_the_summary_get_health_shows(components: SqliteComponents) -> None:
    # Given a noisy owner's 120 jobs and a quiet owner's 2, every minute
    service = components.job_service()
    for owner, count in (("noisy", 120), ("local", 2)):
        for n in range(count):
            body = {"name": f"{owner}-{n}", "schedule": "* * * * *", "command": "echo"}
            service.create_job(owner, JobCreate.model_validate(body))
    clock = components.clock
    assert isinstance(clock, FakeClock)
    loop = components.scheduler_loop(0, holder="test")

    # When the scheduler ticks each second for a minute and a bit from just before T0 (the window begins at the
    # tick that sends the fires of T0 and closes at the one that sends those of T0 + 60 s)
    try:
        for second in range(62):
            clock.now_ms = T0 - 1_000 + second * 1_000 + 5
            loop.step()
    finally:
        loop.stop()

    # Then the quiet owner sees the noisy one ranked first by backlog, without its name, and its own runs among
    # the other owners'
    health = components.api().health.health("local")
    assert (health.partitions, health.reporting) == (1, 1)
    [top] = health.top_owners
    assert (top.rank, top.owner, top.you, top.backlog) == (1, None, False, 120)
    assert [(p.priority.value, p.runs) for p in top.by_priority] == [("normal", 240)]
    assert [(p.priority.value, p.runs) for p in health.other] == [("normal", 4)]
    assert [(p.priority.value, p.runs) for p in health.by_priority] == [("normal", 244)]
    assert health.since is not None and health.until is not None
    assert (health.until - health.since).total_seconds() >= 60
