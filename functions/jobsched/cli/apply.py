"""``jobsched apply -f PATH``: make the caller's jobs match the job specs of a file or a directory (jobs as code).

The steps, each finished before the next begins, so a spec that does not validate stops the whole apply before
anything changes: read every file (``.yaml``, ``.yml`` and ``.json`` files of a directory and its
subdirectories, by path) and validate every spec with the API's schema (``jobsched.apply_plan``); list the
caller's jobs; plan; check the schedules the plan registers; then create, change (a PATCH of only the differing
fields) and, with ``--prune``, delete. ``--dry-run`` prints the plan and stops there. The API can still refuse a
call the local checks let through (a deployment setting such as the timeout cap or shell targets): the apply
then stops at that job, the changes made before it stay, and running it again continues from there.

Exit codes: 0 done (or planned, with ``--dry-run``); 1 a spec or a call refused, or ``--wait`` timed out; 2 a
usage error (``--prune`` without ``--selector``, an unreadable path).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from jobsched.apply_plan import (
    Plan,
    SpecError,
    check_schedules,
    check_selector,
    describe,
    plan,
    read_documents,
    validate,
)
from jobsched.cli.options import Connection, JsonOption, injected, option_groups
from jobsched.cli.output import print_json
from jobsched.client import ApiError, JobschedClient
from jobsched.exits import USAGE_ERROR, fail
from jobsched.labels import parse_selector

__all__ = ["apply_command"]

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
MAX_SPEC_FILE_BYTES = 8 * 1024 * 1024
"""Largest spec file read (8 MiB: a hundred jobs with the largest ``input`` the API takes), so a path naming
a data dump is refused before it is parsed."""


def spec_files(paths: list[Path]) -> list[Path]:
    """The files to read: each path that is a file, and the ``SPEC_SUFFIXES`` files under each directory (and
    its subdirectories), sorted by path; a file named twice (``-f jobs -f jobs/a.yaml``, or a symbolic link to
    a file already named) is read once, where it is first named. Exits 2 for a path that does not exist."""
    found: dict[Path, Path] = {}
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SPEC_SUFFIXES)
        elif path.is_file():
            files = [path]
        else:
            fail(f"--file {path}: no such file or directory", USAGE_ERROR)
        for file in files:
            found.setdefault(file.resolve(), file)
    return list(found.values())


def _read(path: Path) -> str:
    """The text of a spec file. Exits 2 naming the file when it cannot be read, is not UTF-8 or is larger
    than ``MAX_SPEC_FILE_BYTES``."""
    try:
        if (size := path.stat().st_size) > MAX_SPEC_FILE_BYTES:
            fail(
                f"cannot read {path}: {size} bytes, more than a spec file's {MAX_SPEC_FILE_BYTES}",
                USAGE_ERROR,
            )
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        fail(f"cannot read {path}: {getattr(error, 'strerror', None) or error}", USAGE_ERROR)


@option_groups
def apply_command(
    file: Annotated[
        list[Path],
        typer.Option(
            "--file", "-f", help="A job spec file (YAML or JSON) or a directory of them; repeat for several."
        ),
    ],
    selector: Annotated[
        list[str] | None,
        typer.Option(
            "--selector",
            help="key=value (repeatable): the labels of the jobs this apply owns; every spec must carry them.",
        ),
    ] = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Delete the jobs carrying --selector's labels that no spec names.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would change; change nothing.")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Wait until every created or changed job has its next fire scheduled."),
    ] = False,
    wait_timeout: Annotated[
        float, typer.Option("--wait-timeout", min=0, help="Seconds --wait waits at most.")
    ] = 60.0,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Create, change and (with --prune) delete jobs so they match the specs in PATH (jobs as code).

    Jobs are matched by name among the caller's jobs; a changed job gets a PATCH of only the fields that
    differ, so next_run_at is recomputed only when its timing changed. Applying the same files again changes
    nothing; `jobsched jobs list -o yaml` prints existing jobs in the same format."""
    try:
        wanted = parse_selector(selector or ())
    except ValueError as error:
        fail(f"--selector: {error}", USAGE_ERROR)
    if prune and not wanted:
        fail(
            "--prune needs --selector: the labels of the jobs this apply owns, e.g. app=billing", USAGE_ERROR
        )
    try:
        documents = [doc for path in spec_files(file) for doc in read_documents(_read(path), str(path))]
        specs = validate(documents)
        check_selector(specs, wanted)
    except SpecError as error:
        fail(f"no change made: {error}")
    if not specs:
        fail(f"no change made: no job specs in {', '.join(map(str, file))}")
    clock: Callable[[], int] = injected("clock") or (lambda: int(time.time() * 1000))
    with conn.client() as client:
        result = plan(specs, list(client.iter_jobs()), selector=wanted, prune=prune)
        try:
            check_schedules(result, clock())
        except SpecError as error:
            fail(f"no change made: {error}")
        if not dry_run:
            _carry_out(client, result)
            if wait:
                _wait(client, result, wait_timeout, clock, injected("sleep") or time.sleep)
    if as_json:
        print_json(_as_json(result, dry_run))
    else:
        typer.echo("\n".join(describe(result, dry_run=dry_run)))


def _carry_out(client: JobschedClient, result: Plan) -> None:
    """Make the plan's calls: creates, then changes, then deletes. A refused call stops the apply with one
    error line naming the job and saying how many calls were made before it."""
    total = len(result.created) + len(result.changed) + len(result.deleted)
    done = 0

    def stop(name: str, source: str, error: ApiError) -> None:
        fail(f"apply stopped at job {name!r} ({source}) after {done} of {total} changes: {error}")

    for spec in result.created:
        try:
            client.create_job(spec.body())
        except ApiError as error:
            stop(spec.name, spec.source, error)
        done += 1
    for change in result.changed:
        try:
            client.update_job(change.job_id, change.after)
        except ApiError as error:
            stop(change.spec.name, change.spec.source, error)
        done += 1
    for deletion in result.deleted:
        try:
            client.delete_job(deletion.job_id)
        except ApiError as error:
            stop(deletion.name, "--prune", error)
        done += 1


def _wait(
    client: JobschedClient,
    result: Plan,
    timeout_s: float,
    clock: Callable[[], int],
    sleep: Callable[[float], None],
) -> None:
    """Poll the created and changed jobs that are not paused until each has a ``next_run_at`` (its next fire
    in the due index), at most ``timeout_s`` seconds by ``clock`` (epoch ms). Exits 1 naming the jobs still
    without one."""
    names = [spec.name for spec in result.created] + [change.spec.name for change in result.changed]
    deadline = clock() + timeout_s * 1000
    while True:
        jobs = {job["name"]: job for job in client.iter_jobs()}
        waiting = [
            n for n in names if n in jobs and not jobs[n].get("paused") and not jobs[n].get("next_run_at")
        ]
        if not waiting:
            return
        if clock() >= deadline:
            fail(f"--wait: after {timeout_s:g} s, no next fire scheduled for {', '.join(waiting)}")
        sleep(0.5)


def _as_json(result: Plan, dry_run: bool) -> dict[str, Any]:
    """The plan for scripts: ``created``, ``deleted``, ``unchanged`` (names), ``changed`` (name -> the fields
    that differ) and ``dry_run``."""
    return {
        "created": [spec.name for spec in result.created],
        "changed": {change.spec.name: list(change.fields) for change in result.changed},
        "deleted": [deletion.name for deletion in result.deleted],
        "unchanged": result.unchanged,
        "dry_run": dry_run,
    }
