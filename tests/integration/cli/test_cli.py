"""The CLI against the real API handler (through its WSGI app): tables, --json, and one-line errors."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from jobsched.cli import register
from jobsched.client import ApiError
from jobsched.domain.runs import new_run
from jobsched.dynamodb.jobs import JobStore
from jobsched.dynamodb.runs import RunStore
from jobsched.exits import FAILED, USAGE_ERROR, fail
from jobsched.models import RunStatus
from jobsched.ports.tries import TryRecord

DATA = Path(__file__).parent / "data"


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


def test_create_get_list_update_pause_resume_delete(cli: Any) -> None:
    # Given a job created with flags
    created = cli.json(
        "jobs", "create", "--name", "nightly", "--schedule", "0 2 * * *", "--tz", "Europe/Berlin",
        "--command", "echo", "--input-json", '{"day": "today"}', "--retries", "3", "--jitter", "30",
    )  # fmt: skip
    assert created["name"] == "nightly"
    assert created["timezone"] == "Europe/Berlin"
    assert created["target"] == {"type": "command", "name": "echo"}
    assert created["input"] == {"day": "today"}
    assert created["retry"]["max_attempts"] == 3
    job_id = created["id"]

    # Then it can be read by id or by name, as JSON or as a table
    assert cli.json("jobs", "get", job_id)["id"] == job_id
    assert cli.json("jobs", "get", "nightly")["id"] == job_id
    table = cli("jobs", "list")
    assert table.exit_code == 0
    assert "nightly" in table.stdout and "0 2 * * *" in table.stdout and "command: echo" in table.stdout
    assert [j["id"] for j in cli.json("jobs", "list")] == [job_id]

    # When it is changed, paused and resumed
    assert cli.json("jobs", "update", "nightly", "--schedule", "30 3 * * *")["schedule"] == "30 3 * * *"
    assert cli.json("jobs", "pause", job_id)["paused"] is True
    paused = cli("jobs", "list")
    assert "paused" in paused.stdout
    resumed = cli("jobs", "resume", "nightly")
    assert resumed.exit_code == 0 and resumed.stdout.startswith(f"resumed {job_id}")

    # Then delete removes it, and reading it again is one error line with exit 1
    deleted = cli("jobs", "delete", "nightly")
    assert deleted.exit_code == 0 and deleted.stdout.strip() == f"deleted {job_id}"
    missing = cli("jobs", "get", job_id)
    assert missing.exit_code == 1
    assert one_line(missing.stderr).startswith("error: 404 ")
    assert missing.stdout == ""


def test_create_again_is_unchanged_and_file_with_flag_overrides(cli: Any, tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps({"name": "sync", "schedule": "every 5 minutes", "command": "echo", "input": [1, 2]})
    )

    first = cli("jobs", "create", "--file", str(spec))
    again = cli("jobs", "create", "--file", str(spec))

    assert first.exit_code == 0 and "created" in first.stderr
    assert again.exit_code == 0 and "unchanged" in again.stderr
    # a flag overrides the file: a different spec under the same name is a conflict (409)
    conflict = cli("jobs", "create", "--file", str(spec), "--shell", "echo hi")
    assert conflict.exit_code == 1
    assert one_line(conflict.stderr).startswith("error: 409 ")


def spec_flags(tz: str, url: str, n: int, start: str, end: str) -> tuple[str, ...]:
    """Every job-spec flag of ``jobs create``/``jobs update``, with values derived from the arguments."""
    return (
        "--schedule", f"every {n} minutes", "--tz", tz, "--url", url, "--input-json", f'{{"n": {n}}}',
        "--retries", str(n), "--backoff", str(10 * n), "--timeout", str(30 * n), "--missed", "skip",
        "--overlap", "skip", "--jitter", str(n), "--start-at", start, "--end-at", end,
        "--priority", PRIORITY_OF[n],
    )  # fmt: skip


PRIORITY_OF = {2: "high", 3: "low"}
"""The ``--priority`` of ``spec_flags``'s ``n``."""


