"""``jobsched jobs ...``: register, inspect and change jobs (``create``, ``list``, ``get``, ``update``,
``pause``, ``resume``, ``trigger``, ``backfill``, ``events``, ``fires``, ``delete``). ``list`` and ``get`` also
print jobs as the YAML specs ``jobsched apply`` reads (``-o yaml``).

Job specs are not validated here: the API is their one judge, and its error (code, message, field) is the
line the user sees (exit 1). Bad flags caught before any call (two targets, a flag that is not JSON, an
unreadable ``--file``) exit 2.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from jobsched.apply_plan import dump_yaml, export_spec
from jobsched.cli.options import (
    Connection,
    JobArgument,
    JsonOption,
    OutputFormat,
    OutputOption,
    option_groups,
)
from jobsched.cli.output import job_detail, jobs_table, print_json, print_table, say, show, when
from jobsched.client import ApiError, JobschedClient
from jobsched.exits import USAGE_ERROR, fail
from jobsched.labels import parse_selector

__all__ = ["SpecFlags", "jobs_app", "resolve_job"]

jobs_app = typer.Typer(help="Register, inspect and change jobs.", no_args_is_help=True)


def resolve_job(client: JobschedClient, ref: str) -> str:
    """A job id from an id (``j_...``, returned as is) or a name, looked up in the caller's jobs.

    Raises ``ApiError`` 404 ``not_found`` when no job of the caller has that name."""
    if ref.startswith("j_"):
        return ref
    for job in client.iter_jobs():
        if job.get("name") == ref:
            return str(job["id"])
    raise ApiError(404, "not_found", f"no job with id or name {ref!r}")


def _json_option(text: str | None, option: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        fail(f"{option} is not valid JSON: {error}", USAGE_ERROR)


def _read_json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() if str(path) != "-" else sys.stdin.read())
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror or error}", USAGE_ERROR)
    except ValueError as error:
        fail(f"{path} is not valid JSON: {error}", USAGE_ERROR)
    if not isinstance(data, dict):
        fail(f"{path} must hold a JSON object", USAGE_ERROR)
    return data


# --- job spec flags (create and update) -------------------------------------------------------

ScheduleOpt = Annotated[
    str | None, typer.Option("--schedule", "-s", help="cron, @daily, rate(5 minutes), daily 02:00, at <ISO>.")
]
AfterOpt = Annotated[
    str | None,
    typer.Option("--after", help="Run after each run of this job (id or name) instead of a schedule."),
]
AfterOnOpt = Annotated[
    str | None,
    typer.Option("--after-on", help="With --after: the upstream ends that run it: succeeded,dead or any."),
]
TzOpt = Annotated[str | None, typer.Option("--tz", help="IANA time zone of the schedule (default UTC).")]
CommandOpt = Annotated[
    str | None, typer.Option("--command", help="Target: a registered command (echo, fail...).")
]
ShellOpt = Annotated[str | None, typer.Option("--shell", help="Target: a shell command (where enabled).")]
UrlOpt = Annotated[str | None, typer.Option("--url", help="Target: POST the input to this URL.")]
TargetOpt = Annotated[
    str | None, typer.Option("--target-json", help='Target as JSON, e.g. \'{"type":"sqs",...}\'.')
]
InputOpt = Annotated[str | None, typer.Option("--input-json", help="The job's input (JSON, at most 64 KiB).")]
RetriesOpt = Annotated[
    int | None, typer.Option("--retries", help="Tries per run in all (retry.max_attempts, 1-10).")
]
BackoffOpt = Annotated[
    int | None, typer.Option("--backoff", help="First retry delay, seconds (doubles each try).")
]
TimeoutOpt = Annotated[int | None, typer.Option("--timeout", help="Seconds a try may run (timeout_s).")]
MissedOpt = Annotated[
    str | None, typer.Option("--missed", help="catch_up or skip: fires missed during downtime.")
]
OverlapOpt = Annotated[
    str | None,
    typer.Option(
        "--overlap",
        help="allow, skip, buffer_one (one fire waits, later ones skip) or replace (a fire cancels the running"
        " try, then runs): a run while another runs.",
    ),
]
PriorityOpt = Annotated[
    str | None,
    typer.Option("--priority", help="high, normal or low: the order among fires due at the same time."),
]
JitterOpt = Annotated[int | None, typer.Option("--jitter", help="Spread the start over [0, N) seconds.")]
StartOpt = Annotated[str | None, typer.Option("--start-at", help="ISO 8601 instant with offset.")]
EndOpt = Annotated[str | None, typer.Option("--end-at", help="ISO 8601 instant with offset.")]
FileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="Job JSON file ('-' for stdin); flags override its fields."),
]
CreateKeyOpt = Annotated[
    str | None, typer.Option("--idempotency-key", help="Safe retries: a repeat returns the first job.")
]
KeyOpt = Annotated[
    str | None, typer.Option("--idempotency-key", help="A repeat with the same key replays the first answer.")
]


@dataclass(frozen=True)
class SpecFlags:
    """The job-spec flags of ``jobs create`` and ``jobs update``, defined once (None = not given).

    Each field is one typer option (its ``Annotated`` type carries the flag name and help); commands get
    them all through ``@option_groups`` and a ``spec: SpecFlags`` parameter.
    """

    schedule: ScheduleOpt = None
    after: AfterOpt = None
    after_on: AfterOnOpt = None
    tz: TzOpt = None
    command: CommandOpt = None
    shell: ShellOpt = None
    url: UrlOpt = None
    target_json: TargetOpt = None
    input_json: InputOpt = None
    retries: RetriesOpt = None
    backoff: BackoffOpt = None
    timeout: TimeoutOpt = None
    missed: MissedOpt = None
    overlap: OverlapOpt = None
    priority: PriorityOpt = None
    jitter: JitterOpt = None
    start_at: StartOpt = None
    end_at: EndOpt = None

    def body(self) -> dict[str, Any]:
        """The request fields the given flags set, under the API's names: ``schedule``, ``timezone``,
        ``target``, ``input``, ``retry`` {``max_attempts``, ``backoff_s``}, ``timeout_s``, ``missed``,
        ``overlap``, ``priority``, ``jitter_s``, ``start_at``, ``end_at``. Values are passed as given; the API validates
        them; ``--after``/``--after-on`` set ``after`` {``job``, ``on``} (design §2.1). Exits 2 for two target flags,
        ``--after-on`` without ``--after``, or a flag that is not valid JSON."""
        targets = [t for t in (self.command, self.shell, self.url, self.target_json) if t is not None]
        if len(targets) > 1:
            fail("give one of --command, --shell, --url or --target-json", USAGE_ERROR)
        body: dict[str, Any] = {}
        if self.command is not None:
            body["target"] = {"type": "command", "name": self.command}
        if self.shell is not None:
            body["target"] = {"type": "shell", "command": self.shell}
        if self.url is not None:
            body["target"] = {"type": "http", "url": self.url}
        if self.target_json is not None:
            body["target"] = _json_option(self.target_json, "--target-json")
        if self.input_json is not None:
            body["input"] = _json_option(self.input_json, "--input-json")
        if self.after_on is not None and self.after is None:
            fail("--after-on needs --after (the job to run after)", USAGE_ERROR)
        if self.after is not None:
            on = [end.strip() for end in (self.after_on or "").split(",") if end.strip()]
            body["after"] = {"job": self.after, **({"on": on} if on else {})}
        retry = {"max_attempts": self.retries, "backoff_s": self.backoff}
        if any(v is not None for v in retry.values()):
            body["retry"] = {k: v for k, v in retry.items() if v is not None}
        for key, value in {
            "schedule": self.schedule,
            "timezone": self.tz,
            "timeout_s": self.timeout,
            "missed": self.missed,
            "overlap": self.overlap,
            "priority": self.priority,
            "jitter_s": self.jitter,
            "start_at": self.start_at,
            "end_at": self.end_at,
        }.items():
            if value is not None:
                body[key] = value
        return body


def _job_body(file: Path | None, spec: SpecFlags) -> dict[str, Any]:
    """A request body: the JSON object of ``file`` (``-`` = stdin), if any, with the flags' fields over it.

    A target flag also replaces the file's ``command`` shorthand. Exits 2 for an unreadable file or bad
    flags (see ``SpecFlags.body``)."""
    body = _read_json_file(file) if file else {}
    flags = spec.body()
    body.update(flags)
    if "target" in flags:
        body.pop("command", None)
    return body


# --- commands -------------------------------------------------------------------------------------


@jobs_app.command("create")
@option_groups
def jobs_create(
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="Unique per owner: [A-Za-z0-9._-]{1,128}.")
    ] = None,
    spec: SpecFlags = SpecFlags(),
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    file: FileOpt = None,
    idempotency_key: CreateKeyOpt = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Register a job (POST /jobs). Creating the same spec under an existing name changes nothing."""
    body = _job_body(file, spec)
    if name is not None:
        body["name"] = name
    if paused:
        body["paused"] = True
    with conn.client() as client:
        job, created = client.create_job(body, idempotency_key=idempotency_key)
    if not as_json:
        verb = "created" if created else "unchanged (same spec under this name)"
        typer.echo(f"job {job.get('name')} {verb}: {job.get('id')}", err=True)
    show(job, as_json, job_detail)


LabelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--label", "-l", help="Only jobs with this label, key=value (repeat: every one must match)."
    ),
]


def _output(as_json: bool, output: OutputFormat | None) -> OutputFormat:
    """The format asked for: ``--output``, else ``--json``, else a table. Exits 2 for ``--json`` with another
    ``--output``."""
    if as_json and output not in (None, OutputFormat.JSON):
        fail("give --json or --output, not both", USAGE_ERROR)
    return output or (OutputFormat.JSON if as_json else OutputFormat.TABLE)


@jobs_app.command("list")
@option_groups
def jobs_list(
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many (default: all).")
    ] = None,
    label: LabelOpt = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
    output: OutputOption = None,
) -> None:
    """The caller's jobs, by name (GET /jobs, every page); -o yaml prints them as job specs for `jobsched
    apply`."""
    shown = _output(as_json, output)
    try:
        parse_selector(label or ())
    except ValueError as error:
        fail(f"--label: {error}", USAGE_ERROR)
    with conn.client() as client:
        jobs: list[dict[str, Any]] = []
        for job in client.iter_jobs(labels=label or ()):
            jobs.append(job)
            if limit is not None and len(jobs) >= limit:
                break
    if shown is OutputFormat.YAML:
        typer.echo(dump_yaml([export_spec(job) for job in jobs]), nl=False)
    elif jobs or shown is OutputFormat.JSON:
        show(jobs, shown is OutputFormat.JSON, jobs_table)
    else:
        typer.echo("no jobs", err=True)


