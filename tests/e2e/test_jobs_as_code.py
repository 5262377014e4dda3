"""Jobs as code end to end: ``jobsched apply`` (a real CLI run over HTTP) against ``jobsched local`` on SQLite:
the example specs and a fast job applied, run on schedule, filtered by label, changed by a label-only apply that
keeps the job's next fire, pruned, and the labels kept across a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from jobsched.cli import register
from tests.e2e.support import LocalProcess, wait_for

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
TICK = "name: tick\nschedule: every 1 second\ncommand: echo\nlabels: {app: billing, tier: %s}\n"


def jobsched(local: LocalProcess, *args: str) -> list[str]:
    cli = typer.Typer()
    register(cli)
    result = CliRunner().invoke(cli, [*args, "--api", local.url, "--token", local.token])
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout.splitlines()


def jobs(local: LocalProcess, *labels: str) -> dict[str, dict[str, Any]]:
    reply = local.http.get("/jobs", params={"limit": "100", "label": list(labels)})
    assert reply.status_code == 200, reply.text
    return {job["name"]: job for job in reply.json()["items"]}


def test_apply_runs_filters_changes_prunes_and_survives_a_restart(
    local: Callable[..., LocalProcess], tmp_path: Path
) -> None:
    first = local()
    specs = tmp_path / "specs"
    specs.mkdir()
    for example in EXAMPLES.iterdir():
        (specs / example.name).write_text(example.read_text())
    (specs / "tick.yaml").write_text(TICK % "gold")

    # When the specs are applied, and applied again
    applied = jobsched(first, "apply", "-f", str(specs), "--selector", "app=billing", "--wait")
    assert applied[-1] == "apply: 6 created, 0 changed, 0 deleted, 0 unchanged"
    again = jobsched(first, "apply", "-f", str(specs), "--selector", "app=billing")
    assert again[-1] == "apply: 0 created, 0 changed, 0 deleted, 6 unchanged"

    # Then the fast job runs on its schedule, and the listing filters by label
    tick = jobs(first)["tick"]
    wait_for("2 tick runs", lambda: len(first.http.get(f"/jobs/{tick['id']}/runs").json()["items"]) >= 2)
    assert sorted(jobs(first, "app=billing", "tier=gold")) == ["month-end-ledger", "nightly-invoices", "tick"]

    # When a label-only change and a removed file are applied with --prune
    (specs / "tick.yaml").write_text(TICK % "silver")
    (specs / "reports.json").unlink()
    changed = jobsched(first, "apply", "-f", str(specs), "--selector", "app=billing", "--prune")

    # Then only the labels were patched and the pruned jobs are gone
    assert "changed tick: labels" in changed and "deleted weekly-report" in changed
    assert changed[-1] == "apply: 0 created, 1 changed, 2 deleted, 3 unchanged"
    assert sorted(jobs(first)) == ["month-end-ledger", "nightly-invoices", "payment-reminders", "tick"]
    events = first.http.get(f"/jobs/{tick['id']}/events").json()["items"]
    assert events[0]["detail"] == {"fields": ["labels"]}

    # and after a restart the SQLite store still has the labels; an export applies as no change
    assert first.stop() == 0
    second = local()
    assert jobs(second, "tier=silver")["tick"]["labels"] == {"app": "billing", "tier": "silver"}
    export = tmp_path / "export.yaml"
    export.write_text("\n".join(jobsched(second, "jobs", "list", "-o", "yaml", "-l", "app=billing")) + "\n")
    assert (
        jobsched(second, "apply", "-f", str(export))[-1]
        == "apply: 0 created, 0 changed, 0 deleted, 4 unchanged"
    )
