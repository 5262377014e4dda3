"""Recording a try's outcome (``succeeded``, ``retrying``, ``dead``) against transient storage errors: the worker
knows the outcome and must write it before it lets the run go, or a takeover would find the run ``running``
with a stale heartbeat, count the try as a lost worker's, and run a succeeded target again or record it dead.

The rule (``OutcomeWrites``): the outcome's one conditional write is retried on ``StoreUnavailable`` with a
back-off (``FIRST_BACKOFF_S``, doubled up to ``MAX_BACKOFF_S``) until it lands, is refused, or ``until_ms``
passes; between retries the worker keeps holding the run as it did during the try (``Heartbeat.hold`` every
``beat_every_ms``: the row's ``heartbeat_at`` and the message's visibility). A refused write is not retried: the
row is read once to tell the worker's own write that landed before its answer was lost (the row shows the outcome
under this claim) from a takeover.

The promise: a takeover of a ``running`` run needs its last recorded beat to be ``heartbeat_stale_s`` old (every
claim's condition, the sweeper's too), and its message comes back only once the worker stops extending its
visibility. The worker keeps trying the outcome, beating every ``heartbeat_interval_s``, until ``until_ms =
min(try end + heartbeat_stale_s, invocation end - OUTCOME_RESERVE_S)``. So a takeover finds a finished try's run
``running`` only when the outcome could not be stored: every try of its write failed until the worker stopped
(and, for a takeover before then, every beat failed for ``heartbeat_stale_s`` too). The record then fails, and the
run is recovered as a lost worker's (its try counts as failed): the one case left where a try that succeeded may
run again or be recorded dead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from jobsched.clock import Clock
from jobsched.domain.supervision import Heartbeat, Waiter
from jobsched.models import RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.run_stores import RunRows
from jobsched.ports.runs import Owned

logger = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.2
"""The first pause before an outcome write is tried again (seconds); doubled after each failure."""
MAX_BACKOFF_S = 5.0
"""The longest pause between two tries of an outcome write (seconds)."""
OUTCOME_RESERVE_S = 5
"""Seconds of the invocation kept after the last try of an outcome write, for what follows it (the retry or
dead-run message, the alert, the overlap lock's release)."""


class OutcomeWrite(Protocol):
    """Performs one outcome write: ``write()`` is the conditional write (True: written, False: refused, raises
    ``StoreUnavailable``); ``status`` and ``attempt`` are what the row shows once it landed under the claim.
    Returns whether it is written."""

    def __call__(self, write: Callable[[], bool], *, status: RunStatus, attempt: int) -> bool: ...


def write_once(write: Callable[[], bool], *, status: RunStatus, attempt: int) -> bool:
    """The ``OutcomeWrite`` that tries once (the sweeper's: its pass comes again)."""
    return write()


@dataclass(kw_only=True, eq=False)
class OutcomeWrites:
    """The worker's ``OutcomeWrite`` for the claim ``owned`` (see the module docstring). ``until_ms`` and every
    instant are epoch ms (``clock``); ``waiter.sleep`` pauses between tries. Raises the last
    ``StoreUnavailable`` when ``until_ms`` passes without the write landing (or the read after a refusal
    fails)."""

    runs: RunRows
    owned: Owned
    heartbeat: Heartbeat
    clock: Clock
    waiter: Waiter
    beat_every_ms: int
    until_ms: int

    def __call__(self, write: Callable[[], bool], *, status: RunStatus, attempt: int) -> bool:
        backoff_s = FIRST_BACKOFF_S
        failures = 0
        beat_at = (self.heartbeat.last_ok_ms or self.clock()) + self.beat_every_ms
        while True:
            try:
                if write():
                    return True
                # refused: after a failure, the failed write itself may have landed (its answer lost)
                return failures > 0 and self._landed(status, attempt)
            except StoreUnavailable as error:
                failures += 1
                if self.clock() + backoff_s * 1000 > self.until_ms:
                    logger.error(
                        "outcome not recorded: the run store kept failing",
                        extra={
                            "run_id": self.owned.run_id,
                            "status": status.value,
                            "failures": failures,
                            "error": str(error),
                        },
                    )
                    raise
                logger.warning(
                    "outcome write failed; trying again",
                    extra={
                        "run_id": self.owned.run_id,
                        "status": status.value,
                        "failures": failures,
                        "retry_in_s": backoff_s,
                        "error": str(error),
                    },
                )
            self.waiter.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)
            now = self.clock()
            if now >= beat_at:
                beat_at = now + self.beat_every_ms
                if not self.heartbeat.hold(now):
                    return self._landed(status, attempt)  # the row left this claim: our write, or a takeover

    def _landed(self, status: RunStatus, attempt: int) -> bool:
        """Whether the row shows the outcome ``status`` written under this claim (``attempt``, the worker)."""
        row = self.runs.get(self.owned.job_id, self.owned.scheduled_for)
        landed = (
            row is not None
            and row.status is status
            and row.attempt == attempt
            and row.worker == self.owned.worker
        )
        if landed:
            logger.info("outcome found recorded after a failed write", extra={"run_id": self.owned.run_id})
        return landed
