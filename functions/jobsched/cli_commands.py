"""The API-facing CLI commands: ``jobs ...``, ``runs``, ``import-crontab``, ``smoke`` and ``local`` (SPEC
section 7).

``register(app)`` adds them to the typer app of ``jobsched.cli`` (which owns ``next``). Conventions, as
``aws``/``kubectl`` users expect:

- the API comes from ``--api`` or ``JOBSCHED_API`` (default ``http://127.0.0.1:8080``, local mode); the
  bearer token from ``--token`` or ``JOBSCHED_TOKEN``, else (for an API on this machine only) the dev
  token local mode saved in ``.jobsched/dev-token``, searched from the current directory upwards.
  API Gateway URLs (``*.execute-api.<region>.amazonaws.com``) are signed with SigV4 from the standard
  AWS credential chain instead; ``--sigv4-region`` or ``JOBSCHED_SIGV4_REGION`` does the same for a
  custom domain.
- tables for people, ``--json`` for scripts (the API's JSON, unchanged);
- errors: ONE line on stderr (``error: <status> <code>: <message> (field: <field>)``) and a non-zero exit:
  1 for a failed call or rejected input, 2 for a usage error (bad flag value, unreadable file). Job specs
  are not validated here: the API is their one judge, and its error (code, message, field) is the line
  the user sees.

Tests inject an HTTP transport through the click context object: ``runner.invoke(app, args,
obj={"transport": httpx.WSGITransport(app=...)})``; ``smoke`` also takes ``"clock"`` (epoch ms) and
``"sleep"`` (seconds) there.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, get_type_hints

import typer
from rich.console import Console
from rich.table import Table

from jobsched.client import DEFAULT_API, ApiError, JobschedClient, is_loopback
from jobsched.crontab import CRON_JOB_DEFAULTS, Crontab, parse_crontab
from jobsched.local.paths import DEFAULT_DATA_DIR, DEV_TOKEN_FILE

__all__ = ["FAILED", "USAGE_ERROR", "fail", "find_dev_token", "register", "system_zone_name"]

FAILED = 1
"""Exit status of a failed call: the API answered an error (rejected input included) or was unreachable."""
USAGE_ERROR = 2
"""Exit status of bad input caught before any call (bad flag value, unreadable file), as for a usage error."""

jobs_app = typer.Typer(help="Register, inspect and change jobs.", no_args_is_help=True)

# --- common options ----------------------------------------------------------------------------

ApiOption = Annotated[
    str,
    typer.Option("--api", envvar="JOBSCHED_API", help="API root URL (local mode or API Gateway stage URL)."),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="JOBSCHED_TOKEN",
        help=f"Bearer token (local mode). Default: {DEFAULT_DATA_DIR / DEV_TOKEN_FILE}.",
    ),
]
SigV4RegionOption = Annotated[
    str | None,
    typer.Option(
        "--sigv4-region",
        envvar="JOBSCHED_SIGV4_REGION",
        help="Sign calls with SigV4 for this region (an API Gateway custom domain).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead of a table.")]
JobArgument = Annotated[str, typer.Argument(help="Job id (j_...) or name.", show_default=False)]


def _out() -> Console:
    """stdout for tables: the terminal's width, or wide (no wrapping) when piped or captured."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=1000)
    return console


