"""The tries of a run as its row keeps them (``RunRow.tries``): one ``TryRecord`` per try the worker ran, written
with the try's result in the same conditional write (``succeed``/``retry``/``dead``). The rules that keep a row
small however often a run is tried and re-run are ``jobsched.domain.tries``'s.

Every instant is epoch milliseconds (UTC)."""

from __future__ import annotations

from dataclasses import dataclass


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
