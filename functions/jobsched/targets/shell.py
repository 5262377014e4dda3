"""``shell`` targets: ``/bin/sh -c <command>`` (or the target's ``shell``) in its own process group.

Only where the deployment enables them (``Settings.allow_shell_targets``; local mode does, AWS does not by
default since the command would run with the worker's role), and, in local mode with a tokens file, only for
owners that file grants them (``shell_owner_refusal``); otherwise the try fails saying so.

The command gets ``JOBSCHED_RUN_ID`` (its idempotency key), ``JOBSCHED_JOB_ID``,
``JOBSCHED_SCHEDULED_FOR`` (ISO 8601 UTC), ``JOBSCHED_ATTEMPT`` and, in a chained run, ``JOBSCHED_UPSTREAM_RUN_ID``
(design §2.1) on top of the worker's environment and
the target's ``env``;
``input`` on stdin: a string as is, null as nothing, anything else as JSON. Exit status 0 is success;
otherwise the try fails with the tail of stderr. Past ``timeout_s`` (or when the worker cancels the try)
the whole process group is stopped (SIGTERM, then SIGKILL after the job's ``cancel_grace_s``), children included. Output goes to temporary files, so a
chatty command cannot fill the worker's memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from typing import IO

from jobsched.models import ShellTarget
from jobsched.ports.targets import TargetCall, TargetFailed, TargetTimedOut, output_limit, tail, tail_bytes

SHELL = "/bin/sh"
STDERR_TAIL_CHARS = 1000


def stdin_bytes(value: object) -> bytes:
    """What a shell command reads on stdin for job input ``value`` (see the module docstring)."""
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


def shell_owner_refusal(owner: str | None, owners: frozenset[str] | None) -> str | None:
    """Why ``owner`` may not use ``shell`` targets, or None when it may: ``owners`` None lets every owner (the
    deployment's switch decides alone), else only those in it (local mode with a tokens file: the owners of
    tokens marked ``"shell": true``, ``jobsched.api.auth.shell_owners``). The API refuses such a job (400 on
    ``target``) and the worker such a try."""
    if owners is None or owner in owners:
        return None
    return (
        f"shell targets are not allowed for owner {owner!r}: they run commands as the user running jobsched "
        'local, so only owners with a token marked "shell": true in the tokens file may use them'
    )


class ShellExecutor:
    """Runs ``shell`` targets when ``enabled``, for the jobs of ``owners`` (None: every owner;
    ``shell_owner_refusal``); ``base_env`` is the environment the command inherits."""

    def __init__(
        self,
        *,
        enabled: bool,
        base_env: dict[str, str] | None = None,
        owners: frozenset[str] | None = None,
    ) -> None:
        self.enabled = enabled
        self.owners = owners
        self.base_env = dict(os.environ) if base_env is None else base_env

    def execute(self, target: ShellTarget, call: TargetCall) -> str:
        """Run the command to completion (or kill it at ``call.timeout_s``); see the module docstring.

        Raises ``TargetFailed`` (disabled, not for ``call.owner``, cannot start, non-zero exit) or
        ``TargetTimedOut`` (killed).
        """
        if not self.enabled:
            raise TargetFailed(
                "shell targets are disabled in this deployment (set ALLOW_SHELL_TARGETS=true only where "
                "running commands with the worker's permissions is acceptable)"
            )
        refusal = shell_owner_refusal(call.owner, self.owners)
        if refusal is not None:
            raise TargetFailed(refusal)
        env = {
            **self.base_env,
            "SHELL": target.shell or SHELL,  # as cron does: the command sees the shell that runs it
            **target.env,
            "JOBSCHED_RUN_ID": call.run_id,
            "JOBSCHED_JOB_ID": call.job_id,
            "JOBSCHED_SCHEDULED_FOR": call.scheduled_for,
            "JOBSCHED_ATTEMPT": str(call.attempt),
            **({"JOBSCHED_UPSTREAM_RUN_ID": call.upstream_run_id} if call.upstream_run_id else {}),
        }
        with (
            tempfile.TemporaryFile() as stdin,
            tempfile.TemporaryFile() as stdout,
            tempfile.TemporaryFile() as stderr,
        ):
            stdin.write(stdin_bytes(call.input))
            stdin.seek(0)
            try:
                process = subprocess.Popen(
                    [target.shell or SHELL, "-c", target.command],
                    stdin=stdin,
                    stdout=stdout,
                    stderr=stderr,
                    env=env,
                    start_new_session=True,  # its own process group: killed as a whole
                )
            except OSError as error:
                raise TargetFailed(f"shell command could not start: {error}") from error
            call.cancel.on_cancel(lambda: _kill_group(process, call.stop_grace_s))
            try:
                code = process.wait(timeout=call.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(process, call.stop_grace_s)
                raise TargetTimedOut(
                    f"timed out after {call.timeout_s:g} s (timeout_s); shell command killed"
                ) from None
            if call.cancel.cancelled:
                raise TargetTimedOut("shell command killed: the try was cancelled")
            call.output = _output(stdout, stderr, output_limit(code != 0))
            if code != 0:
                status = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
                message = _read_tail(stderr)
                raise TargetFailed(f"shell command failed ({status})" + (f": {message}" if message else ""))
            return f"shell exit 0: {_read_tail(stdout, 200)}"


def _kill_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """Stop the command's whole process group: SIGTERM, then, once the command has exited or after
    ``grace_s`` (the job's ``cancel_grace_s``), SIGKILL to what is left of the group (children that ignore or outlive the TERM). Returns
    when the command itself has exited."""
    _signal_group(process, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    _signal_group(process, signal.SIGKILL)
    process.wait()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _output(stdout: IO[bytes], stderr: IO[bytes], limit: int) -> str | None:
    """The tails of stdout and stderr within ``limit`` bytes in all (half each when both are long), labelled
    ``stdout:``/``stderr:``; None when the command printed nothing."""
    out, err = (_read_tail(stream, limit) for stream in (stdout, stderr))
    parts = [(label, text) for label, text in (("stdout", out), ("stderr", err)) if text]
    if not parts:
        return None
    share = (limit - 20 * len(parts)) // len(parts)
    sizes = [len(text.encode("utf-8")) for _, text in parts]
    if len(parts) == 2 and min(sizes) < share:
        spare = share - min(sizes)  # the short one's unused half goes to the other
        budgets = [size if size < share else share + spare for size in sizes]
    else:
        budgets = [share] * len(parts)
    return "\n".join(
        f"{label}: {tail_bytes(text, budget)}" for (label, text), budget in zip(parts, budgets, strict=True)
    )


def _read_tail(stream: IO[bytes], limit: int = STDERR_TAIL_CHARS) -> str:
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - 4 * limit))
    return tail(stream.read().decode("utf-8", "replace").strip(), limit)