def test_every_spec_flag_reaches_the_api_in_create_and_update(cli: Any) -> None:
    # Given a job created with every spec flag
    created = cli.json(
        "jobs", "create", "--name", "full", "--paused",
        *spec_flags("Europe/Berlin", "http://127.0.0.1:9/a", 2, "2030-01-01T00:00:00Z", "2031-01-01T00:00:00Z"),
    )  # fmt: skip

    # When every one of them is changed
    updated = cli.json(
        "jobs", "update", "full",
        *spec_flags("Asia/Tokyo", "http://127.0.0.1:9/b", 3, "2030-06-01T00:00:00Z", "2032-01-01T00:00:00Z"),
    )  # fmt: skip

    # Then each flag set its field of the job, under the API's name
    for job, tz, url, n in ((created, "Europe/Berlin", "/a", 2), (updated, "Asia/Tokyo", "/b", 3)):
        assert (job["schedule"], job["timezone"]) == (f"every {n} minutes", tz)
        assert job["target"]["type"] == "http" and job["target"]["url"].endswith(url)
        assert job["input"] == {"n": n}
        assert (job["retry"]["max_attempts"], job["retry"]["backoff_s"]) == (n, 10 * n)
        assert (job["timeout_s"], job["jitter_s"]) == (30 * n, n)
        assert (job["missed"], job["overlap"]) == ("skip", "skip")
        assert job["priority"] == PRIORITY_OF[n]
        assert job["paused"] is True
    assert created["start_at"].startswith("2030-01-01") and created["end_at"].startswith("2031-01-01")
    assert updated["start_at"].startswith("2030-06-01") and updated["end_at"].startswith("2032-01-01")


def test_a_chain_is_created_and_changed_with_after_flags_and_shown_on_the_upstream(cli: Any) -> None:
    # design §2.1: --after names the upstream (id or name), --after-on its ends
    extract = cli.json("jobs", "create", "--name", "extract", "--schedule", "0 2 * * *", "--command", "echo")
    load = cli.json("jobs", "create", "--name", "load", "--after", "extract", "--command", "echo")
    assert load["after"] == {"job": extract["id"], "on": ["succeeded"]} and load["schedule"] is None

    changed = cli.json("jobs", "update", "load", "--after", extract["id"], "--after-on", "succeeded, dead")
    assert changed["after"]["on"] == ["succeeded", "dead"]
    assert cli.json("jobs", "get", "extract")["downstream"] == [
        {"id": load["id"], "name": "load", "on": ["succeeded", "dead"]}
    ]
    listed = cli("jobs", "list")
    assert f"after {extract['id']}" in listed.stdout and "chained" in listed.stdout
    lone = cli("jobs", "update", "load", "--after-on", "dead")
    assert lone.exit_code == USAGE_ERROR and "--after-on needs --after" in lone.stderr


def test_update_from_a_file_with_a_target_flag_over_its_command(cli: Any, tmp_path: Path) -> None:
    cli.json("jobs", "create", "--name", "patched", "--schedule", "@daily", "--command", "echo")
    patch = tmp_path / "patch.json"
    patch.write_text(json.dumps({"command": "fail", "input": {"from": "file"}}))

    with_flag = cli.json("jobs", "update", "patched", "--file", str(patch), "--shell", "echo hi")
    from_file = cli.json("jobs", "update", "patched", "--file", str(patch))

    assert with_flag["target"] == {"type": "shell", "command": "echo hi"}
    assert with_flag["input"] == {"from": "file"}
    assert from_file["target"] == {"type": "command", "name": "fail"}


def test_idempotency_key_returns_the_first_job(cli: Any) -> None:
    args = ("jobs", "create", "--name", "once", "--schedule", "@daily", "--command", "echo")
    first = cli.json(*args, "--idempotency-key", "key-1")
    repeat = cli.json(*args, "--idempotency-key", "key-1")
    assert first["id"] == repeat["id"]