def fail(message: str, code: int = FAILED, *, field: str | None = None) -> NoReturn:
    """Print ONE line on stderr, ``error: <message>`` or ``error: <field>: <message>``, and exit ``code``.

    The CLI's one error line: every run of whitespace in ``message`` (newlines included) becomes one space.
    ``code`` is ``FAILED`` (1) or ``USAGE_ERROR`` (2). Raises ``typer.Exit``.
    """
    where = f"{field}: " if field else ""
    typer.echo(f"error: {where}{' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def find_dev_token(start: Path | None = None) -> str | None:
    """The dev token local mode saved (``.jobsched/dev-token``) in ``start`` (default cwd) or a parent."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_DATA_DIR / DEV_TOKEN_FILE
        if candidate.is_file():
            return candidate.read_text().strip() or None
    return None


@contextmanager
def _client(
    ctx: typer.Context, api: str, token: str | None, sigv4_region: str | None
) -> Iterator[JobschedClient]:
    """A client for ``api``; turns every ``ApiError`` inside the block into one error line and exit 1.

    ``sigv4_region`` (``--sigv4-region``/``JOBSCHED_SIGV4_REGION``) signs calls to a URL that is not
    recognisably API Gateway; without a ``token``, an API on this machine gets the saved dev token.
    """
    obj = ctx.obj if isinstance(ctx.obj, dict) else {}
    if token is None and is_loopback(api):
        token = find_dev_token()
    client = JobschedClient(api, token=token, transport=obj.get("transport"), sigv4_region=sigv4_region)
    try:
        yield client
    except ApiError as error:
        fail(str(error))
    finally:
        client.close()


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=False))


def _when(value: str | None) -> str:
    """An API instant (ISO 8601, UTC) shortened for tables: ``2026-01-15 12:00:05Z``."""
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


def _seconds(ms: int | None) -> str:
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


def _jobs_table(jobs: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("ID", "NAME", "SCHEDULE", "TZ", "NEXT RUN", "STATE", "TARGET"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        table.add_row(
            job.get("id", ""),
            job.get("name", ""),
            job.get("schedule", ""),
            job.get("timezone", ""),
            _when(job.get("next_run_at")),
            "paused" if job.get("paused") else ("active" if job.get("next_run_at") else "done"),
            _target(job.get("target") or {}),
        )
    return table


_DETAIL_FIRST = ("id", "name", "owner", "schedule", "timezone", "next_run_at", "paused", "target", "input")


def _job_detail(job: dict[str, Any]) -> Table:
    """A job as ``field  value`` rows: identity and schedule first, then the rest in the API's order."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    ordered = [k for k in _DETAIL_FIRST if k in job] + [k for k in job if k not in _DETAIL_FIRST]
    for key in ordered:
        value = job[key]
        if key in ("next_run_at", "created_at", "updated_at", "start_at", "end_at"):
            shown = _when(value)
        elif isinstance(value, dict | list):
            shown = json.dumps(value, separators=(", ", ": "))
        else:
            shown = "-" if value is None else str(value)
        table.add_row(key, shown)
    return table


def _runs_table(runs: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("SCHEDULED FOR", "STATUS", "TRY", "LATENESS", "STARTED", "FINISHED", "KIND", "ERROR"):
        table.add_column(column, overflow="fold")
    for run in runs:
        status = run.get("status", "")
        if run.get("skipped_count"):
            status += f" x{run['skipped_count']}"
        table.add_row(
            _when(run.get("scheduled_for")),
            status,
            str(run.get("attempt", 0)),
            _seconds(run.get("lateness_ms")),
            _when(run.get("started_at")),
            _when(run.get("finished_at")),
            run.get("kind", ""),
            (run.get("error") or "")[:80],
        )
    return table


def _resolve(client: JobschedClient, ref: str) -> str:
    """A job id from an id or a name (names are looked up in the caller's jobs)."""
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
OverlapOpt = Annotated[str | None, typer.Option("--overlap", help="allow or skip: a run while another runs.")]
JitterOpt = Annotated[int | None, typer.Option("--jitter", help="Spread the start over [0, N) seconds.")]
StartOpt = Annotated[str | None, typer.Option("--start-at", help="ISO 8601 instant with offset.")]
EndOpt = Annotated[str | None, typer.Option("--end-at", help="ISO 8601 instant with offset.")]
FileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="Job JSON file ('-' for stdin); flags override its fields."),
]


