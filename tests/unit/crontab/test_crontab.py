"""Crontab import (Vixie/cronie format) -> JobCreate models: representative files and the cron rules."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobsched.api.schemas import NAME_PATTERN
from jobsched.crontab import Crontab, job_name, parse_crontab, split_percent
from jobsched.models import MissedPolicy, ShellTarget

DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
DEBIAN_PATH = {"PATH": "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin"}


def parse(name: str, *, system: bool) -> Crontab:
    text = (DATA / name).read_text()
    return parse_crontab(text, stem=Path(name).stem, source=str(DATA / name), system=system, now=NOW)


def target_of(result: Crontab, line: int) -> ShellTarget:
    entry = next(e for e in result.entries if e.line == line)
    assert isinstance(entry.job.target, ShellTarget)
    return entry.job.target


def command_of(result: Crontab, line: int) -> str:
    return target_of(result, line).command


def test_system_crontab_entries_keep_user_zone_and_environment() -> None:
    # Given a Debian-style /etc/crontab with SHELL/PATH/MAILTO lines, tabs, CRON_TZ and a commented entry
    result = parse("system.crontab", system=True)

    # Then each valid entry becomes a shell job in its zone, run by the crontab's SHELL with its PATH
    by_line = {e.line: e for e in result.entries}
    assert sorted(by_line) == [7, 8, 11, 12, 14, 18]
    assert [(by_line[n].job.schedule, by_line[n].job.timezone, by_line[n].user) for n in sorted(by_line)] == [
        ("17 * * * *", "UTC", "root"),
        ("25 6 * * *", "UTC", "root"),
        ("0 2 * * *", "Europe/Berlin", "billing"),
        ("@yearly", "Europe/Berlin", "root"),
        ("0 9 * * mon-fri", "Europe/Berlin", "mailer"),
        ("0 12 * * *", "Asia/Tokyo", "root"),
    ]
    # the command is the one written; the crontab's variables and SHELL are structured data of the target
    assert target_of(result, 7).model_dump() == {
        "type": "shell",
        "command": "cd / && run-parts --report /etc/cron.hourly",
        "env": DEBIAN_PATH,
        "shell": "/bin/bash",
    }
    # \% is a literal % in the command
    assert command_of(result, 11) == '/opt/billing/run --date "$(date +%Y-%m-%d)"'
    assert (target_of(result, 11).env, target_of(result, 11).shell) == (DEBIAN_PATH, "/bin/bash")
    # the user is kept on the job: in its name and its input
    billing = by_line[11].job
    assert billing.name.startswith("crontab-system-billing-11-")
    assert billing.input == {
        "crontab": {
            "source": f"{DATA / 'system.crontab'}:11",
            "entry": '0 2 * * *\tbilling\t/opt/billing/run --date "$(date +\\%Y-\\%m-\\%d)"',
            "user": "billing",
        }
    }
    # cron's behaviour by default: one try, missed fires skipped
    assert billing.retry.max_attempts == 1
    assert billing.missed is MissedPolicy.SKIP


def test_system_crontab_reports_reboot_mailto_bad_zone_and_bad_line() -> None:
    result = parse("system.crontab", system=True)

    notices = [(n.line, n.rejected, n.message) for n in result.notices]
    assert [(line, rejected) for line, rejected, _ in notices] == [
        (4, False),  # MAILTO: reported, not an error
        (13, False),  # @reboot: reported and skipped
        (15, True),  # CRON_TZ=Mars/Olympus
        (16, True),  # the entry after the bad zone
        (19, True),  # minute 61
    ]
    assert "MAILTO ignored" in notices[0][2]
    assert "@reboot skipped" in notices[1][2]
    assert "Mars/Olympus" in notices[2][2]
    assert "set on line 15" in notices[3][2]
    assert "minute" in notices[4][2] and "61" in notices[4][2]
    assert [n.line for n in result.rejected] == [15, 16, 19]


def test_user_crontab_tabs_comments_random_delay_tz_and_unknown_lines() -> None:
    result = parse("user.crontab", system=False)

    by_line = {e.line: e.job for e in result.entries}
    assert sorted(by_line) == [4, 5, 7]
    # RANDOM_DELAY (minutes) becomes jitter; the user is absent from a user crontab's names
    assert {job.jitter_s for job in by_line.values()} == {300}
    assert by_line[4].name.startswith("crontab-user-4-")
    # leading tab, tab separators; a `#` after an entry belongs to the command, as in cron
    assert command_of(result, 5) == "tar czf /backup/home-$(date +%d).tgz ~ # keeps the comment text"
    # TZ sets the zone of later entries and reaches the command's environment
    assert (by_line[7].schedule, by_line[7].timezone) == ("@daily", "America/New_York")
    assert command_of(result, 7) == 'echo "report" | mail -s report me'
    assert (target_of(result, 7).env, target_of(result, 7).shell) == ({"TZ": "America/New_York"}, None)
    # MAILTO="" (mail off) says nothing; @every and prose are rejected with their line numbers
    assert [(n.line, n.rejected) for n in result.notices] == [(8, True), (9, True)]
    assert "unknown macro '@every'" in result.notices[0].message
    assert "expected 5 time fields" in result.notices[1].message


@pytest.mark.parametrize(
    ("raw", "command", "stdin"),
    [
        ("echo 100\\%", "echo 100%", None),
        ("mail -s hi me%Hello%bye", "mail -s hi me", "Hello\nbye\n"),
        ("cat%a\\%b%c%", "cat", "a%b\nc\n"),
        ("cat%", "cat", ""),
        ("printf '\\n'", "printf '\\n'", None),  # other backslashes stay
        ("a\\\\%b", "a\\\\", "b\n"),  # a backslash does not escape a backslash (Vixie)
        ("cat%tail\\", "cat", "tail\\\n"),
    ],
)
def test_percent_follows_vixie_cron(raw: str, command: str, stdin: str | None) -> None:
    assert split_percent(raw) == (command, stdin)


def run_shell(target: ShellTarget) -> str:
    """Run a target as the worker's shell executor does: its shell, its env on top of ours."""
    argv = [target.shell or "/bin/sh", "-c", target.command]
    env = {**os.environ, **target.env}
    return subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout


def test_generated_commands_feed_stdin_and_environment_like_cron() -> None:
    # Given entries using %, \%, SHELL and an exported variable
    text = "GREETING=hi there\nSHELL=/bin/sh\n* * * * * cat%first line%second \\% line\n* * * * * echo $GREETING 5\\%\n"
    result = parse_crontab(text, now=NOW)

    # When the generated shell commands run
    # Then stdin carries the text after the first %, and the environment reaches the command
    assert run_shell(target_of(result, 3)) == "first line\nsecond % line\n"
    assert run_shell(target_of(result, 4)) == "hi there 5%\n"
    assert command_of(result, 4) == "echo $GREETING 5%"


def test_names_are_deterministic_and_valid() -> None:
    first = parse("system.crontab", system=True)
    again = parse("system.crontab", system=True)
    assert [e.job for e in first.entries] == [e.job for e in again.entries]
    for entry in first.entries:
        assert re.match(NAME_PATTERN, entry.job.name)
    # a different command is a different job; the same command on another line too
    one = parse_crontab("0 1 * * * echo a\n", now=NOW).entries[0].job.name
    other = parse_crontab("0 1 * * * echo b\n", now=NOW).entries[0].job.name
    moved = parse_crontab("\n0 1 * * * echo a\n", now=NOW).entries[0].job.name
    assert len({one, other, moved}) == 3


def test_job_name_sanitises_stem_and_user() -> None:
    name = job_name("my crontab (old)!" + "x" * 200, 12, "abcdef01", user="svc$")
    assert re.match(NAME_PATTERN, name)
    assert name.startswith("crontab-my-crontab-old")
    assert name.endswith("-svc-12-abcdef01")
    assert job_name("crontab", 3, "00000000") == "crontab-3-00000000"


def test_user_crontab_imported_as_system_names_the_mistake() -> None:
    result = parse_crontab("0 5 * * * /usr/bin/backup.sh --all\n", system=True, now=NOW)
    assert result.entries == []
    assert "not a user name" in result.rejected[0].message


def test_never_firing_schedule_and_missing_command_are_rejected() -> None:
    result = parse_crontab("0 0 30 2 * echo never\n0 0 * * *   \n@daily\n* * * * * %only stdin\n", now=NOW)
    assert result.entries == []
    assert [n.line for n in result.rejected] == [1, 2, 3, 4]
    assert "never fires" in result.rejected[0].message


def test_cron_tz_unset_returns_to_default_zone_and_bad_default_rejects() -> None:
    text = "CRON_TZ=Asia/Tokyo\n0 1 * * * a\nCRON_TZ=\n0 1 * * * b\n"
    result = parse_crontab(text, now=NOW, default_timezone="Europe/Paris")
    assert [e.job.timezone for e in result.entries] == ["Asia/Tokyo", "Europe/Paris"]

    bad = parse_crontab("0 1 * * * a\n", now=NOW, default_timezone="PST")
    assert bad.entries == []
    assert "abbreviation" in bad.rejected[0].message


def test_job_defaults_override_cron_behaviour_and_bad_random_delay() -> None:
    result = parse_crontab(
        "RANDOM_DELAY=soon\n-*/5 * * * * /bin/true\n",
        now=NOW,
        job_defaults={"retry": {"max_attempts": 3}, "missed": "catch_up", "timeout_s": 60},
    )
    job = result.entries[0].job
    assert (job.retry.max_attempts, job.missed, job.timeout_s) == (3, MissedPolicy.CATCH_UP, 60)
    assert job.schedule == "*/5 * * * *"  # cronie's leading "-" (no syslog) is dropped
    assert [(n.line, n.rejected) for n in result.notices] == [(1, True)]


def test_quoted_environment_values() -> None:
    result = parse_crontab('GREETING = \'a b\'\n"ODD"="x"\n* * * * * echo $GREETING\n', now=NOW)
    assert command_of(result, 3) == "echo $GREETING"
    assert target_of(result, 3).env == {"GREETING": "a b", "ODD": "x"}


def test_entries_without_variables_keep_their_names_and_variables_join_the_hash() -> None:
    # Given the same entry without and with a variable in force
    plain = parse_crontab("0 1 * * * echo a\n", now=NOW).entries[0].job.name
    with_env = parse_crontab("FOO=1\n0 1 * * * echo a\n", now=NOW).entries[0].job.name
    # Then the plain entry's name hashes its schedule, zone, command, user and jitter as before env maps
    source = json.dumps(["0 1 * * *", "UTC", "echo a", None, 0], separators=(",", ":"))
    assert plain == f"crontab-1-{hashlib.sha256(source.encode()).hexdigest()[:8]}"
    # and a variable makes it another job
    assert with_env.rsplit("-", 1)[1] != plain.rsplit("-", 1)[1]