def test_trigger_and_runs_with_status_filter(cli: Any) -> None:
    job = cli.json("jobs", "create", "--name", "manual", "--schedule", "@yearly", "--command", "echo")

    run = cli.json("jobs", "trigger", "manual", "--idempotency-key", "t-1")
    assert run["job_id"] == job["id"]
    assert run["status"] == "queued"

    runs = cli.json("runs", "manual")
    assert [r["id"] for r in runs] == [run["id"]]
    assert cli.json("runs", job["id"], "--status", "queued")[0]["kind"] == "manual"
    assert cli.json("runs", job["id"], "--status", "succeeded") == []
    table = cli("runs", "manual")
    assert table.exit_code == 0 and "queued" in table.stdout and "manual" in table.stdout
    empty = cli("runs", "manual", "--status", "dead")
    assert empty.exit_code == 0 and "no runs" in empty.stderr


def test_api_errors_are_one_line_naming_the_field(cli: Any) -> None:
    bad_schedule = cli("jobs", "create", "--name", "bad", "--schedule", "0 0 30 2 *", "--command", "echo")
    assert bad_schedule.exit_code == 1
    line = one_line(bad_schedule.stderr)
    assert line.startswith("error: 400 ") and "(field: schedule)" in line

    bad_zone = cli(
        "jobs", "create", "--name", "bad", "--schedule", "@daily", "--tz", "PST", "--command", "echo"
    )
    assert "(field: timezone)" in one_line(bad_zone.stderr)

    # the API judges every field (no client-side check): same one-line shape
    bad_name = cli("jobs", "create", "--name", "no spaces", "--schedule", "@daily", "--command", "echo")
    assert bad_name.exit_code == 1 and "(field: name)" in one_line(bad_name.stderr)


@pytest.mark.parametrize(
    ("args", "body"),
    [
        (
            ("jobs", "create", "--name", "ftp", "--schedule", "@daily", "--url", "ftp://example.com/x"),
            {"name": "ftp", "schedule": "@daily", "target": {"type": "http", "url": "ftp://example.com/x"}},
        ),
        (
            ("jobs", "create", "-n", "many", "-s", "@daily", "--command", "echo", "--retries", "99"),
            {"name": "many", "schedule": "@daily", "command": "echo", "retry": {"max_attempts": 99}},
        ),
    ],
)
def test_rejected_specs_show_the_apis_own_error_line(
    cli: Any, args: tuple[str, ...], body: dict[str, Any]
) -> None:
    # Given what the API itself answers for this body
    with cli.client() as client, pytest.raises(ApiError) as answered:
        client.create_job(body)
    assert answered.value.status == 400 and answered.value.field

    # When the CLI sends the same spec from flags
    result = cli(*args)

    # Then its one error line is the API's answer, unchanged (no local check inventing a code)
    assert result.exit_code == 1
    assert one_line(result.stderr) == f"error: {answered.value}"


def test_update_rejected_by_the_api_names_the_field(cli: Any) -> None:
    cli.json("jobs", "create", "--name", "fixed", "--schedule", "@daily", "--command", "echo")

    result = cli("jobs", "update", "fixed", "--retries", "0")

    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert line.startswith("error: 400 ") and line.endswith("(field: retry.max_attempts)")
    assert cli.json("jobs", "get", "fixed")["retry"]["max_attempts"] == 4


def test_usage_errors_exit_2(cli: Any) -> None:
    bad_json = cli(
        "jobs", "create", "--name", "x", "--schedule", "@daily", "--command", "echo", "--input-json", "{"
    )
    assert bad_json.exit_code == 2 and "--input-json is not valid JSON" in one_line(bad_json.stderr)
    two_targets = cli(
        "jobs", "create", "--name", "x", "--schedule", "@daily", "--command", "a", "--shell", "b"
    )
    assert two_targets.exit_code == 2
    nothing = cli("jobs", "update", "j_0000")
    assert nothing.exit_code == 2 and "nothing to change" in nothing.stderr
    missing_file = cli("jobs", "create", "--file", "/nonexistent/job.json")
    assert missing_file.exit_code == 2 and "cannot read" in one_line(missing_file.stderr)


