"""What the CLI prints on stdout: tables for people, the API's JSON for scripts (``--json``).

Tables are rich tables without borders; instants are shown in UTC as ``2026-01-15 12:00:05Z``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

__all__ = [
    "job_detail",
    "jobs_table",
    "labels_text",
    "print_json",
    "print_table",
    "say",
    "seconds",
    "show",
    "table",
    "when",
]


def _out() -> Console:
    """stdout for tables: the terminal's width, or wide (no wrapping) when piped or captured."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=1000)
    return console


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout, keys in the API's order."""
    typer.echo(json.dumps(value, indent=2, sort_keys=False))


def show(value: Any, as_json: bool, render: Callable[[Any], Table]) -> None:
    """Print ``value`` as JSON when ``as_json``, else as the table ``render`` makes of it."""
    if as_json:
        print_json(value)
    else:
        _out().print(render(value))


def say(value: Any, as_json: bool, line: str) -> None:
    """Print ``value`` as JSON when ``as_json``, else the one-line summary ``line``."""
    if as_json:
        print_json(value)
    else:
        typer.echo(line)


def table(columns: tuple[str, ...], rows: Sequence[Sequence[str]]) -> Table:
    """A borderless table with bold ``columns`` headers; long cells fold."""
    result = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        result.add_column(column, overflow="fold")
    for row in rows:
        result.add_row(*row)
    return result


def print_table(columns: tuple[str, ...], rows: Sequence[Sequence[str]]) -> None:
    """:func:`table` on stdout."""
    _out().print(table(columns, rows))


def when(value: str | None) -> str:
    """An API instant (ISO 8601, UTC) shortened for tables: ``2026-01-15 12:00:05Z``; ``-`` for none."""
    if not value:
        return "-"
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return value
    text = instant.strftime("%Y-%m-%d %H:%M:%S")
    if instant.microsecond:
        text += f".{instant.microsecond // 1000:03d}"
    return text + "Z"


def seconds(ms: int | None) -> str:
    """A duration in milliseconds as seconds with two decimals (``0.83s``); ``-`` for none."""
    return "-" if ms is None else f"{ms / 1000:.2f}s"


def _target(target: dict[str, Any]) -> str:
    kind = target.get("type", "?")
    detail = {
        "http": lambda t: f"{t.get('method', 'POST')} {t.get('url')}",
        "lambda": lambda t: t.get("function"),
        "sqs": lambda t: t.get("queue_url"),
        "command": lambda t: t.get("name"),
        "shell": lambda t: t.get("command"),
    }.get(kind, lambda t: "")(target)
    text = f"{kind}: {detail}"
    return text if len(text) <= 60 else text[:57] + "..."


def labels_text(labels: dict[str, str] | None) -> str:
    """A job's labels as ``key=value`` terms joined by commas, by key (the ``-l`` spelling); ``-`` for none."""
    return ",".join(f"{key}={value}" for key, value in sorted((labels or {}).items())) or "-"


def jobs_table(jobs: list[dict[str, Any]]) -> Table:
    """Jobs (API JSON) as rows: id, name, schedule (``after <upstream id>`` for a job that runs after another),
    zone, next run, state (``chained`` for such a job), target, labels."""
    return table(
        ("ID", "NAME", "SCHEDULE", "TZ", "NEXT RUN", "STATE", "TARGET", "LABELS"),
        [
            (
                job.get("id", ""),
                job.get("name", ""),
                job.get("schedule") or _after(job),
                job.get("timezone", ""),
                when(job.get("next_run_at")),
                "paused" if job.get("paused") else ("active" if job.get("next_run_at") else _ended(job)),
                _target(job.get("target") or {}),
                labels_text(job.get("labels")),
            )
            for job in jobs
        ],
    )


def _after(job: dict[str, Any]) -> str:
    """``after <upstream id>`` for a job that runs after another (design §2.1), else ''."""
    after = job.get("after") or {}
    return f"after {after['job']}" if after.get("job") else ""


def _ended(job: dict[str, Any]) -> str:
    """The state of a job with no next run: ``chained`` (it runs after another job), else ``done``."""
    return "chained" if job.get("after") else "done"


_DETAIL_FIRST = ("id", "name", "owner", "schedule", "timezone", "next_run_at", "paused", "target", "input")


def job_detail(job: dict[str, Any]) -> Table:
    """A job as ``field  value`` rows: identity and schedule first, then the rest in the API's order."""
    result = Table(box=None, show_header=False, pad_edge=False)
    result.add_column(style="bold")
    result.add_column(overflow="fold")
    ordered = [k for k in _DETAIL_FIRST if k in job] + [k for k in job if k not in _DETAIL_FIRST]
    for key in ordered:
        value = job[key]
        if key in ("next_run_at", "created_at", "updated_at", "start_at", "end_at", "paused_at"):
            shown = when(value)
        elif key == "labels":
            shown = labels_text(value)
        elif isinstance(value, dict | list):
            shown = json.dumps(value, separators=(", ", ": "))
        else:
            shown = "-" if value is None else str(value)
        result.add_row(key, shown)
    return result
