"""``jobsched local`` end to end: ``overlap: buffer_one`` (design §5.4) with real worker threads. A job firing every
second whose tries take 2.5 s never has two tries at once; the fires while one waits are recorded skipped naming
the holder and the fire that waits, and the fire that waits runs right after the holder."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.support import LocalProcess, wait_for

pytestmark = pytest.mark.e2e


def _instant(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _runs(local: LocalProcess, job_id: str, status: str | None = None) -> list[dict[str, Any]]:
    params = {"limit": "100", **({"status": status} if status else {})}
    reply = local.http.get(f"/jobs/{job_id}/runs", params=params)
    assert reply.status_code == 200, reply.text
    return list(reply.json()["items"])


def test_buffer_one_runs_one_try_at_a_time_and_the_fire_that_waits_next(
    local: Callable[..., LocalProcess],
) -> None:
    # Given local mode with four workers and a job firing every second whose tries take 2.5 s
    process = local("--workers", "4")
    reply = process.http.post(
        "/jobs",
        json={
            "name": "slow",
            "schedule": "every 1 second",
            "command": "sleep",
            "input": {"seconds": 2.5},
            "overlap": "buffer_one",
            "retry": {"max_attempts": 1},
        },
    )
    assert reply.status_code == 201, reply.text
    job = reply.json()
    assert job["overlap"] == "buffer_one"

    # When it has run four tries
    wait_for("4 finished runs", lambda: len(_runs(process, job["id"], "succeeded")) >= 4, timeout_s=60)
    assert process.http.post(f"/jobs/{job['id']}/pause").status_code == 200

    # Then no two tries overlapped, each after the first started right after one ended (the fire that waited)
    done = sorted(_runs(process, job["id"], "succeeded"), key=lambda r: _instant(r["started_at"]))
    spans = [(_instant(r["started_at"]), _instant(r["finished_at"])) for r in done]
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert ended <= started < ended + 2.0
    # and the fires while one waited are skipped, naming the holder and the fire that waits
    skipped = _runs(process, job["id"], "skipped")
    assert skipped and all("waits for it" in (r["error"] or "") for r in skipped)
    # and the fires the scheduler dispatched, claimed or not, are all listed: no gap in the seconds
    listed = sorted({_instant(r["scheduled_for"]) for r in _runs(process, job["id"])})
    assert [round(b - a, 3) for a, b in itertools.pairwise(listed)] == [1.0] * (len(listed) - 1)