def test_other_teams_jobs_are_not_found_and_bad_token_is_401(cli: Any) -> None:
    job = cli.json("jobs", "create", "--name", "private", "--schedule", "@daily", "--command", "echo")

    other = cli("jobs", "get", job["id"], token=cli.other_token)
    assert other.exit_code == 1 and one_line(other.stderr).startswith("error: 404 ")
    by_name = cli("jobs", "get", "private", token=cli.other_token)
    assert by_name.exit_code == 1 and "no job with id or name 'private'" in by_name.stderr

    unknown = cli("jobs", "list", token="not-a-token")
    assert unknown.exit_code == 1 and one_line(unknown.stderr).startswith("error: 401 ")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.enable_socket  # a real socket on 127.0.0.1 (see tests/conftest.py)
def test_connection_refused_says_to_start_local_mode() -> None:
    app = typer.Typer()
    register(app)
    api = f"http://127.0.0.1:{free_port()}"

    result = CliRunner().invoke(app, ["jobs", "list", "--api", api, "--token", "t"])

    assert result.exit_code == 1
    assert one_line(result.stderr) == f"error: cannot reach the API at {api}: is `jobsched local` running?"


def test_import_crontab_creates_then_changes_nothing_and_reports_bad_lines(cli: Any) -> None:
    crontab = str(DATA / "user.crontab")

    first = cli("import-crontab", crontab, "--json")
    again = cli("import-crontab", crontab, "--json")

    # Then the valid entries are jobs; the bad line makes the exit status 1 and is named with its line
    assert first.exit_code == 1
    report = json.loads(first.stdout)
    assert [(j["line"], j["status"]) for j in report["jobs"]] == [
        (4, "created"),
        (5, "created"),
        (7, "created"),
    ]
    assert f"{crontab}:8: error: schedule:" in first.stderr
    assert f"{crontab}:2: note: MAILTO ignored" in first.stderr
    assert f"{crontab}:6: note: @reboot skipped" in first.stderr
    nightly = report["jobs"][0]["job"]
    assert nightly["timezone"] == "Europe/Berlin"
    assert nightly["target"] == {"type": "shell", "command": '/opt/reports/nightly.sh --day "$(date +%F)"'}
    assert nightly["retry"]["max_attempts"] == 1 and nightly["missed"] == "skip"
    # importing again changes nothing: same names, same ids, answered 200
    repeat = json.loads(again.stdout)
    assert [(j["status"], j["id"]) for j in repeat["jobs"]] == [
        ("unchanged", j["id"]) for j in report["jobs"]
    ]
    assert len(cli.json("jobs", "list")) == 3


def test_import_crontab_dry_run_calls_nothing(cli: Any) -> None:
    result = cli("import-crontab", str(DATA / "user.crontab"), "--dry-run", "--retries", "2", "--catch-up")

    assert result.exit_code == 1  # the bad line still counts
    assert "/opt/reports/refresh.sh" in result.stdout and "would" not in result.stderr
    dry = json.loads(cli("import-crontab", str(DATA / "user.crontab"), "--dry-run", "--json").stdout)
    assert [j["status"] for j in dry["jobs"]] == ["would create"] * 3
    assert (
        dry["jobs"][1]["target"]["command"]
        == "printf '%s' 'payload line\n' | /bin/sh -c /opt/reports/refresh.sh"
    )
    assert cli.json("jobs", "list") == []


def test_import_crontab_from_stdin_and_unreadable_file(cli: Any) -> None:
    result = cli("import-crontab", "-", "--tz", "UTC", stdin="5 4 * * * echo from-stdin\n")
    assert result.exit_code == 0, result.stderr
    (job,) = cli.json("jobs", "list")
    assert job["name"].startswith("crontab-stdin-1-")

    missing = cli("import-crontab", "/nonexistent/crontab")
    assert missing.exit_code == 2 and "cannot read /nonexistent/crontab" in one_line(missing.stderr)


