"""The tries of a run as its row keeps them (``RunRow.tries``): one ``TryRecord`` per try the worker ran, written
with the try's result in the same conditional write (``succeed``/``retry``/``dead``), and the rules that keep a
row small however often a run is tried and re-run.

Sizes (bytes of UTF-8; a DynamoDB write costs one unit per started KiB of the larger of the item before and
after, and an item is at most 400 KB):

- a successful try keeps at most ``SUCCESS_OUTPUT_BYTES`` (256) of output, so the happy path's success write
  keeps a run row under 1 KiB (``tests/unit/bench/test_try_sizes.py`` measures it with ``bench.capacity``);
- a failed try keeps its error and output within ``FAILED_TRY_BYTES`` (4 KiB) together: the error first (at
  most ``FAILED_ERROR_BYTES``), the output in what is left;
- the newest ``FULL_TRIES`` entries keep their output; older ones keep attempt, instants, worker and the head
  of their error (``SUMMARY_ERROR_BYTES``), and at most ``MAX_TRIES`` entries are kept in all (the oldest go).
  So a row holds at most about 5 x 4.2 KiB + 25 x 0.4 KiB of tries (~31 KiB), whatever the history.

Every instant is epoch milliseconds (UTC)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from jobsched.models import RunAttempt, RunDetail, from_ms
from jobsched.ports.targets import SUCCESS_OUTPUT_BYTES, head_bytes

if TYPE_CHECKING:
    from jobsched.ports.runs import RunRow

FAILED_TRY_BYTES = 4096
FAILED_ERROR_BYTES = 1024
SUMMARY_ERROR_BYTES = 200
FULL_TRIES = 5
MAX_TRIES = 30


@dataclass(frozen=True)
class TryRecord:
    """One try of a run: its ``attempt`` (1-based within its round), ``started_at``/``finished_at`` (epoch ms;
    None when unknown, e.g. a lost worker's try), the ``worker`` that ran it, its ``error`` (None: it
    succeeded) and ``output`` (an excerpt of what the target said; None when none was kept).

    ``round`` is 0 for the run's own tries and ``n`` for the tries after its n-th re-run
    (``POST /jobs/{id}/runs/{run_id}/retry``): the row's ``reruns`` names the current round."""

    attempt: int
    started_at: int | None = None
    finished_at: int | None = None
    worker: str | None = None
    error: str | None = None
    output: str | None = None
    round: int = 0


def fitted(record: TryRecord) -> TryRecord:
    """``record`` within its size budget: a success's output cut to ``SUCCESS_OUTPUT_BYTES``; a failure's error
    to ``FAILED_ERROR_BYTES`` and its output to what is left of ``FAILED_TRY_BYTES``. Outputs are cut at the end
    (they are excerpts already shaped by the target: a head or a tail)."""
    if record.error is None:
        output = head_bytes(record.output, SUCCESS_OUTPUT_BYTES) if record.output else record.output
        return replace(record, output=output)
    error = head_bytes(record.error, FAILED_ERROR_BYTES)
    room = FAILED_TRY_BYTES - len(error.encode("utf-8"))
    output = head_bytes(record.output, room) if record.output else record.output
    return replace(record, error=error, output=output)


def summarised(record: TryRecord) -> TryRecord:
    """An older try kept without its output and with the head of its error (``SUMMARY_ERROR_BYTES``)."""
    error = head_bytes(record.error, SUMMARY_ERROR_BYTES) if record.error else record.error
    return replace(record, output=None, error=error)


def with_try(tries: Sequence[TryRecord], record: TryRecord) -> tuple[TryRecord, ...]:
    """``tries`` (oldest first) with ``record`` appended: fitted, the newest ``FULL_TRIES`` in full, older ones
    summarised, at most ``MAX_TRIES`` (the oldest dropped)."""
    kept = [*tries, fitted(record)][-MAX_TRIES:]
    cut = len(kept) - FULL_TRIES
    return tuple(summarised(entry) if i < cut else entry for i, entry in enumerate(kept))


@dataclass(frozen=True)
class Rerun:
    """The answer of ``RunHistory.rerun``: ``done`` (the run was put back to ``queued``) with ``row`` as written,
    or not done with ``row`` as stored (None: there is no such run)."""

    done: bool
    row: RunRow | None = None


def run_detail(row: RunRow) -> RunDetail:
    """The API's ``RunDetail`` of ``row``: its ``Run`` with ``attempts`` (the tries of round ``row.reruns``) and
    ``previous_attempts`` (those of earlier rounds), instants as UTC datetimes."""

    def attempt(record: TryRecord) -> RunAttempt:
        return RunAttempt(
            attempt=record.attempt,
            started_at=from_ms(record.started_at) if record.started_at is not None else None,
            finished_at=from_ms(record.finished_at) if record.finished_at is not None else None,
            worker=record.worker,
            error=record.error,
            output=record.output,
            round=record.round,
        )

    return RunDetail(
        **row.as_run().model_dump(),
        reruns=row.reruns,
        attempts=[attempt(t) for t in row.tries if t.round == row.reruns],
        previous_attempts=[attempt(t) for t in row.tries if t.round < row.reruns],
    )
