"""The bodies of local mode's background threads (``jobsched.local.runtime.LocalRuntime`` starts them): the
scheduler loops, the sweeper, the change pump and the SQLite WALs' sync, each until its stop event is set."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobsched.lambda_context import LocalLambdaContext
from jobsched.local.embedded_aws import REGION, release_moto_bookkeeping
from jobsched.observability import logger

if TYPE_CHECKING:
    from jobsched.clock import Clock
    from jobsched.local.state import TableMirror
    from jobsched.runtime.wiring import Components

SWEEP_EVENT = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
"""The event the sweeper handler is called with (EventBridge's scheduled event)."""


def waiter(stop: threading.Event) -> Callable[[float], None]:
    """A sleep that ends early when ``stop`` is set (so a stop never waits for a scheduler's second)."""

    def wait(seconds: float) -> None:
        stop.wait(seconds)

    return wait


def run_loop(loop: Any, stop: threading.Event) -> None:
    """Run a scheduler loop (``SchedulerGroup.run``) until ``stop`` is set; a crash is logged."""
    try:
        loop.run(lambda: not stop.is_set())
    except Exception:
        logger.exception("scheduler loop crashed")


def join(threads: list[threading.Thread], timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for each of ``threads`` to end; one still running is logged."""
    for thread in threads:
        thread.join(timeout=timeout_s)
        if thread.is_alive():
            logger.warning("thread did not stop in time", thread=thread.name)


def sweep_loop(
    components: Components,
    stop: threading.Event,
    interval_s: float,
    reap: Callable[[int], Any] | None,
    clock: Clock,
) -> None:
    """Call the sweeper Lambda handler every ``interval_s`` seconds until ``stop`` is set, on a
    ``SweeperRuntime`` of ``components`` that sweeps and recounts only (no DynamoDB upkeep passes), then
    ``reap`` (the SQLite database's retention, as DynamoDB's TTL; None on ``moto``, whose snapshotter drops
    expired items) at ``clock``'s now (epoch ms). A failed sweep is logged; the next comes at the next interval."""
    from jobsched.handlers.sweeper import handler
    from jobsched.runtime.sweeper import SweeperRuntime

    runtime = SweeperRuntime(components, upkeep=False)
    while not stop.is_set():
        try:
            context = LocalLambdaContext("jobsched-sweeper-local", timeout_s=60, region=REGION)
            handler(SWEEP_EVENT, context, runtime=runtime)
            if reap is not None:
                reap(clock())
        except Exception:
            logger.exception("sweeper failed; next sweep in a minute")
        if stop.wait(interval_s):
            return


def sync_loop(stop: threading.Event, *files: Any) -> None:
    """Sync the SQLite WALs to the disk each second (``checkpoint()`` of the database and the run queue) until
    ``stop`` is set; a failed checkpoint is logged and retried."""
    while not stop.wait(1.0):
        for file in files:
            try:
                file.checkpoint()
            except Exception:
                logger.exception("SQLite checkpoint failed; retrying")


def pump_loop(mirror: TableMirror, stop: threading.Event, poll_s: float) -> None:
    """Apply the write journal (printing run lines) every ``poll_s`` seconds until ``stop`` is set; every ~5 s
    let moto forget the objects it tracks (``release_moto_bookkeeping``), so memory follows the data, not the
    traffic. A failed poll is logged and retried."""
    polls = 0
    while not stop.wait(poll_s):
        polls += 1
        try:
            mirror.poll()
            if polls % max(1, round(5 / poll_s)) == 0:
                release_moto_bookkeeping()
        except Exception:
            logger.exception("change pump failed; retrying")