@pytest.mark.parametrize("flag", ["--json", None])
def test_list_empty(cli: Any, flag: str | None) -> None:
    if flag:
        assert cli.json("jobs", "list") == []
    else:
        result = cli("jobs", "list")
        assert result.exit_code == 0 and result.stdout == "" and "no jobs" in result.stderr


@pytest.mark.parametrize(
    ("field", "code", "line"),
    [
        (None, FAILED, "error: cannot reach the API: is it up?"),
        ("schedule", USAGE_ERROR, "error: schedule: cannot reach the API: is it up?"),
    ],
)
def test_every_error_is_one_line_on_stderr(
    field: str | None, code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as raised:
        fail("cannot reach\n  the API:\tis it up?", code, field=field)

    assert raised.value.exit_code == code
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", line + "\n")


def test_jobs_fires_lists_the_next_fires_with_notes_and_says_why_a_paused_job_has_none(cli: Any) -> None:
    cli.json("jobs", "create", "--name", "berlin", "--schedule", "30 2 * * *", "--tz", "Europe/Berlin",
             "--command", "echo")  # fmt: skip

    fires = cli.json("jobs", "fires", "berlin", "--count", "3")
    table = cli("jobs", "fires", "berlin", "-n", "2")

    assert len(fires["items"]) == 3 and fires["reason"] is None
    assert fires["items"][0]["local_time"].endswith("T02:30:00+01:00")
    assert table.exit_code == 0 and "LOCAL TIME" in table.stdout
    assert len([line for line in table.stdout.splitlines() if "+01:00" in line]) == 2
    cli("jobs", "pause", "berlin")
    paused = cli("jobs", "fires", "berlin")
    assert paused.exit_code == 0 and paused.stdout.strip() == ""
    assert (
        one_line(paused.stderr)
        == "paused: no fire runs while the job is paused; a resume continues with the first fire after it"
    )


def test_jobs_fires_with_a_count_out_of_range_is_the_api_s_error_naming_count(cli: Any) -> None:
    cli.json("jobs", "create", "--name", "often", "--schedule", "every 5 minutes", "--command", "echo")

    result = cli("jobs", "fires", "often", "--count", "500")

    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert line.startswith("error: 400 ") and "count" in line


def test_pause_with_a_reason_shows_it_on_the_job_and_events_list_who_did_what(cli: Any) -> None:
    cli.json("jobs", "create", "--name", "ledger", "--schedule", "0 2 * * *", "--command", "echo")

    paused = cli.json("jobs", "pause", "ledger", "--reason", "quarter close")
    shown = cli("jobs", "get", "ledger")
    cli("jobs", "resume", "ledger")
    events = cli.json("jobs", "events", "ledger")
    table = cli("jobs", "events", "ledger", "--limit", "2")

    assert paused["paused_reason"] == "quarter close" and paused["paused_by"] == paused["updated_by"]
    assert "quarter close" in shown.stdout
    assert [e["kind"] for e in events] == ["resumed", "paused", "created"]
    assert events[1]["detail"] == {"reason": "quarter close"}
    assert table.exit_code == 0 and "EVENT" in table.stdout and "resumed" in table.stdout
    assert "created" not in table.stdout


def test_jobs_backfill_runs_the_window_s_past_fires_once(cli: Any) -> None:
    cli.json("jobs", "create", "--name", "hourly", "--schedule", "0 * * * *", "--command", "echo")
    top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (top - timedelta(hours=3)).isoformat(), (top - timedelta(hours=1)).isoformat()

    first = cli("jobs", "backfill", "hourly", "--start", start, "--end", end)
    again = cli.json("jobs", "backfill", "hourly", "--start", start, "--end", end)
    future = cli("jobs", "backfill", "hourly", "--start", start, "--end", "9999-01-01T00:00:00Z")

    assert first.exit_code == 0, first.stderr
    assert first.stdout.startswith("backfilled 2 run(s) from ")
    assert again["count"] == 0 and again["existing"] == 2
    assert future.exit_code == 1 and one_line(future.stderr).startswith("error: 400 ")
    assert "end" in future.stderr


def test_runs_all_lists_every_jobs_runs_and_needs_a_job_or_all(cli: Any) -> None:
    for name in ("alpha", "beta"):
        cli.json("jobs", "create", "--name", name, "--schedule", "0 2 * * *", "--command", "echo")
        cli("jobs", "trigger", name)

    listed = cli.json("runs", "--all", "--since", "1h")
    table = cli("runs", "--all", "--kind", "manual")
    dead = cli.json("runs", "--all", "--status", "dead", "--since", "24h")
    neither = cli("runs")
    both = cli("runs", "alpha", "--all")

    assert sorted(run["kind"] for run in listed) == ["manual", "manual"]
    assert len({run["job_id"] for run in listed}) == 2
    assert table.exit_code == 0 and "JOB" in table.stdout
    assert dead == []
    assert neither.exit_code == both.exit_code == 2
    assert one_line(neither.stderr) == "error: give a JOB, or --all for the runs of all your jobs"


def test_since_takes_a_duration_ago_or_an_instant() -> None:
    from jobsched.cli.runs import instant_option

    now = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    assert instant_option("24h", "--since", now) == "2026-03-01T10:00:00Z"
    assert instant_option("90 s", "--since", now) == "2026-03-02T09:58:30Z"
    assert instant_option("2026-01-01T00:00:00Z", "--since", now) == "2026-01-01T00:00:00Z"
    assert instant_option(None, "--since", now) is None


def test_an_alert_policy_is_set_from_a_spec_file(cli: Any, tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "watched", "schedule": "@hourly", "command": "echo",
                                "alerts": {"late_after_s": 60, "pause_after_consecutive_dead": 3}}))  # fmt: skip

    created = cli.json("jobs", "create", "--file", str(spec))
    spec.with_name("bad.json").write_text(json.dumps({"alerts": {"late_after_s": 0}}))
    bad = cli("jobs", "update", "watched", "--file", str(spec.with_name("bad.json")))

    assert created["alerts"]["late_after_s"] == 60 and created["alerts"]["pause_after_consecutive_dead"] == 3
    assert bad.exit_code == 1 and "alerts.late_after_s" in one_line(bad.stderr)


