"""``jobsched next EXPRESSION``: preview a schedule's fire instants, offline (no API call)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from jobsched.exits import USAGE_ERROR, fail
from jobsched.schedule.engine import ScheduleError, get_zone, parse_in_range, validate_schedule

__all__ = ["next_command"]


def next_command(
    expression: Annotated[
        str, typer.Argument(help="Schedule: cron, @macro, rate(...), every ..., daily, at ...")
    ],
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of the schedule.")] = "UTC",
    after: Annotated[
        str | None,
        typer.Option("--after", help="ISO 8601 instant to start after (naive = in --tz). Default: now."),
    ] = None,
    count: Annotated[int, typer.Option("--count", help="How many fire instants to print.")] = 5,
) -> None:
    """Print the next COUNT fire instants of EXPRESSION, one ISO 8601 instant with offset per line.

    Instants are in the schedule's zone (e.g. 2023-10-30T02:00:00+01:00). A rate is anchored at
    --after. A one-off less than 60 s before --after is shown, as registration then accepts it and runs it
    once, now. Bad input exits 2 with one line on stderr.
    """
    try:
        zone = get_zone(tz)
        start = (
            datetime.now(UTC).replace(microsecond=0)
            if after is None
            else parse_in_range(after, zone, field="after", whole_ms=False)
        )
        if count < 1:
            raise ScheduleError("count", f"--count must be at least 1, got {count}")
        schedule = validate_schedule(expression, tz, now=start, min_interval_s=0)
    except ScheduleError as error:
        fail(error.message, USAGE_ERROR, field=error.field)
    if schedule.kind == "once":  # as registration at --after runs it: within the grace, once, now
        first = schedule.first_fire(start)
        fires = [first] if first is not None else []
    else:
        fires = schedule.fires(start, datetime.max.replace(tzinfo=UTC), count)
    for fire in fires:
        typer.echo(fire.isoformat())