@dataclass(frozen=True)
class SpecFlags:
    """The job-spec flags of ``jobs create`` and ``jobs update``, defined once (None = not given).

    Each field is one typer option (its ``Annotated`` type carries the flag name and help); commands get
    them all through ``@with_spec_flags``.
    """

    schedule: ScheduleOpt = None
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
    jitter: JitterOpt = None
    start_at: StartOpt = None
    end_at: EndOpt = None

    def body(self) -> dict[str, Any]:
        """The request fields the given flags set, under the API's names (SPEC section 2): ``schedule``,
        ``timezone``, ``target``, ``input``, ``retry`` {``max_attempts``, ``backoff_s``}, ``timeout_s``,
        ``missed``, ``overlap``, ``jitter_s``, ``start_at``, ``end_at``. Values are passed as given; the
        API validates them. Exits 2 for two target flags or a flag that is not valid JSON."""
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
        retry = {"max_attempts": self.retries, "backoff_s": self.backoff}
        if any(v is not None for v in retry.values()):
            body["retry"] = {k: v for k, v in retry.items() if v is not None}
        for key, value in {
            "schedule": self.schedule,
            "timezone": self.tz,
            "timeout_s": self.timeout,
            "missed": self.missed,
            "overlap": self.overlap,
            "jitter_s": self.jitter,
            "start_at": self.start_at,
            "end_at": self.end_at,
        }.items():
            if value is not None:
                body[key] = value
        return body


def with_spec_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give a typer command the ``SpecFlags`` options in place of its ``spec: SpecFlags`` parameter.

    typer reads a command's options from its signature: the returned function's signature lists every
    ``SpecFlags`` field where ``spec`` stood (so ``--help`` keeps their order), and each call folds the
    values typer passes (always by keyword) back into one ``SpecFlags`` for ``command``.
    """
    hints = get_type_hints(command, include_extras=True)
    flag_hints = get_type_hints(SpecFlags, include_extras=True)
    names = [f.name for f in fields(SpecFlags)]
    parameters: list[inspect.Parameter] = []
    for parameter in inspect.signature(command).parameters.values():
        if parameter.name == "spec":
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
            parameters += [inspect.Parameter(n, kind, default=None, annotation=flag_hints[n]) for n in names]
        else:
            parameters.append(parameter.replace(annotation=hints[parameter.name]))

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        spec = SpecFlags(**{name: kwargs.pop(name, None) for name in names})
        command(*args, spec=spec, **kwargs)

    wrapper.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return wrapper


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


@jobs_app.command("create")
@with_spec_flags
def jobs_create(
    ctx: typer.Context,
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="Unique per owner: [A-Za-z0-9._-]{1,128}.")
    ] = None,
    spec: SpecFlags = SpecFlags(),
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    file: FileOpt = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="Safe retries: a repeat returns the first job.")
    ] = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Register a job (POST /jobs). Creating the same spec under an existing name changes nothing."""
    body = _job_body(file, spec)
    if name is not None:
        body["name"] = name
    if paused:
        body["paused"] = True
    with _client(ctx, api, token, sigv4_region) as client:
        job, created = client.create_job(body, idempotency_key=idempotency_key)
    if as_json:
        _print_json(job)
        return
    verb = "created" if created else "unchanged (same spec under this name)"
    typer.echo(f"job {job.get('name')} {verb}: {job.get('id')}", err=True)
    _out().print(_job_detail(job))


