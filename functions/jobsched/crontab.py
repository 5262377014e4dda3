"""Vixie/cronie crontab import: a pure parser that turns a crontab's text into ``JobCreate`` models.

Pure: no I/O, no clock reads, no environment (the caller passes the text, the file's name, the default
zone and "now"). The format is the one documented in crontab(5) of Vixie cron and cronie:

- Blank lines and lines whose first non-blank character is ``#`` are ignored; fields are separated by
  spaces or tabs; leading blanks are fine. A ``#`` after an entry is part of its command, as in cron.
- ``NAME = value`` lines set the environment of the entries after them (a value may be quoted with
  ``'`` or ``"``). cron tries an environment setting first, then an entry, on every line.
- User crontabs: 5 time fields then the command. System crontabs (``/etc/crontab``, ``/etc/cron.d/*``):
  5 time fields, the user, then the command. ``@hourly @daily @midnight @weekly @monthly @yearly
  @annually`` replace the 5 fields; ``@reboot`` has no schedule here and is reported and skipped.
  A leading ``-`` on the first field (cronie: "do not syslog this job") is accepted and dropped.
- ``%``: an unescaped ``%`` ends the command; the rest of the line, each further unescaped ``%`` turned
  into a newline, is the command's standard input (ending with a newline); ``\\%`` is a literal ``%``
  (Vixie cron ``do_command.c``).

How the environment is honoured (each entry becomes a job with a ``shell`` target):

- ``CRON_TZ`` (and ``TZ``, which also reaches the command's environment) set the time zone of the
  entries after them; without either, entries use ``default_timezone`` (cron uses the machine's zone).
- ``SHELL`` runs the command through that shell (the target's ``shell``; cron's default ``/bin/sh``).
- ``PATH``, ``HOME`` and every other setting reach the command's environment as the target's ``env`` map;
  the target's ``command`` stays the command the user wrote (with standard input from ``%``, it is run
  by the shell with that input piped in through ``printf``).
- ``RANDOM_DELAY`` (cronie, minutes) becomes the job's ``jitter_s``.
- ``MAILTO``/``MAILFROM`` cannot be honoured (jobsched sends no mail: a run that fails all its tries is
  dead-lettered and alerted on the alerts topic): reported, not an error.

Imported jobs keep cron's behaviour by default (``CRON_JOB_DEFAULTS``): one try (cron never retries)
and missed fires skipped (cron does not catch up after downtime); callers may override both.

Job names are deterministic, ``crontab[-<file stem>][-<user>]-<line>-<8 hex of the entry's hash>``,
so importing the same file again yields the same jobs and the API answers 200 for each (design §3:
an identical spec under an existing name).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from jobsched.api.schemas import JobCreate
from jobsched.models import ENV_NAME
from jobsched.schedule.engine import ScheduleError, get_zone, validate_schedule

__all__ = [
    "CRON_JOB_DEFAULTS",
    "Crontab",
    "CrontabEntry",
    "CrontabNotice",
    "job_name",
    "parse_crontab",
    "split_percent",
]

CRON_JOB_DEFAULTS: Mapping[str, Any] = {"retry": {"max_attempts": 1}, "missed": "skip"}
"""Job fields an imported entry gets unless the caller overrides them: cron's own behaviour."""

MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
NOT_EXPORTED = {
    "CRON_TZ",
    "SHELL",
    "MAILTO",
    "MAILFROM",
    "RANDOM_DELAY",
    "CONTENT_TYPE",
    "CONTENT_TRANSFER_ENCODING",
}
DEFAULT_SHELL = "/bin/sh"

_ENV_LINE = re.compile(
    r"""^\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s='"]+))\s*=\s*(?P<value>.*?)\s*$"""
)
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]{0,31}\$?$")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class CrontabEntry:
    """One importable entry: ``line`` (1-based) of the file, ``user`` (system crontabs), the job to create."""

    line: int
    text: str
    user: str | None
    job: JobCreate


