"""``jobsched limits``: the caller's quotas and their use (``GET /limits``, design §4.11)."""

from __future__ import annotations

from typing import Any

from jobsched.cli.options import Connection, JsonOption, option_groups
from jobsched.cli.output import print_json, print_table

__all__ = ["limits_command"]

QUOTAS = ("jobs", "fires_per_minute", "triggers_per_minute")
"""The quotas shown, in order (``GET /limits``)."""


def _number(value: Any) -> str:
    if value is None:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


@option_groups
def limits_command(conn: Connection = Connection(), as_json: JsonOption = False) -> None:
    """The caller's quotas and use now (GET /limits): one row per quota with its limit ("none": no limit)."""
    with conn.client() as client:
        limits = client.limits()
    if as_json:
        print_json(limits)
        return
    rows = [(name, _number(limits[name]["limit"]), _number(limits[name]["use"])) for name in QUOTAS]
    print_table(("QUOTA", "LIMIT", "USE"), rows)
