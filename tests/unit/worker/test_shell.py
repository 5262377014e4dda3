"""``shell`` targets: off by default, run-id environment, stdin, exit status, stderr tail, timeout kill."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from jobsched.models import ShellTarget
from jobsched.ports.targets import TargetCall, TargetFailed, TargetTimedOut
from jobsched.targets.shell import ShellExecutor, stdin_bytes
from tests.support.backends import memory_settings
from tests.support.processes import process_gone

T0 = 1_767_578_400_000


def _call(input: object = None, timeout_s: float = 5.0) -> TargetCall:
    return TargetCall(
        run_id=f"j_1@{T0}", job_id="j_1", scheduled_for_ms=T0, attempt=3, input=input, timeout_s=timeout_s
    )


SHELL = ShellExecutor(enabled=True, base_env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


def test_shell_targets_are_disabled_by_default() -> None:
    settings = memory_settings()
    assert settings.allow_shell_targets is False
    with pytest.raises(TargetFailed, match="shell targets are disabled in this deployment"):
        ShellExecutor(enabled=settings.allow_shell_targets).execute(ShellTarget(command="true"), _call())


def test_a_shell_try_of_an_owner_not_granted_shell_fails_without_running(tmp_path: Path) -> None:
    # Given local mode's tokens grant shell targets to team-a only, and a job of team-b's with one
    marker = tmp_path / "ran"
    shell = ShellExecutor(enabled=True, base_env={}, owners=frozenset({"team-a"}))
    call = _call()
    call.owner = "team-b"
    with pytest.raises(TargetFailed, match="shell targets are not allowed for owner 'team-b'"):
        shell.execute(ShellTarget(command=f"touch {marker}"), call)
    assert not marker.exists()
    # while team-a's runs
    call.owner = "team-a"
    shell.execute(ShellTarget(command=f"touch {marker}"), call)
    assert marker.exists()


def test_the_command_gets_the_run_in_its_environment(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    command = f'echo "$JOBSCHED_RUN_ID $JOBSCHED_JOB_ID $JOBSCHED_SCHEDULED_FOR $JOBSCHED_ATTEMPT" > {out}'
    SHELL.execute(ShellTarget(command=command), _call())
    assert out.read_text().split() == [f"j_1@{T0}", "j_1", "2026-01-05T02:00:00Z", "3"]


def test_a_chained_run_gets_its_upstream_run_id_and_any_other_run_none(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    command = f'echo "${{JOBSCHED_UPSTREAM_RUN_ID-unset}}" >> {out}'
    call = _call()
    call.upstream_run_id = "j_0@1767578400000"  # a run the end of j_0's made (design §2.1)
    SHELL.execute(ShellTarget(command=command), call)
    SHELL.execute(ShellTarget(command=command), _call())
    assert out.read_text().split() == ["j_0@1767578400000", "unset"]


@pytest.mark.parametrize(
    ("input", "expected"),
    [("plain text\n", "plain text\n"), ({"a": [1, 2]}, '{"a":[1,2]}'), (None, ""), (7, "7")],
)
def test_input_on_stdin_a_string_as_is_else_json(tmp_path: Path, input: object, expected: str) -> None:
    out = tmp_path / "stdin.txt"
    SHELL.execute(ShellTarget(command=f"cat > {out}"), _call(input))
    assert out.read_text() == expected
    assert stdin_bytes(input) == expected.encode()


def test_exit_zero_succeeds_with_the_output_tail() -> None:
    assert SHELL.execute(ShellTarget(command="echo hello"), _call()) == "shell exit 0: hello"


def test_a_non_zero_exit_fails_with_the_tail_of_stderr() -> None:
    command = "for i in $(seq 1 400); do echo line-$i >&2; done; echo 'disk full' >&2; exit 3"
    with pytest.raises(TargetFailed) as failure:
        SHELL.execute(ShellTarget(command=command), _call())
    message = str(failure.value)
    assert message.startswith("shell command failed (exit status 3): ...")
    assert message.endswith("disk full")
    assert "line-1\n" not in message and len(message) < 1100


def test_a_command_past_its_timeout_is_killed_with_its_process_group(tmp_path: Path) -> None:
    # Given a command whose child sleeps 30 s, and a real 1 s timeout (the executor's own limit)
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(TargetTimedOut, match=r"timed out after 1 s .*killed"):
        SHELL.execute(ShellTarget(command=f"sleep 30 & echo $! > {pidfile}; wait"), _call(timeout_s=1))
    # Then it returned without waiting for the child, and the child was killed with its group
    assert time.monotonic() - started < 20
    assert process_gone(int(pidfile.read_text()))


def test_cancelling_the_try_kills_the_command(tmp_path: Path) -> None:
    import threading

    call = _call(timeout_s=60)
    threading.Timer(0.2, call.cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(TargetTimedOut, match="cancelled"):
        SHELL.execute(ShellTarget(command="sleep 60"), call)
    assert time.monotonic() - started < 30  # killed at the cancel, long before its 60 s


def test_a_command_that_cannot_start_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jobsched.targets.shell.SHELL", "/nonexistent/sh")
    with pytest.raises(TargetFailed, match="could not start"):
        SHELL.execute(ShellTarget(command="true"), _call())


def test_json_input_round_trips() -> None:
    assert json.loads(stdin_bytes({"k": "v"})) == {"k": "v"}


def test_the_targets_env_and_shell_are_used(tmp_path: Path) -> None:
    # Given a target with its own variables (a crontab's PATH, GREETING) and shell
    out = tmp_path / "env.txt"
    target = ShellTarget(
        command=f'echo "$GREETING $0" > {out}', env={"GREETING": "hi there"}, shell="/bin/bash"
    )
    # When it runs, Then the command sees the variables and runs in that shell
    SHELL.execute(target, _call())
    assert out.read_text() == "hi there /bin/bash\n"


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"env": {"1BAD": "x"}}, "not a variable name"),
        ({"env": {"JOBSCHED_RUN_ID": "x"}}, "set by the worker"),
        ({"env": {"A": "x\0y"}}, "no NUL"),
        ({"shell": "bash"}, "absolute path"),
    ],
)
def test_bad_env_or_shell_is_refused(fields: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        ShellTarget.model_validate({"command": "true", **fields})


def test_env_and_shell_are_stored_only_when_set() -> None:
    bare = ShellTarget(command="true")
    full = ShellTarget(command="true", env={"PATH": "/bin"}, shell="/bin/bash")
    assert bare.model_dump() == {"type": "shell", "command": "true"}
    assert ShellTarget.model_validate_json(full.model_dump_json()) == full
    assert full.model_dump() == {
        "type": "shell",
        "command": "true",
        "env": {"PATH": "/bin"},
        "shell": "/bin/bash",
    }


# --- what a try records (design §5.7) ----------------------------------------------------------------


def test_the_output_is_the_tail_of_stdout_and_stderr() -> None:
    ok = _call()
    SHELL.execute(ShellTarget(command="seq 1 2000; echo warn-end >&2"), ok)
    assert ok.output is not None and len(ok.output.encode()) <= 256
    assert ok.output.startswith("stdout: ...") and "2000\nstderr: warn-end" in ok.output
    failed = _call()
    with pytest.raises(TargetFailed):
        SHELL.execute(ShellTarget(command="echo started; seq 1 5000 >&2; exit 3"), failed)
    assert failed.output is not None and len(failed.output.encode()) <= 3072
    assert failed.output.startswith("stdout: started\nstderr: ...") and failed.output.endswith("5000")


def test_a_silent_command_has_no_output() -> None:
    call = _call()
    SHELL.execute(ShellTarget(command="true"), call)
    assert call.output is None


def test_a_timed_out_command_gets_sigterm_first_then_its_group_is_killed(tmp_path: Path) -> None:
    # Given a command that cleans up on SIGTERM (writes a mark) and whose child ignores SIGTERM
    mark, pidfile = tmp_path / "terminated", tmp_path / "pid"
    command = (
        f"trap 'echo term > {mark}; exit 143' TERM; (trap '' TERM; exec sleep 60) & echo $! > {pidfile}; wait"
    )
    # When it passes its 1 s timeout
    with pytest.raises(TargetTimedOut):
        SHELL.execute(ShellTarget(command=command), _call(timeout_s=1))
    # Then it was told first (its trap ran) and the child that ignored the TERM was killed with the group
    assert mark.read_text().strip() == "term"
    assert process_gone(int(pidfile.read_text()))