@dataclass(frozen=True)
class CrontabNotice:
    """Something said about line ``line``. ``rejected``: the line could not be imported (exit non-zero);
    otherwise it is information (a skipped ``@reboot``, an ignored ``MAILTO``)."""

    line: int
    message: str
    rejected: bool = True


@dataclass
class Crontab:
    """The result of parsing one crontab: the entries to import and what was said about other lines."""

    entries: list[CrontabEntry] = field(default_factory=list)
    notices: list[CrontabNotice] = field(default_factory=list)

    @property
    def rejected(self) -> list[CrontabNotice]:
        """Lines that could not be imported."""
        return [n for n in self.notices if n.rejected]


@dataclass
class _Env:
    """The environment in force at a line of the file."""

    default_zone: str
    zone: str = ""
    zone_error: tuple[int, str] | None = None  # (line, message) of a bad CRON_TZ/TZ in force
    shell: str | None = None
    jitter_s: int = 0
    exported: dict[str, str] = field(default_factory=dict)
    cron_tz: str | None = None
    tz: str | None = None
    bad_zones: dict[str, tuple[int, str]] = field(default_factory=dict)


def split_percent(command: str) -> tuple[str, str | None]:
    """Split a crontab command at its first unescaped ``%`` (Vixie cron ``do_command.c``).

    Returns ``(command, stdin)``: in the command ``\\%`` becomes ``%`` (other backslashes are kept);
    ``stdin`` is None when there is no unescaped ``%``, else the text after it with each unescaped ``%``
    turned into a newline, ``\\%`` into ``%``, and a final newline added when missing.
    """
    out: list[str] = []
    escaped = False
    for index, ch in enumerate(command):
        if escaped:
            if ch == "%":
                out[-1] = "%"
            else:
                out.append(ch)
            escaped = False
            continue
        if ch == "%":
            return "".join(out), _stdin_text(command[index + 1 :])
        escaped = ch == "\\"
        out.append(ch)
    return "".join(out), None


def _stdin_text(data: str) -> str:
    out: list[str] = []
    escaped = False
    need_newline = False
    for ch in data:
        if escaped:
            if ch != "%":
                out.append("\\")
        elif ch == "%":
            ch = "\n"
        escaped = ch == "\\"
        if not escaped:
            out.append(ch)
            need_newline = ch != "\n"
    if escaped:
        out.append("\\")
    if need_newline:
        out.append("\n")
    return "".join(out)


def _env_value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw


def _parse_env(text: str) -> tuple[str, str] | None:
    match = _ENV_LINE.match(text)
    if not match:
        return None
    name = match.group("dq") or match.group("sq") or match.group("bare")
    if not name:
        return None
    return name, _env_value(match.group("value"))


def job_name(stem: str, line: int, digest: str, user: str | None = None) -> str:
    """The deterministic job name of an entry: ``crontab[-<stem>][-<user>]-<line>-<digest>``.

    ``stem`` (the file's name without suffix) and ``user`` are reduced to ``[A-Za-z0-9._-]`` and shortened
    so the name fits the API's pattern ``[A-Za-z0-9._-]{1,128}``.
    """
    parts = ["crontab"]
    clean_stem = _NAME_UNSAFE.sub("-", stem).strip("-.")[:60]
    if clean_stem and clean_stem != "crontab":
        parts.append(clean_stem)
    if user:
        parts.append(_NAME_UNSAFE.sub("-", user).strip("-.")[:32] or "user")
    parts += [str(line), digest]
    return "-".join(parts)


def _shell_command(command: str, stdin: str | None, shell: str) -> str:
    """The command line as the user wrote it; with ``%`` standard input, the command run by ``shell`` with
    that input piped in (as cron feeds the whole command's shell)."""
    if stdin is None:
        return command
    return f"printf '%s' {shlex.quote(stdin)} | {shlex.quote(shell)} -c {shlex.quote(command)}"