# --- one run with its tries, re-runs (design §5.7) ------------------------------------------------------


def _dead_runs(deployment: Any, job_id: str, *instants: int) -> list[str]:
    """Dead runs of ``job_id`` at ``instants`` (epoch ms), each with one failed try, as the worker leaves them
    (with the job's owner: in the owner's failures index)."""
    aws, settings = deployment
    store = RunStore(aws.table(settings.runs_table))
    owner = JobStore(aws.table(settings.jobs_table)).get(job_id).job.owner
    for at in instants:
        row = new_run(job_id, at, now_ms=at, retention_days=90, status=RunStatus.DEAD, owner=owner)
        tried = TryRecord(
            1, at + 10, at + 20, "w-1", "HTTP 502 from POST https://x/", "HTTP 502\nbad gateway"
        )
        assert (
            store.put_new(replace(row, attempt=1, error=tried.error, finished_at=at + 20, tries=(tried,)))
            is None
        )
    return [f"{job_id}@{at}" for at in instants]


def test_runs_show_prints_each_try_with_its_output(cli: Any, deployment: Any) -> None:
    job = cli.json("jobs", "create", "--name", "nightly", "--schedule", "@daily", "--command", "echo")
    (run_id,) = _dead_runs(deployment, job["id"], 1_767_578_400_000)

    shown = cli("runs", "show", run_id)
    as_json = cli.json("runs", "show", run_id)

    assert shown.exit_code == 0, shown.stderr
    assert "TRIES" in shown.stdout and "bad gateway" in shown.stdout and "HTTP 502 from POST" in shown.stdout
    assert [(a["attempt"], a["output"]) for a in as_json["attempts"]] == [(1, "HTTP 502\nbad gateway")]
    # the job's listing of runs still works as `runs JOB` (the default subcommand) and as `runs list JOB`
    assert (
        [r["id"] for r in cli.json("runs", "nightly")]
        == [run_id]
        == [r["id"] for r in cli.json("runs", "list", "nightly")]
    )