@jobs_app.command("list")
def jobs_list(
    ctx: typer.Context,
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many (default: all).")] = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """The caller's jobs, by name (GET /jobs, every page)."""
    with _client(ctx, api, token, sigv4_region) as client:
        jobs: list[dict[str, Any]] = []
        for job in client.iter_jobs():
            jobs.append(job)
            if limit is not None and len(jobs) >= limit:
                break
    if as_json:
        _print_json(jobs)
    elif jobs:
        _out().print(_jobs_table(jobs))
    else:
        typer.echo("no jobs", err=True)


@jobs_app.command("get")
def jobs_get(
    ctx: typer.Context,
    job: JobArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """One job (GET /jobs/{id})."""
    with _client(ctx, api, token, sigv4_region) as client:
        found = client.get_job(_resolve(client, job))
    if as_json:
        _print_json(found)
    else:
        _out().print(_job_detail(found))


@jobs_app.command("update")
@with_spec_flags
def jobs_update(
    ctx: typer.Context,
    job: JobArgument,
    spec: SpecFlags = SpecFlags(),
    file: FileOpt = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change a job (PATCH /jobs/{id}); only the fields given change; next_run_at is recomputed from now."""
    body = _job_body(file, spec)
    if not body:
        fail("nothing to change: give at least one field flag or --file", USAGE_ERROR)
    with _client(ctx, api, token, sigv4_region) as client:
        updated = client.update_job(_resolve(client, job), body)
    if as_json:
        _print_json(updated)
    else:
        _out().print(_job_detail(updated))


def _pause_or_resume(
    ctx: typer.Context,
    job: str,
    api: str,
    token: str | None,
    sigv4_region: str | None,
    as_json: bool,
    pause: bool,
) -> None:
    with _client(ctx, api, token, sigv4_region) as client:
        job_id = _resolve(client, job)
        result = client.pause_job(job_id) if pause else client.resume_job(job_id)
    if as_json:
        _print_json(result)
    else:
        typer.echo(
            f"{'paused' if pause else 'resumed'} {job_id}; next run: {_when(result.get('next_run_at'))}"
        )


@jobs_app.command("pause")
def jobs_pause(
    ctx: typer.Context,
    job: JobArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pause a job: no runs until resumed (POST /jobs/{id}/pause)."""
    _pause_or_resume(ctx, job, api, token, sigv4_region, as_json, pause=True)


@jobs_app.command("resume")
def jobs_resume(
    ctx: typer.Context,
    job: JobArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Resume a paused job; fires missed while paused follow its `missed` policy (POST /jobs/{id}/resume)."""
    _pause_or_resume(ctx, job, api, token, sigv4_region, as_json, pause=False)


@jobs_app.command("trigger")
def jobs_trigger(
    ctx: typer.Context,
    job: JobArgument,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="A repeat makes no second run.")
    ] = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """One run now, outside the schedule (POST /jobs/{id}/trigger)."""
    with _client(ctx, api, token, sigv4_region) as client:
        run = client.trigger_job(_resolve(client, job), idempotency_key=idempotency_key)
    if as_json:
        _print_json(run)
    else:
        typer.echo(f"triggered run {run.get('id', '')} ({run.get('status', '')})")


@jobs_app.command("delete")
def jobs_delete(
    ctx: typer.Context,
    job: JobArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a job: no new runs; its history stays until retention (DELETE /jobs/{id})."""
    with _client(ctx, api, token, sigv4_region) as client:
        job_id = _resolve(client, job)
        client.delete_job(job_id)
    if as_json:
        _print_json({"id": job_id, "deleted": True})
    else:
        typer.echo(f"deleted {job_id}")


def runs_command(
    ctx: typer.Context,
    job: JobArgument,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status: queued running retrying succeeded dead skipped."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many, newest first.")] = 20,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """A job's runs, newest first (GET /jobs/{id}/runs)."""
    with _client(ctx, api, token, sigv4_region) as client:
        job_id = _resolve(client, job)
        runs: list[dict[str, Any]] = []
        for run in client.iter_runs(job_id, status=status, page_size=min(max(limit, 1), 100)):
            runs.append(run)
            if len(runs) >= limit:
                break
    if as_json:
        _print_json(runs)
    elif runs:
        _out().print(_runs_table(runs))
    else:
        typer.echo("no runs yet", err=True)


# --- import-crontab -------------------------------------------------------------------------------


def system_zone_name() -> str:
    """The machine's IANA zone (what cron schedules in): ``/etc/timezone`` or the ``/etc/localtime`` link;
    ``UTC`` when neither names one."""
    try:
        name = Path("/etc/timezone").read_text().strip()
        if name:
            return name
    except OSError:
        pass
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        return "UTC"
    marker = "/zoneinfo/"
    if marker in target:
        name = target.split(marker, 1)[1]
        return name.removeprefix("posix/").removeprefix("right/")
    return "UTC"


def import_crontab_command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Crontab file, or '-' for stdin (e.g. `crontab -l | ...`).")],
    system: Annotated[
        bool,
        typer.Option(
            "--system", help="System crontab (/etc/crontab, /etc/cron.d/*): a user before each command."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the jobs it would create; call nothing.")
    ] = False,
    tz: Annotated[
        str | None,
        typer.Option("--tz", help="Zone of entries before any CRON_TZ/TZ line (default: this machine's)."),
    ] = None,
    retries: Annotated[int, typer.Option("--retries", help="Tries per run (cron: 1).")] = 1,
    catch_up: Annotated[
        bool, typer.Option("--catch-up", help="Run fires missed during downtime (cron skips them).")
    ] = False,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import a Vixie/cronie crontab: one job with a shell target per entry. Re-importing changes nothing.

    Rejected lines are reported with their line number and make the exit status 1; the rest still import.
    """
    if str(file) == "-":
        text, label, stem = sys.stdin.read(), "<stdin>", "stdin"
    else:
        try:
            text = file.read_text()
        except OSError as error:
            fail(f"cannot read {file}: {error.strerror or error}", USAGE_ERROR)
        except UnicodeDecodeError:
            fail(f"{file} is not a text file", USAGE_ERROR)
        label, stem = str(file.resolve()), file.stem or file.name
    if not system and (label == "/etc/crontab" or label.startswith("/etc/cron.d/")):
        typer.echo(f"hint: {file} is a system crontab; pass --system to read its user field", err=True)
    defaults = {**CRON_JOB_DEFAULTS, "retry": {"max_attempts": retries}}
    if catch_up:
        defaults["missed"] = "catch_up"
    parsed = parse_crontab(
        text,
        stem=stem,
        source=label,
        system=system,
        default_timezone=tz or system_zone_name(),
        now=datetime.now(UTC),
        job_defaults=defaults,
    )
    results = _import_entries(ctx, parsed, api, token, sigv4_region, dry_run)
    display = str(file)
    for notice in parsed.notices:
        kind = "error" if notice.rejected else "note"
        typer.echo(f"{display}:{notice.line}: {kind}: {notice.message}", err=True)
    for row in results:
        if row["status"] == "rejected":
            typer.echo(f"{display}:{row['line']}: error: {row['error']}", err=True)
    if as_json:
        _print_json(
            {
                "jobs": results,
                "notices": [
                    {"line": n.line, "rejected": n.rejected, "message": n.message} for n in parsed.notices
                ],
            }
        )
    else:
        _print_import(results, dry_run)
    rejected = len(parsed.rejected) + sum(1 for r in results if r["status"] == "rejected")
    if rejected:
        typer.echo(f"{rejected} line(s) rejected", err=True)
        raise typer.Exit(FAILED)


def _import_entries(
    ctx: typer.Context,
    parsed: Crontab,
    api: str,
    token: str | None,
    sigv4_region: str | None,
    dry_run: bool,
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    if dry_run:
        for entry in parsed.entries:
            results.append(
                {
                    "line": entry.line,
                    "status": "would create",
                    **entry.job.model_dump(mode="json", exclude_defaults=False),
                }
            )
        return results
    if not parsed.entries:
        return results
    with _client(ctx, api, token, sigv4_region) as client:
        for entry in parsed.entries:
            body = entry.job.model_dump(mode="json", exclude_unset=True)
            row: dict[str, Any] = {"line": entry.line, "name": entry.job.name}
            try:
                job, created = client.create_job(body)
            except ApiError as error:
                if error.status == 0:  # unreachable: every other entry would fail the same way
                    raise
                row.update(status="rejected", error=str(error))
            else:
                row.update(status="created" if created else "unchanged", id=job.get("id"), job=job)
            results.append(row)
    return results


def _print_import(results: list[dict[str, Any]], dry_run: bool) -> None:
    if not results:
        typer.echo("no entries to import", err=True)
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ("LINE", "NAME", "SCHEDULE", "TZ", "COMMAND") if dry_run else ("LINE", "NAME", "ID", "RESULT")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in results:
        if dry_run:
            table.add_row(
                str(row["line"]), row["name"], row["schedule"], row["timezone"], row["target"]["command"]
            )
        else:
            table.add_row(str(row["line"]), row["name"], row.get("id") or "-", row["status"])
    _out().print(table)


# --- smoke ----------------------------------------------------------------------------------------


def smoke_command(
    ctx: typer.Context,
    lead: Annotated[
        float, typer.Option("--lead", min=1, max=600, help="Seconds ahead of now the one-off job fires.")
    ] = 5.0,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=1, max=3600, help="Seconds after its instant the run may take."),
    ] = 120.0,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    sigv4_region: SigV4RegionOption = None,
) -> None:
    """Check a deployment end to end: a one-off `echo` job runs on time, a repeated create replays.

    Prints each step (created, replayed, enqueued, started, succeeded, with the run id and the dispatch and
    start lateness), deletes the job at the end (also on failure), and exits 1 naming the failing step.
    """
    from jobsched.smoke import SmokeCheck, SmokeFailed, SmokeSettings

    obj = ctx.obj if isinstance(ctx.obj, dict) else {}
    timing = {name: obj[name] for name in ("clock", "sleep") if name in obj}
    with _client(ctx, api, token, sigv4_region) as client:
        typer.echo(f"smoke      {client.base_url}")
        check = SmokeCheck(
            client, say=typer.echo, settings=SmokeSettings(lead_s=lead, timeout_s=timeout), **timing
        )
        try:
            check.run()
        except SmokeFailed as failure:
            fail(f"smoke failed at step {failure.step}: {failure.message}")


# --- local ----------------------------------------------------------------------------------------


def local_command(
    port: Annotated[int, typer.Option("--port", help="Port of the API on 127.0.0.1.")] = 8080,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where jobs and history are kept.")
    ] = DEFAULT_DATA_DIR,
    tokens: Annotated[
        Path | None,
        typer.Option("--tokens", help="JSON object token -> owner (default: a dev token for `local`)."),
    ] = None,
    schedulers: Annotated[
        int, typer.Option("--schedulers", min=1, max=16, help="Competing scheduler loops.")
    ] = 1,
    workers: Annotated[int, typer.Option("--workers", min=1, max=64, help="Worker threads.")] = 4,
    demo: Annotated[
        bool, typer.Option("--demo", help="Register the sample jobs of events/demo on first start.")
    ] = False,
) -> None:
    """Run the whole system on this machine: API, scheduler, workers and sweeper on an embedded moto."""
    from jobsched.local.runtime import LocalConfig, run_forever

    try:
        config = LocalConfig(
            port=port,
            data_dir=data_dir,
            tokens_file=tokens,
            schedulers=schedulers,
            workers=workers,
            demo=demo,
            redirect_stdout=True,
        )
        run_forever(config)
    except (OSError, ValueError) as error:
        fail(str(error))


def register(app: typer.Typer) -> None:
    """Add ``jobs``, ``runs``, ``import-crontab``, ``smoke`` and ``local`` to the ``jobsched`` typer app."""
    app.add_typer(jobs_app, name="jobs")
    app.command("runs")(runs_command)
    app.command("import-crontab")(import_crontab_command)
    app.command("smoke")(smoke_command)
    app.command("local")(local_command)
