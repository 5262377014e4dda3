"""``jobsched apply`` and ``-o yaml`` against the real API handler on moto (the ``cli`` fixture): create, change
only the differing fields, prune by selector, dry-run, idempotence, a bad spec stopping everything, and the
export round trip; ``jobs list -l`` filtering by label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from jobsched.apply_plan import plan, read_documents, validate
from jobsched.cli.apply import _wait
from jobsched.exits import FAILED, USAGE_ERROR

BILLING = """
name: invoices
schedule: "0 2 * * *"
timezone: Europe/Berlin
command: echo
labels: {app: billing, tier: gold}
---
name: reminders
schedule: every 5 minutes
command: echo
input: {channel: email}
labels: {app: billing}
"""
LEDGER = '[{"name": "ledger", "schedule": "30 3 * * *", "command": "echo", "labels": {"app": "billing"}}]'


def specs_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "jobs"
    (folder / "nested").mkdir(parents=True)
    (folder / "billing.yaml").write_text(BILLING)
    (folder / "nested" / "ledger.json").write_text(LEDGER)
    (folder / "README.md").write_text("not a spec")
    return folder


def by_name(cli: Any) -> dict[str, dict[str, Any]]:
    return {job["name"]: job for job in cli.json("jobs", "list")}


def ok(result: Any) -> list[str]:
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout.splitlines()


def test_apply_creates_then_a_second_apply_changes_nothing(cli: Any, tmp_path: Path) -> None:
    folder = specs_dir(tmp_path)

    first = ok(cli("apply", "-f", str(folder)))

    assert first == [
        "created invoices",
        "created reminders",
        "created ledger",
        "apply: 3 created, 0 changed, 0 deleted, 0 unchanged",
    ]
    jobs = by_name(cli)
    assert jobs["invoices"]["labels"] == {"app": "billing", "tier": "gold"}
    assert jobs["invoices"]["timezone"] == "Europe/Berlin" and jobs["reminders"]["input"] == {
        "channel": "email"
    }
    again = ok(cli("apply", "-f", str(folder)))
    assert again[-1] == "apply: 0 created, 0 changed, 0 deleted, 3 unchanged"
    assert by_name(cli) == jobs  # not even updated_at moved


def test_a_changed_spec_patches_only_its_differing_fields(cli: Any, tmp_path: Path) -> None:
    folder = specs_dir(tmp_path)
    ok(cli("apply", "-f", str(folder)))
    before = by_name(cli)
    (folder / "billing.yaml").write_text(
        BILLING.replace("tier: gold", "tier: silver").replace("every 5 minutes", "every 10 minutes")
    )

    lines = ok(cli("apply", "-f", str(folder)))

    assert "changed invoices: labels" in lines and "changed reminders: schedule" in lines
    assert '  labels: {"app":"billing","tier":"gold"} -> {"app":"billing","tier":"silver"}' in lines
    after = by_name(cli)
    assert after["invoices"]["labels"]["tier"] == "silver"
    assert after["invoices"]["next_run_at"] == before["invoices"]["next_run_at"]  # labels are not timing
    assert after["reminders"]["schedule"] == "every 10 minutes"
    events = cli.json("jobs", "events", "invoices")
    assert events[0]["kind"] == "updated" and events[0]["detail"] == {"fields": ["labels"]}
    assert cli.json("jobs", "events", "reminders")[0]["detail"] == {"fields": ["schedule"]}


def test_dry_run_prints_the_diff_and_changes_nothing(cli: Any, tmp_path: Path) -> None:
    folder = specs_dir(tmp_path)
    ok(cli("apply", "-f", str(folder / "billing.yaml")))
    cli("jobs", "create", "--name", "stale", "--schedule", "@daily", "--command", "echo")
    ok(cli("jobs", "update", "stale", "--file", "-", stdin='{"labels": {"app": "billing"}}'))
    (folder / "billing.yaml").write_text(BILLING.replace('"0 2 * * *"', '"0 4 * * *"'))
    before = by_name(cli)

    lines = ok(cli("apply", "-f", str(folder), "--selector", "app=billing", "--prune", "--dry-run"))

    assert lines == [
        "created ledger",
        "changed invoices: schedule",
        '  schedule: "0 2 * * *" -> "0 4 * * *"',
        "deleted stale",
        "unchanged reminders",
        "apply: 1 created, 1 changed, 1 deleted, 1 unchanged (dry run: nothing was changed)",
    ]
    assert by_name(cli) == before
    planned = cli.json("apply", "-f", str(folder), "--selector", "app=billing", "--prune", "--dry-run")
    assert planned == {
        "created": ["ledger"],
        "changed": {"invoices": ["schedule"]},
        "deleted": ["stale"],
        "unchanged": ["reminders"],
        "dry_run": True,
    }


def test_prune_deletes_only_the_selected_jobs_no_file_names(cli: Any, tmp_path: Path) -> None:
    folder = specs_dir(tmp_path)
    ok(cli("apply", "-f", str(folder)))
    cli("jobs", "create", "--name", "unowned", "--schedule", "@daily", "--command", "echo")
    (folder / "nested" / "ledger.json").unlink()

    lines = ok(cli("apply", "-f", str(folder), "--selector", "app=billing", "--prune"))

    assert "deleted ledger" in lines
    assert sorted(by_name(cli)) == ["invoices", "reminders", "unowned"]


def test_prune_without_a_selector_is_refused(cli: Any, tmp_path: Path) -> None:
    result = cli("apply", "-f", str(specs_dir(tmp_path)), "--prune")
    assert result.exit_code == USAGE_ERROR
    assert "--prune needs --selector" in result.stderr
    assert by_name(cli) == {}


def test_a_spec_without_the_selectors_labels_is_refused(cli: Any, tmp_path: Path) -> None:
    result = cli("apply", "-f", str(specs_dir(tmp_path)), "--selector", "tier=gold")
    assert result.exit_code == FAILED
    assert (
        "reminders" in result.stderr
        and "labels: must carry the selector's labels (tier=gold)" in result.stderr
    )
    assert by_name(cli) == {}


def test_one_invalid_spec_stops_the_whole_apply_naming_file_job_and_field(cli: Any, tmp_path: Path) -> None:
    folder = specs_dir(tmp_path)
    bad = folder / "nested" / "zz-bad.yaml"
    bad.write_text("name: broken\nschedule: '@daily'\ncommand: echo\nretry: {max_attempts: 99}\n")

    result = cli("apply", "-f", str(folder))

    assert result.exit_code == FAILED
    line = result.stderr.strip()
    assert line.startswith(f"error: no change made: {bad}: job 'broken': retry.max_attempts: ")
    assert by_name(cli) == {}  # the valid specs read before it were not applied either


def test_a_schedule_the_api_would_refuse_stops_the_apply_before_any_change(cli: Any, tmp_path: Path) -> None:
    folder = specs_dir(tmp_path)
    (folder / "bad.yaml").write_text("name: bad-cron\nschedule: '61 * * * *'\ncommand: echo\n")

    result = cli("apply", "-f", str(folder))

    assert result.exit_code == FAILED
    assert f"{folder / 'bad.yaml'}: job 'bad-cron': schedule: " in result.stderr
    assert by_name(cli) == {}


def test_a_call_the_api_refuses_stops_the_apply_naming_the_job(cli: Any, tmp_path: Path) -> None:
    spec = tmp_path / "slow.yaml"
    spec.write_text(
        "name: a-ok\nschedule: '@daily'\ncommand: echo\n---\nname: b-slow\nschedule: '@daily'\ncommand: echo\ntimeout_s: 999999\n"
    )

    result = cli("apply", "-f", str(spec))

    assert result.exit_code == FAILED
    assert "apply stopped at job 'b-slow'" in result.stderr and "after 1 of 2 changes" in result.stderr
    assert sorted(by_name(cli)) == ["a-ok"]


def test_a_missing_path_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    result = cli("apply", "-f", str(tmp_path / "nowhere"))
    assert result.exit_code == USAGE_ERROR and "no such file or directory" in result.stderr


def test_wait_returns_once_every_changed_job_has_its_next_fire(cli: Any, tmp_path: Path) -> None:
    lines = ok(cli("apply", "-f", str(specs_dir(tmp_path)), "--wait"))
    assert lines[-1].startswith("apply: 3 created")
    assert all(job["next_run_at"] for job in by_name(cli).values())


def test_an_export_applies_as_no_change(cli: Any, tmp_path: Path) -> None:
    ok(cli("apply", "-f", str(specs_dir(tmp_path))))
    cli(
        "jobs",
        "create",
        "--name",
        "hooked",
        "--schedule",
        "@hourly",
        "--url",
        "https://example.com/h",
        "--paused",
    )
    exported = ok(cli("jobs", "list", "-o", "yaml"))
    one = ok(cli("jobs", "get", "invoices", "-o", "yaml"))
    assert yaml.safe_load("\n".join(one)) == {
        "name": "invoices",
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "target": {"type": "command", "name": "echo"},
        "labels": {"app": "billing", "tier": "gold"},
    }
    export = tmp_path / "export.yaml"
    export.write_text("\n".join(exported))

    lines = ok(cli("apply", "-f", str(export)))

    assert lines[-1] == "apply: 0 created, 0 changed, 0 deleted, 4 unchanged"


def test_jobs_list_filters_by_every_label_given(cli: Any, tmp_path: Path) -> None:
    ok(cli("apply", "-f", str(specs_dir(tmp_path))))

    gold = cli.json("jobs", "list", "-l", "app=billing", "-l", "tier=gold")
    billing = cli.json("jobs", "list", "--label", "app=billing")
    table = ok(cli("jobs", "list", "-l", "tier=gold"))

    assert [job["name"] for job in gold] == ["invoices"]
    assert [job["name"] for job in billing] == ["invoices", "ledger", "reminders"]
    assert "LABELS" in table[0] and "app=billing,tier=gold" in table[1]
    bad = cli("jobs", "list", "-l", "tier")
    assert bad.exit_code == USAGE_ERROR and "must be key=value" in bad.stderr
    both = cli("jobs", "list", "--json", "-o", "yaml")
    assert both.exit_code == USAGE_ERROR
    as_json = cli("jobs", "get", "invoices", "-o", "json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["labels"]["tier"] == "gold"


EXAMPLES = Path(__file__).parents[3] / "examples" / "jobs"


def test_the_example_specs_apply(cli: Any) -> None:
    planned = ok(cli("apply", "-f", str(EXAMPLES), "--selector", "app=billing", "--prune", "--dry-run"))
    assert planned[-1] == "apply: 5 created, 0 changed, 0 deleted, 0 unchanged (dry run: nothing was changed)"
    assert by_name(cli) == {}

    ok(cli("apply", "-f", str(EXAMPLES), "--selector", "app=billing", "--prune"))
    again = ok(cli("apply", "-f", str(EXAMPLES), "--selector", "app=billing", "--prune", "--dry-run"))

    assert again[-1] == "apply: 0 created, 0 changed, 0 deleted, 5 unchanged (dry run: nothing was changed)"


def test_a_file_named_twice_or_through_a_link_is_read_once(cli: Any, tmp_path: Path) -> None:
    folder = specs_dir(tmp_path)
    (folder / "nested" / "same-ledger.json").symlink_to(folder / "nested" / "ledger.json")

    result = ok(cli("apply", "-f", str(folder), "-f", str(folder / "billing.yaml"), "--dry-run"))

    assert result[:3] == ["created invoices", "created reminders", "created ledger"]
    assert result[-1] == "apply: 3 created, 0 changed, 0 deleted, 0 unchanged (dry run: nothing was changed)"


def test_an_empty_directory_an_unreadable_file_and_a_bad_selector_are_refused(
    cli: Any, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = cli("apply", "-f", str(empty))
    assert nothing.exit_code == FAILED and "no job specs in" in nothing.stderr
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00name")
    unreadable = cli("apply", "-f", str(binary))
    assert unreadable.exit_code == USAGE_ERROR and f"cannot read {binary}" in unreadable.stderr
    huge = tmp_path / "dump.json"
    with huge.open("wb") as sparse:
        sparse.truncate(8 * 1024 * 1024 + 1)
    oversized = cli("apply", "-f", str(tmp_path / "empty"), "-f", str(huge))
    assert oversized.exit_code == USAGE_ERROR
    assert f"cannot read {huge}: 8388609 bytes, more than a spec file's 8388608" in oversized.stderr
    selector = cli("apply", "-f", str(specs_dir(tmp_path)), "--selector", "app")
    assert (
        selector.exit_code == USAGE_ERROR
        and "--selector: label selector 'app' must be key=value" in selector.stderr
    )
    assert by_name(cli) == {}


class FakeJobs:
    """``iter_jobs`` of a client whose jobs get their ``next_run_at`` after ``polls_until_scheduled`` reads."""

    def __init__(self, polls_until_scheduled: int) -> None:
        self.polls = 0
        self.until = polls_until_scheduled

    def iter_jobs(self) -> list[dict[str, Any]]:
        self.polls += 1
        scheduled = "2026-03-02T10:00:00Z" if self.polls > self.until else None
        return [
            {"name": "a", "paused": False, "next_run_at": scheduled},
            {"name": "held", "paused": True, "next_run_at": None},  # paused: never waited for
        ]


def wait_plan() -> Any:
    text = "name: a\nschedule: '@daily'\ncommand: echo\n---\nname: held\nschedule: '@daily'\ncommand: echo\n"
    return plan(validate(read_documents(text, "w.yaml")), [])


def test_wait_polls_until_each_job_is_scheduled_on_the_injected_clock() -> None:
    now = [0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += int(seconds * 1000)

    fake = FakeJobs(polls_until_scheduled=3)
    _wait(fake, wait_plan(), 10, lambda: now[0], sleep)  # type: ignore[arg-type]
    assert fake.polls == 4 and slept == [0.5, 0.5, 0.5]


def test_wait_gives_up_after_its_timeout_naming_the_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    now = [0]

    def sleep(seconds: float) -> None:
        now[0] += int(seconds * 1000)

    with pytest.raises(typer.Exit) as stopped:
        _wait(FakeJobs(polls_until_scheduled=10**6), wait_plan(), 2, lambda: now[0], sleep)  # type: ignore[arg-type]
    assert stopped.value.exit_code == FAILED
    assert "error: --wait: after 2 s, no next fire scheduled for a" in capsys.readouterr().err
