"""``jobsched smoke``: check a deployment end to end (the check itself is ``jobsched.smoke``).

Tests inject ``"clock"`` (epoch ms) and ``"sleep"`` (seconds) through the click context object
(``options.injected``)."""

from __future__ import annotations

from typing import Annotated

import typer

from jobsched.cli.options import Connection, injected, option_groups
from jobsched.exits import fail

__all__ = ["smoke_command"]


@option_groups
def smoke_command(
    lead: Annotated[
        float, typer.Option("--lead", min=1, max=600, help="Seconds ahead of now the one-off job fires.")
    ] = 5.0,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=1, max=3600, help="Seconds after its instant the run may take."),
    ] = 120.0,
    conn: Connection = Connection(),
) -> None:
    """Check a deployment end to end: a one-off `echo` job runs on time, a repeated create replays.

    Prints each step (created, replayed, enqueued, started, succeeded, with the run id and the dispatch and
    start lateness), deletes the job at the end (also on failure), and exits 1 naming the failing step.
    """
    from jobsched.smoke import SmokeCheck, SmokeFailed, SmokeSettings

    timing = {name: value for name in ("clock", "sleep") if (value := injected(name)) is not None}
    with conn.client() as client:
        typer.echo(f"smoke      {client.base_url}")
        check = SmokeCheck(
            client, say=typer.echo, settings=SmokeSettings(lead_s=lead, timeout_s=timeout), **timing
        )
        try:
            check.run()
        except SmokeFailed as failure:
            fail(f"smoke failed at step {failure.step}: {failure.message}")
