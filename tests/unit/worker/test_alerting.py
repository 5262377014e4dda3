"""Alert policies (``domain.alerting``, design §5.6) on the in-memory fakes: late, skipped, dead-run streaks and
the automatic pause."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.aws.metrics import PowertoolsRunMetrics
from jobsched.clock import FakeClock, from_ms, to_ms
from jobsched.domain import registration
from jobsched.domain.alerting import SYSTEM_ACTOR, Alerting, dead_streak
from jobsched.domain.runs import new_run
from jobsched.memory.jobs import MemoryJobStore
from jobsched.memory.queue import MemoryAlerts
from jobsched.memory.runs import MemoryRunStore
from jobsched.models import AlertPolicy, CommandTarget, Job, JobEventKind, RunStatus
from jobsched.ports.jobs import Rewrite
from jobsched.ports.runs import ClaimRequest, RunKey
from tests.support.backends import memory_settings
from tests.support.worker import owner_sets_paused, resume_after_first_events_read

T0 = 1_772_445_600_000  # 2026-03-02T10:00:00Z
HOUR = 3_600_000


class Fixture:
    def __init__(self, **policy: Any) -> None:
        self.clock = FakeClock(T0)
        self.jobs, self.runs, self.sink = MemoryJobStore(), MemoryRunStore(), MemoryAlerts()
        self.job = Job(
            id="j_0000000000000000000a",
            name="ledger",
            owner="team-a",
            schedule="0 * * * *",
            target=CommandTarget(name="echo"),
            alerts=policy,
            created_at=from_ms(T0 - 10 * HOUR),
            updated_at=from_ms(T0 - 10 * HOUR),
        )
        self.jobs.create(
            self.job, registration.register(self.job, settings=memory_settings(), now_ms=T0 - 10 * HOUR)
        )
        self.alerting = Alerting(
            sink=self.sink, runs=self.runs, jobs=self.jobs, clock=self.clock, retention_days=90
        )

    def ended(self, hours_ago: int, status: RunStatus) -> None:
        row = new_run(self.job.id, T0 - hours_ago * HOUR, now_ms=T0, retention_days=90, status=status)
        assert self.runs.put_new(row) is None

    def kinds(self) -> list[str]:
        return [alert.kind for alert in self.sink.published]


def test_a_dead_streak_counts_dead_runs_from_the_newest_past_open_and_skipped_ones() -> None:
    f = Fixture()
    for hours_ago, status in [(0, RunStatus.QUEUED), (1, RunStatus.DEAD), (2, RunStatus.SKIPPED),
                              (3, RunStatus.DEAD), (4, RunStatus.SUCCEEDED), (5, RunStatus.DEAD)]:  # fmt: skip
        f.ended(hours_ago, status)

    assert dead_streak(f.runs.list_for_job(f.job.id, 10)[0]) == 2


def test_the_failures_alert_goes_once_when_the_streak_reaches_its_threshold() -> None:
    f = Fixture(after_consecutive_failures=2)
    sent = []
    for hours_ago in (3, 2, 1):
        f.ended(hours_ago, RunStatus.DEAD)
        f.alerting.dead(f.job, f"run-{hours_ago}")
        sent.append(f.kinds().count("failures"))

    assert sent == [0, 1, 1]
    alert = f.sink.published[0]
    assert (alert.owner, alert.job_id) == ("team-a", f.job.id)
    assert alert.subject == "jobsched: ledger: 2 dead runs in a row"


def test_the_job_pauses_itself_after_its_dead_streak_and_says_so_once() -> None:
    f = Fixture(pause_after_consecutive_dead=2)
    f.ended(2, RunStatus.DEAD)
    f.alerting.dead(f.job, "run-2")
    assert f.jobs.get(f.job.id).job.paused is False

    f.ended(1, RunStatus.DEAD)
    f.alerting.dead(f.job, "run-1")
    f.ended(0, RunStatus.DEAD)
    f.alerting.dead(f.job, "run-0")

    stored = f.jobs.get(f.job.id)
    assert stored.job.paused and stored.state is not None and stored.state.due is None
    assert (stored.job.paused_by, stored.job.paused_reason) == (
        SYSTEM_ACTOR,
        "paused by jobsched after 2 dead runs in a row",
    )
    assert f.kinds() == ["auto_paused"]
    (event,), _ = f.jobs.list_events(f.job.id, 1)
    assert (event.kind, event.actor, event.detail["dead_in_a_row"]) == (
        JobEventKind.AUTO_PAUSED,
        SYSTEM_ACTOR,
        2,
    )


def test_an_owner_who_turned_the_automatic_pause_off_meanwhile_is_not_paused() -> None:
    # the worker applies the policy of the job it loaded when the run began; the owner's edit since wins
    f = Fixture(pause_after_consecutive_dead=2)
    stored = f.jobs.get(f.job.id)
    assert stored.state is not None
    edited = f.job.model_copy(update={"alerts": AlertPolicy(), "updated_at": from_ms(T0 - HOUR)})
    f.jobs.replace(Rewrite(edited, stored.state, T0 - 10 * HOUR))
    f.ended(1, RunStatus.DEAD)
    f.ended(0, RunStatus.DEAD)

    f.alerting.dead(f.job, "run-0")

    assert f.jobs.get(f.job.id).job.paused is False
    assert f.kinds() == []


def test_a_success_ends_the_streak() -> None:
    f = Fixture(after_consecutive_failures=2, pause_after_consecutive_dead=2)
    f.ended(2, RunStatus.DEAD)
    f.ended(1, RunStatus.SUCCEEDED)
    f.ended(0, RunStatus.DEAD)

    f.alerting.dead(f.job, "run-0")

    assert f.kinds() == [] and f.jobs.get(f.job.id).job.paused is False


@pytest.mark.parametrize(("late_s", "alerted"), [(30, []), (31, ["late"])])
def test_a_late_start_is_alerted_past_the_policy(late_s: int, alerted: list[str]) -> None:
    f = Fixture(late_after_s=30)

    f.alerting.started(f.job, "run", T0, late_s * 1000)

    assert f.kinds() == alerted


def test_skipped_runs_are_alerted_only_when_asked() -> None:
    quiet, loud = Fixture(), Fixture(on_skipped=True)

    quiet.alerting.skipped(quiet.job, "run", "overlap")
    loud.alerting.skipped(loud.job, "run", "overlap")

    assert quiet.kinds() == [] and loud.kinds() == ["skipped"]
    assert "was skipped: overlap" in loud.sink.published[0].body


def test_an_alert_that_cannot_be_published_is_logged_and_not_raised() -> None:
    f = Fixture(late_after_s=1)

    def refuse(alert: Any) -> None:
        raise ConnectionError("SNS is down")

    f.sink.publish = refuse  # type: ignore[method-assign]
    f.alerting.started(f.job, "run", T0, 5_000)  # no exception

    assert f.sink.published == []


def test_a_policy_that_cannot_be_applied_leaves_the_run_dead_and_notified() -> None:
    from jobsched.domain.retries import Failures, Outcome
    from jobsched.memory.queue import MemoryDeadRuns, MemoryRunQueue
    from jobsched.ports.runs import Owned

    f = Fixture(after_consecutive_failures=1)
    f.ended(0, RunStatus.QUEUED)
    claim = f.runs.claim(
        ClaimRequest(RunKey(f.job.id, T0), worker="w", now_ms=T0, stale_before_ms=T0, retry_due_by_ms=T0)
    )
    assert claim.claimed

    def unreadable(job_id: str, limit: int) -> Any:
        raise ConnectionError("history unreadable")

    f.runs.list_for_job = unreadable  # type: ignore[method-assign]
    dead_runs = MemoryDeadRuns()
    failures = Failures(
        runs=f.runs, queue=MemoryRunQueue(), dead_runs=dead_runs, settings=memory_settings(), clock=f.clock,
        metrics=PowertoolsRunMetrics(),
        alerting=f.alerting,
    )  # fmt: skip

    outcome = failures.dead(Owned(f.job.id, T0, 1, "w"), f.job, "boom", attempts=1)

    assert outcome is Outcome.DEAD and len(dead_runs.notified) == 1
    assert f.runs.get(f.job.id, T0).status is RunStatus.DEAD and f.kinds() == []


def test_a_resume_starts_a_new_streak_so_the_next_dead_run_does_not_pause_the_job_again() -> None:
    # Given a job that paused itself after 2 dead runs, resumed by its owner an hour later
    f = Fixture(pause_after_consecutive_dead=2)
    f.ended(3, RunStatus.DEAD)
    f.ended(2, RunStatus.DEAD)
    f.alerting.dead(f.job, "run-2")
    assert f.jobs.get(f.job.id).job.paused
    stored = f.jobs.get(f.job.id)
    resumed = stored.job.model_copy(update={"paused": False, "updated_at": from_ms(T0)})
    assert stored.state is not None
    from dataclasses import replace as replace_state

    from jobsched.ports.jobs import AuditEvent

    event = AuditEvent(f.job.id, T0, "v-resume", JobEventKind.RESUMED, "ana", {})
    f.jobs.replace(
        Rewrite(resumed, replace_state(stored.state, paused=False), to_ms(stored.job.updated_at), event=event)
    )
    # When the first run after the resume dies
    row = new_run(f.job.id, T0 + HOUR, now_ms=T0 + HOUR, retention_days=90, status=RunStatus.DEAD)
    assert f.runs.put_new(replace_state(row, finished_at=T0 + HOUR)) is None
    f.alerting.dead(f.job, "run-after")
    # Then the job is not paused again: one dead run in the new streak is below its threshold of 2
    assert f.jobs.get(f.job.id).job.paused is False
    assert f.kinds() == ["auto_paused"]


def test_a_dead_run_far_below_the_thresholds_reads_no_audit_events() -> None:
    # Given a policy acting at 3 dead runs and a history with a single dead run
    f = Fixture(after_consecutive_failures=3, pause_after_consecutive_dead=5)
    f.ended(2, RunStatus.SUCCEEDED)
    f.ended(1, RunStatus.DEAD)
    reads = []
    list_events = f.jobs.list_events
    f.jobs.list_events = lambda *args, **kwargs: reads.append(args) or list_events(*args, **kwargs)  # type: ignore[method-assign]

    # When the dead run's policy is applied
    f.alerting.dead(f.job, "run-1")

    # Then no streak can reach a threshold, so the job's events (where a resume would be found) are not read
    assert reads == [] and f.kinds() == []


def test_an_owners_resume_between_the_streak_read_and_the_pause_is_not_undone() -> None:
    # Given a job its owner paused, whose two runs died while it was paused
    f = Fixture(pause_after_consecutive_dead=2)
    owner_sets_paused(f.jobs, f.job.id, paused=True, at_ms=T0 - 5 * HOUR)
    f.ended(2, RunStatus.DEAD)
    f.ended(1, RunStatus.DEAD)
    # and the owner's resume landing while the worker recording the second is between its streak read and pause
    landed = resume_after_first_events_read(f.jobs, f.job.id, at_ms=T0)

    f.alerting.dead(f.job, "run-2")

    # Then the job stays resumed: both dead runs ended before the resume, which starts a new streak
    assert landed == [T0]
    assert f.jobs.get(f.job.id).job.paused is False
    assert f.kinds() == []