@jobs_app.command("get")
@option_groups
def jobs_get(
    job: JobArgument,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
    output: OutputOption = None,
) -> None:
    """One job (GET /jobs/{id}); -o yaml prints it as a job spec for `jobsched apply`."""
    shown = _output(as_json, output)
    with conn.client() as client:
        found = client.get_job(resolve_job(client, job))
    if shown is OutputFormat.YAML:
        typer.echo(dump_yaml([export_spec(found)]), nl=False)
    else:
        show(found, shown is OutputFormat.JSON, job_detail)


@jobs_app.command("update")
@option_groups
def jobs_update(
    job: JobArgument,
    spec: SpecFlags = SpecFlags(),
    file: FileOpt = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Change a job (PATCH /jobs/{id}); only the fields given change; next_run_at is recomputed from now."""
    body = _job_body(file, spec)
    if not body:
        fail("nothing to change: give at least one field flag or --file", USAGE_ERROR)
    with conn.client() as client:
        updated = client.update_job(resolve_job(client, job), body)
    show(updated, as_json, job_detail)


def _pause_or_resume(
    job: str, conn: Connection, as_json: bool, *, pause: bool, reason: str | None = None
) -> None:
    with conn.client() as client:
        job_id = resolve_job(client, job)
        result = client.pause_job(job_id, reason=reason) if pause else client.resume_job(job_id)
    say(
        result,
        as_json,
        f"{'paused' if pause else 'resumed'} {job_id}; next run: {when(result.get('next_run_at'))}",
    )


@jobs_app.command("pause")
@option_groups
def jobs_pause(
    job: JobArgument,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why; shown on the job while it is paused.")
    ] = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Pause a job: no runs until resumed (POST /jobs/{id}/pause)."""
    _pause_or_resume(job, conn, as_json, pause=True, reason=reason)


@jobs_app.command("resume")
@option_groups
def jobs_resume(job: JobArgument, conn: Connection = Connection(), as_json: JsonOption = False) -> None:
    """Resume a paused job from its first fire after now; fires of the paused time do not run (`backfill` runs
    them) (POST /jobs/{id}/resume)."""
    _pause_or_resume(job, conn, as_json, pause=False)


@jobs_app.command("trigger")
@option_groups
def jobs_trigger(
    job: JobArgument,
    idempotency_key: KeyOpt = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """One run now, outside the schedule (POST /jobs/{id}/trigger)."""
    with conn.client() as client:
        run = client.trigger_job(resolve_job(client, job), idempotency_key=idempotency_key)
    say(run, as_json, f"triggered run {run.get('id', '')} ({run.get('status', '')})")


@jobs_app.command("backfill")
@option_groups
def jobs_backfill(
    job: JobArgument,
    start: Annotated[
        str, typer.Option("--start", help="First instant (inclusive), ISO 8601 with an offset.")
    ],
    end: Annotated[str, typer.Option("--end", help="End (exclusive, at most now), ISO 8601 with an offset.")],
    idempotency_key: KeyOpt = None,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Run the job's past fires in [start, end) that have no run yet, at most 1,000 (POST /jobs/{id}/backfill)."""
    with conn.client() as client:
        result = client.backfill_job(
            resolve_job(client, job), start=start, end=end, idempotency_key=idempotency_key
        )
    if as_json:
        print_json(result)
    elif result["count"]:
        typer.echo(
            f"backfilled {result['count']} run(s) from {when(result['first'])} to {when(result['last'])}; "
            f"{result['existing']} of the window's {result['fires']} fire(s) already had a run"
            + _left_to_scheduler(result)
        )
    else:
        typer.echo(
            f"nothing to backfill: {result['existing']} of the window's {result['fires']} fire(s) have a run"
            + _left_to_scheduler(result)
        )


def _left_to_scheduler(result: dict[str, Any]) -> str:
    """The backfill answer's note on fires left to the scheduler (not dispatched yet), or ''."""
    left = result.get("left_to_scheduler") or 0
    return f"; {left} not dispatched yet, left to the scheduler" if left else ""


@jobs_app.command("events")
@option_groups
def jobs_events(
    job: JobArgument,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many, newest first.")] = 20,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """Who did what to a job, newest first: created, updated, paused, ... (GET /jobs/{id}/events)."""
    events: list[dict[str, Any]] = []
    with conn.client() as client:
        job_id = resolve_job(client, job)
        cursor: str | None = None
        while len(events) < limit:
            page = client.list_events(job_id, limit=min(max(limit - len(events), 1), 100), cursor=cursor)
            events.extend(page.get("items", []))
            cursor = page.get("next_cursor")
            if not cursor:
                break
    if as_json:
        print_json(events[:limit])
        return
    rows = [
        (when(e["at"]), e["kind"], e["actor"], json.dumps(e["detail"]) if e.get("detail") else "")
        for e in events[:limit]
    ]
    print_table(("AT", "EVENT", "ACTOR", "DETAIL"), rows)


@jobs_app.command("fires")
@option_groups
def jobs_fires(
    job: JobArgument,
    count: Annotated[int, typer.Option("--count", "-n", help="How many fires, 1-100.")] = 10,
    conn: Connection = Connection(),
    as_json: JsonOption = False,
) -> None:
    """The next fires as the scheduler will dispatch them, with daylight-saving notes (GET /jobs/{id}/fires)."""
    with conn.client() as client:
        found = client.list_fires(resolve_job(client, job), count=count)
    if as_json:
        print_json(found)
        return
    if found["items"]:
        rows = [
            (when(f["scheduled_for"]), f["local_time"], when(f["dispatch_at"]), f.get("note") or "")
            for f in found["items"]
        ]
        print_table(("SCHEDULED FOR", "LOCAL TIME", "DISPATCH AT", "NOTE"), rows)
    if found.get("reason"):
        typer.echo(found["reason"], err=True)


@jobs_app.command("delete")
@option_groups
def jobs_delete(job: JobArgument, conn: Connection = Connection(), as_json: JsonOption = False) -> None:
    """Delete a job: no new runs; its history stays until retention (DELETE /jobs/{id})."""
    with conn.client() as client:
        job_id = resolve_job(client, job)
        client.delete_job(job_id)
    say({"id": job_id, "deleted": True}, as_json, f"deleted {job_id}")