def test_runs_show_of_a_bad_or_foreign_run_id(cli: Any, deployment: Any) -> None:
    job = cli.json("jobs", "create", "--name", "mine", "--schedule", "@daily", "--command", "echo")
    (run_id,) = _dead_runs(deployment, job["id"], 1_767_578_400_000)

    malformed = cli("runs", "show", "not-a-run")
    foreign = cli("runs", "show", run_id, token=cli.other_token)
    missing = cli("runs", "show")

    assert malformed.exit_code == 2 and one_line(malformed.stderr).startswith(
        "error: RUN_ID: 'not-a-run' is not"
    )
    assert foreign.exit_code == 1 and one_line(foreign.stderr).startswith("error: 404 ")
    assert missing.exit_code == 2 and "RUN_ID" in missing.stderr


def test_runs_retry_one_then_again_is_a_409(cli: Any, deployment: Any) -> None:
    job = cli.json("jobs", "create", "--name", "flaky", "--schedule", "@daily", "--command", "echo")
    (run_id,) = _dead_runs(deployment, job["id"], 1_767_578_400_000)

    first = cli("runs", "retry", run_id, "--idempotency-key", "again-1")
    repeat = cli.json("runs", "retry", run_id, "--idempotency-key", "again-1")
    second = cli("runs", "retry", run_id)

    assert first.exit_code == 0 and first.stdout.strip() == f"queued again: {run_id} (re-run 1)"
    assert repeat["reruns"] == 1 and repeat["status"] == "queued"
    assert second.exit_code == 1 and one_line(second.stderr).startswith("error: 409 ")
    assert "is queued; only a dead or skipped run can be retried" in second.stderr


def test_runs_cancel_a_queued_run_then_again_then_a_finished_one(cli: Any, deployment: Any) -> None:
    job = cli.json("jobs", "create", "--name", "long", "--schedule", "@daily", "--command", "echo")
    aws, settings = deployment
    store = RunStore(aws.table(settings.runs_table))
    at = 1_767_578_400_000
    assert store.put_new(new_run(job["id"], at, now_ms=at, retention_days=90)) is None
    run_id = f"{job['id']}@{at}"
    (dead_id,) = _dead_runs(deployment, job["id"], at + 1)

    first = cli("runs", "cancel", run_id, "--reason", "wrong input")
    again = cli.json("runs", "cancel", run_id)
    finished = cli("runs", "cancel", dead_id)
    malformed = cli("runs", "cancel", "not-a-run")

    assert first.exit_code == 0, first.stderr
    assert first.stdout.startswith(f"cancelled: {run_id} (not_started): the run was queued")
    assert again["status"] == "cancelled" and again["cancel_reason"] == "wrong input"
    assert again["cancelled_by"] and again["stop"] == "not_started"
    assert finished.exit_code == 1 and one_line(finished.stderr).startswith("error: 409 ")
    assert "is dead; only a queued, retrying or running run can be cancelled" in finished.stderr
    assert malformed.exit_code == 2 and "RUN_ID" in malformed.stderr
    assert [r["id"] for r in cli.json("runs", "long", "--status", "cancelled")] == [run_id]


