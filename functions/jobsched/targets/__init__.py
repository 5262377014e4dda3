"""How a worker runs a run: one executor per target type (design §5.5), behind ``Targets`` (the worker's
``TargetRunner`` port).

What every target receives and how a try fails are the port's (``jobsched.ports.targets``: ``TargetCall``,
``TargetFailed``, ``Executor``); here are ``commands``, the registry of ``command`` targets
(``@command("name")``), and ``http``, ``aws`` (lambda, sqs) and ``shell``, the other executors. The worker's
supervisor (``jobsched.domain.supervision.supervise``) applies the timeout to all.
"""

from __future__ import annotations

from typing import Any

from jobsched.models import CommandTarget, HttpTarget, LambdaTarget, ShellTarget, SqsTarget
from jobsched.ports.targets import Executor, TargetCall, TargetFailed
from jobsched.targets.commands import CommandExecutor, CommandRegistry, command, commands

__all__ = ["CommandExecutor", "CommandRegistry", "Targets", "command", "commands"]


class Targets:
    """Dispatches a target to the executor of its ``type``. An executor left out (None) fails the try
    with a message saying this worker cannot run that target type."""

    def __init__(
        self,
        *,
        http: Executor | None = None,
        lambda_: Executor | None = None,
        sqs: Executor | None = None,
        command: Executor | None = None,
        shell: Executor | None = None,
    ) -> None:
        self._by_type: dict[type, Executor | None] = {
            HttpTarget: http,
            LambdaTarget: lambda_,
            SqsTarget: sqs,
            CommandTarget: command if command is not None else CommandExecutor(),
            ShellTarget: shell,
        }

    def execute(self, target: Any, call: TargetCall) -> str:
        """Run one try of ``call`` against ``target``; returns a short result; raises ``TargetFailed``."""
        executor = self._by_type.get(type(target))
        if executor is None:
            raise TargetFailed(f"this worker cannot run {getattr(target, 'type', '?')} targets")
        return executor.execute(target, call)