def _shell_target(command: str, stdin: str | None, env: _Env) -> dict[str, Any]:
    """The ``shell`` target of an entry: the command, the crontab's variables as ``env``, its ``SHELL``."""
    target: dict[str, Any] = {
        "type": "shell",
        "command": _shell_command(command, stdin, env.shell or DEFAULT_SHELL),
    }
    if env.exported:
        target["env"] = dict(env.exported)
    if env.shell and env.shell != DEFAULT_SHELL:
        target["shell"] = env.shell
    return target


def _set_zone(env: _Env, line: int, value: str) -> CrontabNotice | None:
    """Recompute the zone in force after a CRON_TZ/TZ line setting ``value`` (CRON_TZ wins over TZ; with
    neither, the default). Returns a notice when ``value`` itself is not a valid zone."""
    notice = None
    if value:
        try:
            get_zone(value)
        except ScheduleError as error:
            env.bad_zones[value] = (line, error.message)
            notice = CrontabNotice(line, f"time zone: {error.message}")
    zone = env.cron_tz or env.tz or env.default_zone
    if zone in env.bad_zones:
        env.zone_error = env.bad_zones[zone]
    else:
        env.zone, env.zone_error = zone, None
    return notice


def _apply_env(env: _Env, line: int, name: str, value: str, said: set[str]) -> CrontabNotice | None:
    """Record an environment setting; returns a notice about it, if any."""
    if name == "CRON_TZ":
        env.cron_tz = value or None
        return _set_zone(env, line, value)
    if name == "TZ":
        env.tz = value or None
        if value:
            env.exported["TZ"] = value
        else:
            env.exported.pop("TZ", None)
        return _set_zone(env, line, value)
    if name == "SHELL":
        env.shell = value or None
        return None
    if name == "RANDOM_DELAY":
        if not value.isdigit():
            return CrontabNotice(line, f"RANDOM_DELAY must be a whole number of minutes, not {value!r}")
        env.jitter_s = min(int(value) * 60, 86400)
        return None
    if name in NOT_EXPORTED:  # the mail settings
        if name in said or (name == "MAILTO" and value == ""):
            return None
        said.add(name)
        return CrontabNotice(
            line,
            f"{name} ignored: jobsched sends no mail; a run that fails all its tries is dead-lettered "
            "and alerted on the alerts topic",
            rejected=False,
        )
    if not ENV_NAME.fullmatch(name):
        return CrontabNotice(
            line,
            f"{name} ignored: a job's environment takes variable names ([A-Za-z_][A-Za-z0-9_]*, not JOBSCHED_*)",
            rejected=False,
        )
    env.exported[name] = value
    return None


def _split_fields(text: str, count: int) -> tuple[list[str], str] | None:
    """The first ``count`` blank-separated fields of ``text`` and the rest (blanks after them dropped)."""
    pattern = r"^\s*" + r"(\S+)\s+" * count + r"(.*)$"
    match = re.match(pattern, text, re.DOTALL)
    if not match:
        return None
    groups = list(match.groups())
    return groups[:count], groups[count]


def parse_crontab(
    text: str,
    *,
    stem: str = "crontab",
    source: str = "crontab",
    system: bool = False,
    default_timezone: str = "UTC",
    now: datetime,
    job_defaults: Mapping[str, Any] = CRON_JOB_DEFAULTS,
) -> Crontab:
    """Parse a Vixie/cronie crontab into jobs with ``shell`` targets (the format: see the module docstring).

    ``stem`` names the jobs (usually the file's name without suffix), ``source`` (e.g. the path) is
    recorded in each job's ``input``; ``system`` expects a user field before each command; entries run in
    ``default_timezone`` (an IANA name) until a ``CRON_TZ``/``TZ`` line; ``now`` (aware datetime) is the
    registration instant the schedules are validated at (``schedules.validate_schedule``);
    ``job_defaults`` are extra ``JobCreate`` fields for every job (default: one try, missed fires skipped).

    Never raises for bad content: each line that cannot become a job is a ``CrontabNotice`` with
    ``rejected=True`` naming the line; the other lines still yield entries.
    """
    result = Crontab()
    env = _Env(default_zone=default_timezone)
    _set_zone(env, 0, default_timezone)
    said: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        setting = _parse_env(raw)
        if setting is not None:
            notice = _apply_env(env, number, *setting, said)
            if notice:
                result.notices.append(notice)
            continue
        outcome = _parse_entry(raw.rstrip("\r\n"), number, env, stem, source, system, now, job_defaults)
        if isinstance(outcome, CrontabEntry):
            result.entries.append(outcome)
        else:
            result.notices.append(outcome)
    return result