def test_runs_retry_many_by_status_and_window_one_call_each_with_a_count(cli: Any, deployment: Any) -> None:
    now = int(time.time() * 1000)
    a = cli.json("jobs", "create", "--name", "a", "--schedule", "@daily", "--command", "echo")
    b = cli.json("jobs", "create", "--name", "b", "--schedule", "@daily", "--command", "echo")
    recent = _dead_runs(deployment, a["id"], now - 3_600_000, now - 7_200_000) + _dead_runs(
        deployment, b["id"], now - 60_000
    )
    _dead_runs(deployment, b["id"], now - 3 * 86_400_000)  # outside the window: left dead

    result = cli("runs", "retry", "--status", "dead", "--since", "24h")

    assert result.exit_code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert sorted(lines[:-1]) == sorted(f"queued again: {r} (re-run 1)" for r in recent)
    assert lines[-1] == "3 run(s) queued again"
    assert [r["status"] for r in cli.json("runs", "b")] == ["queued", "dead"]
    # nothing dead is left in the window: a second pass queues nothing
    assert cli("runs", "retry", "--status", "dead", "--since", "24h", "--job", "a").stdout.strip() == (
        "0 run(s) queued again"
    )


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--status", "succeeded"), "--status"),
        (("--status", "dead", "--since", "yesterday"), "--since"),
        (("--status", "dead", "--since", "1000000d"), "--since"),  # before year 1
        (("--status", "dead", "--since", "99999999999999d"), "--since"),  # past timedelta's range
        (("j_1@5", "--status", "dead"), "RUN_ID"),
        ((), "RUN_ID"),
    ],
)
def test_runs_retry_usage_errors_exit_2_naming_the_option(
    cli: Any, args: tuple[str, ...], field: str
) -> None:
    result = cli("runs", "retry", *args)
    assert result.exit_code == 2 and one_line(result.stderr).startswith(f"error: {field}: ")


def test_runs_with_a_data_dir_read_across_the_retention_boundary(cli: Any, tmp_path: Path) -> None:
    from jobsched.domain.archive import archive_objects
    from jobsched.local.archive import LocalArchive, archive_dir
    from tests.support.archive import finished_runs

    job = cli.json("jobs", "create", "--name", "kept", "--schedule", "@yearly", "--command", "echo")
    hot = cli.json("jobs", "trigger", "kept", "--idempotency-key", "k-1")
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    day = 86_400_000
    old = [
        replace(r, job_id=job["id"], scheduled_for=now_ms - (150 + i) * day)
        for i, r in enumerate(finished_runs(4, owners=("team-a",)))
    ]
    other_job = replace(old[0], job_id="j_someone_else")
    archive = LocalArchive(archive_dir(tmp_path))
    for item in archive_objects([*old, other_job, replace(old[1], scheduled_for=now_ms - 400 * day)]):
        archive.put(item)

    runs = cli.json("runs", "kept", "--since", "180d", "--data-dir", str(tmp_path))
    assert [r["id"] for r in runs] == [hot["id"], *(r.run_id for r in old)]  # newest first, no other job's
    assert [r.get("archived", False) for r in runs] == [False, True, True, True, True]
    assert runs[1]["status"] == "dead" and runs[1]["scheduled_for"].endswith("Z")
    # without it, an API with no archive says where the history went instead of answering its part as the whole
    gone = cli("runs", "kept", "--since", "180d")
    assert gone.exit_code == 1 and "beyond_retention" in gone.output and "archive" in gone.output
    dead = cli.json("runs", "kept", "--since", "180d", "--status", "dead", "--data-dir", str(tmp_path))
    assert [r["id"] for r in dead] == [old[0].run_id]
    table = cli("runs", "kept", "--since", "180d", "--data-dir", str(tmp_path), "--limit", "2")
    assert table.exit_code == 0 and len(table.stdout.strip().splitlines()) == 3
    # only an end, before the retention: the runs table holds none of them, the data dir all
    before = cli.json("runs", "kept", "--until", "140d", "--data-dir", str(tmp_path))
    assert [r["id"] for r in before][:4] == [r.run_id for r in old] and len(before) == 5
    assert all(r["archived"] for r in before)
    ended = cli("runs", "kept", "--until", "140d")
    assert ended.exit_code == 1 and "beyond_retention" in ended.output
