"""``jobsched health``: the scheduler's dispatch lateness per priority and for the top owners by backlog
(``GET /health``; the metrics' figures, design §8)."""

from __future__ import annotations

from typing import Any

from jobsched.cli.options import Connection, JsonOption, option_groups
from jobsched.cli.output import print_json, print_table, seconds, when

__all__ = ["health_command", "health_rows"]

COLUMNS = ("OWNERS", "BACKLOG", "PRIORITY", "RUNS", "P50", "P99", "MAX")
"""The table's columns: whose runs, their backlog (due jobs in one tick), then the figures of one priority."""


def health_rows(health: dict[str, Any]) -> list[tuple[str, ...]]:
    """``GET /health``'s answer as table rows: every owner per priority, each top owner per priority (``#1 you
    (<owner>)`` or ``#2 another owner``; one row of no figures when none of its runs was dispatched in the
    window), then every other owner per priority."""
    rows: list[tuple[str, ...]] = []

    def add(who: str, backlog: str, lines: list[dict[str, Any]]) -> None:
        if not lines and backlog != "-":
            rows.append((who, backlog, "-", "0", "-", "-", "-"))
        for i, line in enumerate(lines):
            figures = (seconds(line["p50_ms"]), seconds(line["p99_ms"]), seconds(line["max_ms"]))
            rows.append(
                (
                    who if i == 0 else "",
                    backlog if i == 0 else "",
                    line["priority"],
                    str(line["runs"]),
                    *figures,
                )
            )

    add("all owners", "-", health["by_priority"])
    for owner in health["top_owners"]:
        who = (
            f"#{owner['rank']} you ({owner['owner']})" if owner["you"] else f"#{owner['rank']} another owner"
        )
        add(who, str(owner["backlog"]), owner["by_priority"])
    add("other owners", "-", health["other"])
    return rows


@option_groups
def health_command(conn: Connection = Connection(), as_json: JsonOption = False) -> None:
    """The scheduler's dispatch lateness over its latest minute of dispatches (GET /health): per priority, for
    the top owners by backlog (another owner's name is not shown) and for every other owner."""
    with conn.client() as client:
        health = client.health()
    if as_json:
        print_json(health)
        return
    if health["until"] is None:
        print("no runs dispatched yet")
        return
    window = f"window {when(health['since'])} to {when(health['until'])}"
    print(f"{window}, {health['reporting']} of {health['partitions']} partition(s) reporting")
    print_table(COLUMNS, health_rows(health))
