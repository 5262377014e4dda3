"""The rules that keep a run row's tries (``RunRow.tries``, ``jobsched.ports.tries.TryRecord``) small however
often a run is tried and re-run.

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
from dataclasses import replace

from jobsched.ports.runs import RunRow
from jobsched.ports.targets import SUCCESS_OUTPUT_BYTES, head_bytes
from jobsched.ports.tries import TryRecord

FAILED_TRY_BYTES = 4096
FAILED_ERROR_BYTES = 1024
SUMMARY_ERROR_BYTES = 200
FULL_TRIES = 5
MAX_TRIES = 30


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


def tries_with(
    before: RunRow,
    attempt: int,
    started_at: int | None,
    worker: str | None,
    finished_at: int,
    error: str | None,
    output: str | None = None,
) -> tuple[TryRecord, ...]:
    """The run's tries (as the claim found them, ``before``) with the try ``attempt`` (instants epoch ms) appended, in the run's current round
    (``before.reruns``), bounded by ``jobsched.domain.tries.with_try``."""
    record = TryRecord(attempt, started_at, finished_at, worker, error, output, round=before.reruns)
    return with_try(before.tries, record)
