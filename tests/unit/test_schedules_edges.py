"""Edges of the schedules: rate counts at the end of the range, the documented difference from
EventBridge's daylight-saving rules, the first instant west of UTC, crontab SHELL and variable names, a one-off at
the first instant."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from typer.testing import CliRunner

from jobsched.cli import app
from jobsched.crontab import parse_crontab
from jobsched.ports.targets import TargetCall
from jobsched.schedule.engine import parse_schedule, validate_schedule
from jobsched.targets.shell import ShellExecutor

NY = ZoneInfo("America/New_York")
END = datetime.max.replace(tzinfo=UTC)


# 1. count_fires of a rate counts fires whose local time is past year 9999 (east of UTC); fires() does not.
def test_rate_count_fires_equals_enumeration_at_the_end_of_the_range_east_of_utc() -> None:
    after = datetime(9999, 12, 28, 19, 0, 7, tzinfo=UTC)
    schedule = parse_schedule("rate(1 day)", "Etc/GMT-14", start_at=after)
    fires = schedule.fires(after, END, 10**6)
    assert [f.isoformat() for f in fires] == ["9999-12-30T09:00:07+14:00", "9999-12-31T09:00:07+14:00"]
    assert schedule.count_fires(after, END, 10**6) == len(fires)  # 3 != 2


def test_every_second_count_fires_equals_enumeration_in_lord_howe_at_year_9999() -> None:
    after = datetime(9999, 12, 31, 10, 0, 0, tzinfo=UTC)  # 21:00 local (+11)
    schedule = parse_schedule("every 1 second", "Australia/Lord_Howe", start_at=after)
    assert schedule.count_fires(after, END, 10**7) == len(schedule.fires(after, END, 10**7))


# 2. EventBridge Scheduler skips a cron time that falls in a spring-forward gap and runs a repeated
#    (fall-back) time once; inside cron(...) jobsched applies ISC's rules instead, undocumented as a difference.
def test_eventbridge_cron_in_a_spring_forward_gap_runs_after_the_gap_as_documented() -> None:
    # EventBridge Scheduler skips this run; jobsched applies its ISC rule inside cron(...) too (README says so)
    schedule = parse_schedule("cron(30 2 * * ? *)", "America/New_York")
    fire = schedule.next_fire(datetime(2024, 3, 10, 0, 0, tzinfo=NY))
    assert fire is not None and fire.astimezone(UTC) == datetime(2024, 3, 10, 7, 0, tzinfo=UTC)  # 03:00 EDT


def test_eventbridge_cron_runs_a_wildcard_hour_in_both_passes_as_documented() -> None:
    # EventBridge Scheduler runs a repeated time once; jobsched runs a wildcard-hour entry in both passes
    schedule = parse_schedule("cron(*/30 1 * * ? *)", "America/New_York")
    fires = schedule.fires(datetime(2024, 11, 3, 0, 0, tzinfo=NY), datetime(2024, 11, 3, 3, 0, tzinfo=NY), 10)
    assert len(fires) == 4


def test_the_first_instant_west_of_utc_is_refused_with_a_true_message() -> None:
    # 0001-01-01T00:00:00Z is 0000-12-31 local time in New York: the message says which bound it crosses
    result = CliRunner().invoke(
        app,
        ["next", "0 0 * * *", "--tz", "America/New_York", "--after", "0001-01-01T00:00:00Z", "--count", "1"],
    )
    assert result.exit_code == 2
    assert "as local time in America/New_York" in result.stderr and len(result.stderr.splitlines()) == 1


# 4. crontab's SHELL picks the shell but does not reach the command's environment (cron sets it there).
def test_crontab_shell_setting_reaches_the_commands_environment() -> None:
    crontab = parse_crontab(
        'SHELL=/bin/bash\n* * * * * echo "$SHELL"\n', now=datetime(2026, 1, 1, tzinfo=UTC)
    )
    target = crontab.entries[0].job.target
    executor = ShellExecutor(enabled=True, base_env={"PATH": "/usr/bin:/bin", "SHELL": "/bin/zsh"})
    out = executor.execute(
        target, TargetCall(run_id="r", job_id="j", scheduled_for_ms=0, attempt=1, timeout_s=10)
    )
    assert out == "shell exit 0: /bin/bash"  # got /bin/zsh, the worker's


# 5. One crontab variable whose name is not a shell identifier (cron passes any name through its
#    environment) makes every later entry fail to import, each blamed on its own line.
def test_crontab_variable_with_an_unusual_name_does_not_reject_the_entries_after_it() -> None:
    crontab = parse_crontab(
        "MY-VAR=1\n0 1 * * * echo a\n0 2 * * * echo b\n", now=datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert len(crontab.entries) == 2, crontab.notices  # got 0: both entries rejected "target.shell.env: ..."


# 6. A one-off at the first instant there is: "no fire at or after 0001-01-01T00:00:00" is untrue
#    (first_fire subtracts the grace and the 1 ms tolerance, both clamped to the floor, then asks for > floor).
def test_one_off_at_the_first_instant_is_its_own_first_fire() -> None:
    first = datetime(1, 1, 1, tzinfo=UTC)
    schedule = validate_schedule("at 0001-01-01T00:00:00Z", "UTC", now=first)
    assert schedule.first_fire(first) == first
