"""Out of attempts on moto: one dead-letter message, one alert to the owner's filtered subscription only, with
the owner in the message attributes. The failure paths around them (the sweeper finishes what the worker could
not) run on the fakes: tests/unit/worker/test_dead_runs.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobsched.aws.clients import Aws
from jobsched.domain.retries import Outcome
from jobsched.domain.runs import rerun_request
from jobsched.dynamodb.jobs import JobStore
from jobsched.dynamodb.runs import RunStore
from jobsched.models import RunKind, RunStatus
from jobsched.ports.runs import RunKey, run_id
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings
from tests.support.worker import Kit, owner_sets_paused, resume_after_first_events_read

from .conftest import T0


def _subscribe(aws: Aws, settings: Settings, owner: str, queue_name: str | None = None) -> str:
    """An SQS queue subscribed to the alerts topic with a filter policy on ``owner``."""
    url = aws.sqs.create_queue(QueueName=queue_name or f"alerts-{owner}")["QueueUrl"]
    arn = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws.sns.subscribe(
        TopicArn=settings.alerts_topic_arn,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"FilterPolicy": json.dumps({"owner": [owner]})},
    )
    return url


def test_the_last_failure_sends_one_dead_letter_and_one_alert_to_the_owner_only(kit: Kit) -> None:
    # Given team-a and team-b each subscribed to alerts with a filter on their owner
    team_a = _subscribe(kit.aws, kit.settings, "team-a")
    team_b = _subscribe(kit.aws, kit.settings, "team-b")
    job = kit.make_job(
        owner="team-a",
        name="nightly-billing",
        command="fail",
        input={"batch": 7},
        retry={"max_attempts": 2, "backoff_s": 10},
    )
    kit.make_run(job)
    # When both attempts fail
    assert kit.deliver(job) == Outcome.RETRYING
    kit.clock.advance(10_000)
    assert kit.deliver(job) == Outcome.DEAD
    # Then the run is dead after 2 attempts, out of the sweep index
    row = kit.runs.get(job.id, T0)
    assert row is not None
    assert row.status == RunStatus.DEAD and row.attempt == 2 and row.finished_at == kit.clock()
    assert "attempt 2 failed on purpose" in row.error
    assert row.sweep_at is None and not row.notify_pending
    # exactly one dead-letter message: the envelope plus owner, job name and error
    dead_letters = kit.drain(kit.settings.dead_run_queue_url)
    assert len(dead_letters) == 1
    body = json.loads(dead_letters[0]["Body"])
    assert body["run_id"] == run_id(job.id, T0)
    assert body["job_id"] == job.id and body["attempt"] == 2 and body["input"] == {"batch": 7}
    assert body["scheduled_for"] == "2026-01-05T02:00:00Z"
    assert body["owner"] == "team-a" and body["job_name"] == "nightly-billing"
    assert "failed on purpose" in body["error"]
    # exactly one alert, to team-a's subscription, with owner/job_id attributes and a readable body
    alerts = kit.drain(team_a)
    assert len(alerts) == 1
    note = json.loads(alerts[0]["Body"])
    assert note["MessageAttributes"]["owner"]["Value"] == "team-a"
    assert note["MessageAttributes"]["job_id"]["Value"] == job.id
    assert note["MessageAttributes"]["kind"]["Value"] == "dead"
    assert note["Subject"] == "jobsched: nightly-billing dead after 2 attempt(s)"
    for fact in (
        "nightly-billing",
        job.id,
        "0 2 * * * (UTC)",
        "2026-01-05T02:00:00Z",
        "attempts:      2",
        "failed on purpose",
    ):
        assert fact in note["Message"]
    assert kit.drain(team_b) == []


@pytest.mark.parametrize("owner", ["team-a", "arn:aws:iam::123456789012:role/billing"])
def test_alert_attributes_carry_any_owner(kit: Kit, owner: str) -> None:
    queue = _subscribe(kit.aws, kit.settings, owner, queue_name="owner-alerts")
    job = kit.due_job(owner=owner, command="fail", retry={"max_attempts": 1})
    assert kit.deliver(job) == Outcome.DEAD
    assert len(kit.drain(queue)) == 1


def test_a_job_with_on_dead_off_sends_its_dead_letter_but_no_alert(kit: Kit) -> None:
    queue = _subscribe(kit.aws, kit.settings, "team-a")
    job = kit.due_job(owner="team-a", command="fail", retry={"max_attempts": 1}, alerts={"on_dead": False})

    assert kit.deliver(job) == Outcome.DEAD

    assert len(kit.drain(kit.settings.dead_run_queue_url)) == 1
    assert kit.drain(queue) == []


def test_policy_alerts_reach_the_topic_with_their_kind_and_the_job_pauses_itself(kit: Kit) -> None:
    # Given a job that alerts when a run starts over 1 s late and pauses after one dead run
    queue = _subscribe(kit.aws, kit.settings, "team-a")
    policy = {"late_after_s": 1, "pause_after_consecutive_dead": 1, "on_dead": False}
    job = kit.make_job(owner="team-a", command="fail", retry={"max_attempts": 1}, alerts=policy)
    kit.make_run(job)
    kit.clock.advance(5_000)
    # When its run starts late and dies
    assert kit.deliver(job) == Outcome.DEAD
    # Then the owner hears "late", then "auto_paused", and the job is paused by jobsched
    notes = [json.loads(m["Body"]) for m in kit.drain(queue)]
    assert [n["MessageAttributes"]["kind"]["Value"] for n in notes] == ["late", "auto_paused"]
    assert all(n["MessageAttributes"]["owner"]["Value"] == "team-a" for n in notes)
    stored = JobStore(kit.aws.table(kit.settings.jobs_table)).get(job.id)
    assert stored.job.paused and stored.job.paused_by == "jobsched"


def test_a_backfill_run_is_not_alerted_late(kit: Kit) -> None:
    # Given a job that alerts past 1 s late, and a run its owner backfilled a day after its time
    queue = _subscribe(kit.aws, kit.settings, "team-a")
    job = kit.make_job(owner="team-a", command="echo", alerts={"late_after_s": 1})
    kit.make_run(job, kind=RunKind.BACKFILL)
    kit.clock.advance(86_400_000)
    # When it runs
    assert kit.deliver(job) == Outcome.SUCCEEDED
    # Then no "late" alert: a backfill runs past fires on purpose (a window of 1,000 would send 1,000)
    assert kit.drain(queue) == []


def test_a_skipped_run_its_owner_re_runs_is_not_alerted_late(kit: Kit) -> None:
    # Given a job that alerts past 1 s late, and a skipped run its owner re-runs (POST .../retry) a day later
    queue = _subscribe(kit.aws, kit.settings, "team-a")
    job = kit.make_job(owner="team-a", command="echo", alerts={"late_after_s": 1})
    kit.make_run(job, status=RunStatus.SKIPPED)
    kit.clock.advance(86_400_000)
    assert kit.runs.rerun(
        rerun_request(
            RunKey(job.id, T0), now_ms=kit.clock(), sweep_at_ms=kit.clock() + 60_000, retention_days=90
        )
    ).done
    # When it runs
    assert kit.deliver(job) == Outcome.SUCCEEDED
    # Then no "late" alert: it starts when its owner asked
    assert kit.drain(queue) == []


def test_a_jobs_history_is_read_consistently(kit: Kit, runs: RunStore) -> None:
    # A dead-run streak (domain.alerting) is counted from the job's history just after the run's own write:
    # read eventually consistent, two runs of one job dying at once could each miss the other's write and
    # neither send the ``failures`` alert.
    queries: list[dict[str, Any]] = []
    client = kit.aws.dynamodb_resource.meta.client
    client.meta.events.register(
        "before-parameter-build.dynamodb.Query", lambda params, **_: queries.append(params)
    )

    runs.list_for_job("j_0000000000000000000a", 10)

    assert [query.get("ConsistentRead") for query in queries] == [True]


def test_an_owners_resume_between_the_streak_read_and_the_pause_is_not_undone(kit: Kit) -> None:
    # Given a job its owner paused, whose two runs died while it was paused
    job = kit.make_job(owner="team-a", command="fail", alerts={"pause_after_consecutive_dead": 2})
    owner_sets_paused(kit.jobs, job.id, paused=True, at_ms=kit.clock() - 3_600_000)
    for scheduled_for in (T0 - 7_200_000, T0 - 3_600_000):
        kit.make_run(job, scheduled_for, status=RunStatus.DEAD)
    alerting = Components(kit.settings, kit.aws, clock=kit.clock).alerting()
    # and the owner's resume landing while the worker recording the second is between its streak read and pause
    landed = resume_after_first_events_read(alerting.jobs, job.id, at_ms=kit.clock())

    alerting.dead(job, run_id(job.id, T0 - 3_600_000))

    # Then the job stays resumed: both dead runs ended before the resume, which starts a new streak
    assert landed == [kit.clock()]
    assert kit.jobs.get(job.id).job.paused is False