def _parse_entry(
    raw: str,
    number: int,
    env: _Env,
    stem: str,
    source: str,
    system: bool,
    now: datetime,
    job_defaults: Mapping[str, Any],
) -> CrontabEntry | CrontabNotice:
    text = raw.lstrip(" \t")
    if text.startswith("-"):  # cronie: "-" before the first field turns off syslog for the job
        text = text[1:]
    user_hint = " and a user" if system else ""
    if text.startswith("@"):
        split = _split_fields(text, 1)
        keyword = (split[0][0] if split else text.strip()).lower()
        if keyword == "@reboot":
            return CrontabNotice(number, "@reboot skipped: jobsched has no reboot event", rejected=False)
        if keyword not in MACROS:
            return CrontabNotice(
                number, f"unknown macro {keyword!r}: expected one of {', '.join(('@reboot', *MACROS))}"
            )
        if split is None:
            return CrontabNotice(number, f"{keyword} needs{user_hint} a command after it")
        schedule, rest = keyword, split[1]
    else:
        split = _split_fields(text, 5)
        if split is None:
            return CrontabNotice(
                number, f"not a crontab entry: expected 5 time fields{user_hint} and a command, or NAME=value"
            )
        schedule, rest = " ".join(split[0]), split[1]
    user: str | None = None
    if system:
        user_split = _split_fields(rest, 1)
        if user_split is None:
            return CrontabNotice(
                number, "system crontab entry needs a user and a command after the time fields"
            )
        user, rest = user_split[0][0], user_split[1]
        if not _USER.match(user):
            return CrontabNotice(
                number,
                f"{user!r} is not a user name: a system crontab entry has a user between the time fields "
                "and the command (import a user's crontab without --system)",
            )
    command, stdin = split_percent(rest)
    if not command.strip():
        return CrontabNotice(number, "entry has no command")
    if env.zone_error is not None:
        line, message = env.zone_error
        where = f" (set on line {line})" if line else ""
        return CrontabNotice(number, f"no valid time zone for this entry{where}: {message}")
    try:
        validate_schedule(schedule, env.zone, now=now)
    except ScheduleError as error:
        return CrontabNotice(number, f"{error.field}: {error.message}")
    target = _shell_target(command, stdin, env)
    # The target's environment and shell join the hash only when set, so an entry without them keeps the
    # name it had when variables were pasted into the command (one stable name per entry across versions).
    extra = [target.get("env", {}), target.get("shell")] if ("env" in target or "shell" in target) else []
    hashed = [schedule, env.zone, target["command"], user, env.jitter_s, *extra]
    digest_source = json.dumps(hashed, separators=(",", ":"))
    digest = hashlib.sha256(digest_source.encode()).hexdigest()[:8]
    details: dict[str, Any] = {"source": f"{source}:{number}", "entry": raw.strip()}
    if user is not None:
        details["user"] = user
    body: dict[str, Any] = {
        **job_defaults,
        "name": job_name(stem, number, digest, user),
        "schedule": schedule,
        "timezone": env.zone,
        "target": target,
        "input": {"crontab": details},
    }
    if env.jitter_s:
        body["jitter_s"] = env.jitter_s
    try:
        job = JobCreate.model_validate(body)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "entry"
        return CrontabNotice(number, f"{where}: {first['msg']}")
    return CrontabEntry(line=number, text=raw, user=user, job=job)
