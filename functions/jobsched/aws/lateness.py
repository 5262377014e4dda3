"""The JSON form of a scheduler partition's stored lateness summary (``ports.lateness.LatenessCodec``)."""

from __future__ import annotations

import json
from typing import Any

from jobsched.ports.lateness import LatenessFigures, LatenessLabels, LatenessSummary


class JsonLateness:
    """``LatenessSummary`` as compact JSON: ``{"partition", "since", "at", "term", "groups": [[priority, owner,
    runs, p50_ms, p99_ms, max_ms], ...], "priorities": [[priority, runs, p50_ms, p99_ms, max_ms], ...],
    "backlog": [[owner, due jobs], ...]}``; instants epoch ms."""

    def encode(self, summary: LatenessSummary) -> str:
        """The summary as stored (``LatenessStore.save_lateness``)."""
        return json.dumps(
            {
                "partition": summary.partition,
                "since": summary.since_ms,
                "at": summary.at_ms,
                "term": summary.term,
                "groups": [
                    [labels.priority, labels.owner, f.runs, f.p50_ms, f.p99_ms, f.max_ms]
                    for labels, f in summary.groups
                ],
                "priorities": [
                    [priority, f.runs, f.p50_ms, f.p99_ms, f.max_ms] for priority, f in summary.priorities
                ],
                "backlog": [[owner, count] for owner, count in summary.backlog],
            },
            separators=(",", ":"),
        )

    def decode(self, text: str) -> LatenessSummary:
        """Inverse of :meth:`encode`. Raises ValueError for text it did not write (not JSON, a field missing or of
        another type)."""
        try:
            data = json.loads(text)
            groups = tuple(
                (LatenessLabels(_str(p), _str(o)), LatenessFigures(_int(n), _int(p50), _int(p99), _int(top)))
                for p, o, n, p50, p99, top in data["groups"]
            )
            priorities = tuple(
                (_str(p), LatenessFigures(_int(n), _int(p50), _int(p99), _int(top)))
                for p, n, p50, p99, top in data["priorities"]
            )
            backlog = tuple((_str(owner), _int(count)) for owner, count in data["backlog"])
            return LatenessSummary(
                partition=_int(data["partition"]),
                since_ms=_int(data["since"]),
                at_ms=_int(data["at"]),
                term=_int(data["term"]),
                groups=groups,
                priorities=priorities,
                backlog=backlog,
            )
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"not a stored lateness summary: {text[:200]!r}") from error


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value
