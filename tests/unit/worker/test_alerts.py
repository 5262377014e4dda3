"""The dead-run envelope and the alert a person reads."""

from __future__ import annotations

from jobsched.aws.alerts import alert_body, alert_subject
from jobsched.aws.wire import dead_run_envelope
from jobsched.ports.run_messages import DeadRun

T0 = 1_767_578_400_000


def _dead(**kwargs: object) -> DeadRun:
    fields: dict[str, object] = {
        "run_id": f"j_1@{T0}",
        "job_id": "j_1",
        "scheduled_for_ms": T0,
        "attempts": 4,
        "error": "HTTP 500 from POST https://billing.example/run: boom",
        "dead_at_ms": T0 + 420_000,
        "owner": "team-a",
        "job_name": "nightly-billing",
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "target_type": "http",
        "input": {"batch": 1},
    }
    fields.update(kwargs)
    return DeadRun(**fields)  # type: ignore[arg-type]


def test_the_envelope_is_the_run_envelope_plus_owner_name_and_error() -> None:
    assert dead_run_envelope(_dead()) == {
        "run_id": f"j_1@{T0}",
        "job_id": "j_1",
        "scheduled_for": "2026-01-05T02:00:00Z",
        "attempt": 4,
        "input": {"batch": 1},
        "owner": "team-a",
        "job_name": "nightly-billing",
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "target_type": "http",
        "error": "HTTP 500 from POST https://billing.example/run: boom",
        "dead_at": "2026-01-05T02:07:00Z",
    }


def test_the_subject_is_short_and_one_line() -> None:
    assert alert_subject(_dead()) == "jobsched: nightly-billing dead after 4 attempt(s)"
    long = alert_subject(_dead(job_name="x" * 128))
    assert len(long) == 100 and long.endswith("...")


def test_the_body_gives_job_schedule_scheduled_for_attempts_and_last_error() -> None:
    body = alert_body(_dead())
    assert body.splitlines()[0] == (
        'The run of job "nightly-billing" scheduled for 2026-01-05T02:00:00Z failed 4 time(s) and will not be retried.'
    )
    for line in (
        "job:           nightly-billing (j_1)",
        "owner:         team-a",
        "schedule:      0 2 * * * (Europe/Berlin)",
        "scheduled_for: 2026-01-05T02:00:00Z",
        "attempts:      4",
        f"run id:        j_1@{T0}",
        "HTTP 500 from POST https://billing.example/run: boom",
    ):
        assert line in body.splitlines()


def test_a_deleted_job_still_gets_a_readable_alert() -> None:
    dead = _dead(job_name=None, schedule=None, timezone=None, owner=None, target_type=None)
    assert "job:           (deleted job) (j_1)" in alert_body(dead)
    assert alert_subject(dead) == "jobsched: j_1 dead after 4 attempt(s)"
