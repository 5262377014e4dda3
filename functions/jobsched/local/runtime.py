"""``jobsched local``: the whole system in one process, on an embedded SQLite and moto (design §7).

What runs, each in its own thread(s):

- the API: ``jobsched.api.wsgi.ApiWsgiApp`` (HTTP request -> API Gateway proxy event -> the API Lambda
  handler) on a threaded stdlib HTTP server, ``127.0.0.1:<port>``;
- ``--schedulers N`` scheduler loops per partition (``jobsched.wiring.Components.scheduler_group``),
  each its own lease contender: one leads, the others stand by and take over within the lease TTL;
- ``--workers N`` pollers feeding the run queue to the worker Lambda handler the way Lambda's SQS event
  source does (``local.event_source``);
- the sweeper Lambda handler each minute;
- the change pump (run outcome lines), the alert printer and the snapshotter (``local.state``).

Storage (``LocalConfig.backend``): by default (``sqlite``) the job, run and CONTROL stores are the SQLite
adapters (``jobsched.sqlite``) on ``<data dir>/jobsched.sqlite3``: every write is committed (WAL) before it
is acknowledged, so a SIGKILL loses nothing acknowledged (a power loss: at most the last second, the WAL being
synced every second; none with ``sqlite_synchronous="FULL"``, see ``jobsched.sqlite.database``). The run queue
and its dead letters are ``jobsched.sqlite.queue`` on ``<data dir>/run-queue.sqlite3`` (SQS's semantics, the
same durability). The dead-run queue, the alerts topic and the API's ``Idempotency-Key`` records stay on the
embedded moto (the keys' table is Powertools' DynamoDB layer). ``moto`` keeps every table and the run queue on
moto too, for fidelity with AWS. One process per data dir (``lock_data_dir``).

Durability of what is on moto (``local.state``): the tables are restored from ``<data dir>/state.json`` and
its change log at start; every write is journaled and the changes are saved every 2 s, compacted into a new
snapshot now and then, and a final snapshot is written at a graceful stop (SIGINT/SIGTERM: schedulers stop,
workers finish the batch in hand). A SIGKILL loses at most the last ~2.5 s of those writes (with ``sqlite``:
only idempotency records, whose loss costs a replayed response, never a second job or run: the name and
a manual trigger's key are bound in SQLite). On ``moto`` queue messages are not saved: after a restart, fires missed
while stopped follow each job's ``missed`` policy (the scheduler works from the stored ``next_run_at``), and
unfinished runs (queued, retrying, running) are put on the run queue again.

Every component is built by ``jobsched.wiring.Components`` from local mode's own ``Settings`` (the embedded
resources' names and local mode's knobs) and the embedded AWS; the Lambda handlers are called with those
components, so nothing is configured through the process environment.

The terminal gets one line per run outcome and per alert; structured logs go to ``<data dir>/local.log``
and EMF metrics to ``<data dir>/metrics.log``.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import math
import os
import secrets
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer

from jobsched.api.auth import TOKENS_FILE_SHAPE, TokenEntry, parse_tokens
from jobsched.clock import Clock, system_clock
from jobsched.console import PREFIX as CONSOLE_PREFIX
from jobsched.console import ConsoleApp
from jobsched.lambda_context import LocalLambdaContext
from jobsched.local.demo import demo_jobs
from jobsched.local.embedded_aws import REGION, isolate_from_aws, release_moto_bookkeeping, serialize_dynamodb
from jobsched.local.event_source import SqsEventSource
from jobsched.local.paths import DEFAULT_DATA_DIR, DEV_TOKEN_FILE, open_private
from jobsched.local.printer import AlertPrinter, RowPrinter, RunPrinter
from jobsched.local.server import ApiServer, accepted_hosts
from jobsched.local.state import (
    STATE_FILE,
    Item,
    Snapshotter,
    StateFileError,
    TableMirror,
    WriteJournal,
    read_state,
    restore,
)
from jobsched.observability import logger
from jobsched.ports.run_messages import MAX_DELAY_S, RunMessage
from jobsched.ports.runs import RunRow
from jobsched.resources import RUNS, TABLES, WORKER_FUNCTION_TIMEOUT_S
from jobsched.store.layout import SPEC_SK

if TYPE_CHECKING:
    from jobsched.api.app import Api
    from jobsched.sqlite.database import SqliteDatabase
    from jobsched.wiring import Components

LOG_FILE = "local.log"
LOCK_FILE = "local.lock"
"""Held locked (``flock``) by the running ``jobsched local`` of a data dir: a second one is refused."""
SQLITE_FILE = "jobsched.sqlite3"
BACKENDS = ("sqlite", "moto")
"""Local mode's storage backends (``LocalConfig.backend``); the first is the default."""
MOTO_ONLY_TABLES = {"Idempotency"}
"""The tables (``jobsched.resources`` ids) that stay on moto with the ``sqlite`` backend."""
METRICS_FILE = "metrics.log"
TOKENS_FILE = "tokens.json"
LOCAL_OWNER = "local"
PREFIX = "jobsched"
_deserializer = TypeDeserializer()


class _LinesToLog(io.TextIOBase):
    """A ``sys.stdout`` stand-in sending each complete line to ``log`` (per-thread line buffers).

    Powertools Metrics prints its EMF documents to stdout; in local mode they go to a rotating file, and the
    terminal keeps the run and alert lines.
    """

    def __init__(self, log: logging.Logger) -> None:
        super().__init__()
        self._log = log
        self._local = threading.local()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, rest = (getattr(self._local, "buffer", "") + text).split("\n")
        for line in lines:
            if line:
                self._log.info(line)
        self._local.buffer = rest
        return len(text)


class PrivateRotatingFileHandler(RotatingFileHandler):
    """A ``RotatingFileHandler`` whose files are created with mode 0600 (logs carry job ids, owners and
    errors; rotation renames a file, keeping its mode, and opens the next one here). A symlink in the log's
    place is not followed (``OSError``): it would send the logs, and the mode, to another file."""

    def _open(self) -> Any:
        fd = open_private(self.baseFilename, os.O_WRONLY | os.O_APPEND)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


DATA_FILES = (
    "jobsched.sqlite3*",
    "run-queue.sqlite3*",
    "state.*",
    "*.log",
    "*.log.*",
    "dev-token",
    "tokens.json",
    "local.lock",
)
"""Glob patterns of the files local mode keeps in its data dir (``make_private_dir`` makes them 0600)."""


def make_private_dir(path: Path) -> None:
    """Create the data dir ``path`` (and its parents) for this user alone: the directory mode 0700 and local
    mode's files already in it (``DATA_FILES``) 0600, so a data dir made by an older version, or under a looser
    umask, is closed too. Files local mode creates later are created 0600 (``jobsched.local.paths.open_private``:
    ``_write_private``, ``PrivateRotatingFileHandler``, the lock, the SQLite files
    (``jobsched.sqlite.database.create_private``), the change logs; the state snapshots by ``mkstemp``).
    Raises OSError when it cannot be created or changed."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    for pattern in DATA_FILES:
        for entry in path.glob(pattern):
            if entry.is_file() and not entry.is_symlink():
                os.chmod(entry, 0o600)


def _rotating_logger(name: str, path: Path) -> logging.Logger:
    log = logging.getLogger(name)
    log.propagate = False
    log.setLevel(logging.INFO)
    for handler in list(log.handlers):
        log.removeHandler(handler)
    handler = PrivateRotatingFileHandler(path, maxBytes=5 * 1024 * 1024, backupCount=2, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    return log


@dataclass
class LocalConfig:
    """Options of ``jobsched local`` (see the CLI) plus knobs tests turn.

    ``settings`` are extra ``Settings`` values (field name -> value) on top of local mode's own
    (shell and loopback HTTP targets on, the tokens file); ``emit`` receives every line meant for the
    terminal (default: the process's stdout as it was at start). ``backend``: one of :data:`BACKENDS`
    (``sqlite``: jobs, runs and control in ``<data dir>/jobsched.sqlite3``; ``moto``: every table on moto);
    ``sqlite_synchronous``: SQLite's ``synchronous`` level (``NORMAL``: an acknowledged write survives a crash
    of the process, and a power loss but for the last second; ``FULL``: a power loss too, at an fsync per
    write). ``accept_hosts``: ``Host`` names the server answers besides localhost, 127.0.0.1 and [::1] at
    ``port`` (``jobsched.local.server.accepted_hosts``). Raises ValueError for a bad value.
    """

    port: int = 8080
    data_dir: Path = DEFAULT_DATA_DIR
    tokens_file: Path | None = None
    schedulers: int = 1
    workers: int = 4
    demo: bool = False
    host: str = "127.0.0.1"
    snapshot_interval_s: float = 2.0
    sweep_interval_s: float = 60.0
    change_poll_s: float = 0.5
    log_level: str = "INFO"
    settings: dict[str, Any] = field(default_factory=dict)
    emit: Callable[[str], None] | None = None
    clock: Clock = system_clock
    redirect_stdout: bool = False
    """Send stdout (Powertools' EMF metric lines) to the metrics file: the CLI does; tests keep pytest's capture."""
    backend: str = BACKENDS[0]
    sqlite_synchronous: str = "NORMAL"
    accept_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.accept_hosts = tuple(self.accept_hosts)
        accepted_hosts(self.port, self.accept_hosts)  # ValueError naming a bad --accept-host
        if self.schedulers < 1 or self.workers < 1:
            raise ValueError("--schedulers and --workers must be at least 1")
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        self.data_dir = Path(self.data_dir)


class _Brief(logging.Formatter):
    """One console line for a logged exception; the structured record (with traceback) is in the file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def format(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        return f"error: {record.getMessage()}: {error!r} (details in {self.path})"


def route_logs(path: Path, level: str) -> None:
    """Send the structured JSON logs (Powertools Logger) to ``path`` (rotated at 5 MB) instead of stdout,
    which is for the run and alert lines; logged exceptions also get one line on stderr."""
    std = logging.getLogger(logger.name)
    formatter = logger.registered_formatter
    for handler in list(std.handlers):
        std.removeHandler(handler)
    to_file = PrivateRotatingFileHandler(path, maxBytes=5 * 1024 * 1024, backupCount=2, encoding="utf-8")
    to_file.setFormatter(formatter)
    std.addHandler(to_file)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.ERROR)
    console.addFilter(lambda record: record.exc_info is not None)
    console.setFormatter(_Brief(path))
    std.addHandler(console)
    logger.setLevel(level)


def load_tokens_file(path: Path) -> dict[str, TokenEntry]:
    """A ``--tokens`` file: a JSON object token -> owner, or token -> ``{"owner": ..., "shell": true}`` for an
    owner that may use shell targets (``jobsched.api.auth.parse_tokens``). Raises ValueError naming the problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read --tokens {path}: {error.strerror or error}") from error
    except ValueError as error:
        raise ValueError(f"--tokens {path} is not valid JSON: {error}") from error
    if not data:
        raise ValueError(f"--tokens {path} must be {TOKENS_FILE_SHAPE}")
    try:
        return parse_tokens(data)
    except ValueError as error:
        raise ValueError(f"--tokens {path}: {error}") from error


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` through a temp file of mode 0600 (one left over by an interrupted write
    is made 0600 too, never followed as a symlink)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    fd = open_private(temp, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temp, path)


def prepare_tokens(data_dir: Path, tokens_file: Path | None) -> tuple[Path, str, bool]:
    """The tokens file the API reads, a token of owner ``local`` (for the demo jobs) and whether that token is
    the generated dev token (printed at start).

    Without ``tokens_file``: the dev token in ``<data dir>/dev-token`` (created once, kept across restarts)
    and ``<data dir>/tokens.json`` = ``{dev token: {"owner": "local", "shell": true}}``: the laptop's owner
    runs shell targets. With it: its tokens as given (shell targets only for owners with a token marked
    ``"shell": true``), plus (when no token maps to ``local``) an internal one of owner ``local`` with shell
    for registering the demo jobs, in ``<data dir>/tokens.json`` (mode 0600).
    """
    effective = data_dir / TOKENS_FILE
    if tokens_file is None:
        token_path = data_dir / DEV_TOKEN_FILE
        token = token_path.read_text().strip() if token_path.is_file() else ""
        if not token:
            token = "dev-" + secrets.token_urlsafe(24)
            _write_private(token_path, token + "\n")
        _write_private(effective, json.dumps({token: TokenEntry(LOCAL_OWNER, shell=True).as_json()}))
        return effective, token, True
    tokens = load_tokens_file(tokens_file)
    local = next((t for t, entry in tokens.items() if entry.owner == LOCAL_OWNER), None)
    if local is None:
        local = "internal-" + secrets.token_urlsafe(24)
        tokens[local] = TokenEntry(LOCAL_OWNER, shell=True)
    _write_private(effective, json.dumps({token: entry.as_json() for token, entry in tokens.items()}))
    return effective, local, False


def lock_data_dir(data_dir: Path) -> int:
    """Lock ``data_dir`` for this process (an exclusive ``flock`` of ``<data dir>/local.lock``, released when the
    returned descriptor is closed or the process ends, ``kill -9`` included). Raises OSError naming the data dir
    when another process holds it: two of them on one data dir would reopen each other's in-flight queue
    messages and schedule, sweep and snapshot the same data."""
    import fcntl

    fd = open_private(data_dir / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise OSError(
            f"{data_dir} is in use by another jobsched local (pid {holder}); stop it or pick another --data-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def unfinished_messages(runs: list[Item], *, now_ms: int, heartbeat_stale_s: int) -> list[RunMessage]:
    """Run-queue messages for the unfinished runs of a restored runs table (low-level items).

    ``queued`` runs are sent for their dispatch instant, ``retrying`` ones for their ``retry_at``, and
    ``running`` ones (their worker died with the process) for when their heartbeat turns stale, the moment
    a worker may take them over; each delay is capped at SQS's 900 s (the sweeper covers the rest).
    """
    return _requeue(
        [{k: _deserializer.deserialize(v) for k, v in raw.items()} for raw in runs],
        now_ms=now_ms,
        heartbeat_stale_s=heartbeat_stale_s,
    )


def unfinished_row_messages(rows: list[RunRow], *, now_ms: int, heartbeat_stale_s: int) -> list[RunMessage]:
    """:func:`unfinished_messages` for run rows (the SQLite run store's ``unfinished()``)."""
    return _requeue(
        [{**dataclasses.asdict(r), "status": r.status.value} for r in rows],
        now_ms=now_ms,
        heartbeat_stale_s=heartbeat_stale_s,
    )


def _requeue(items: list[dict[str, Any]], *, now_ms: int, heartbeat_stale_s: int) -> list[RunMessage]:
    messages: list[RunMessage] = []
    for item in items:
        status = item.get("status")
        if status == "queued":
            at = item.get("dispatch_at") or item["scheduled_for"]
        elif status == "retrying":
            at = item.get("retry_at") or item.get("dispatch_at") or item["scheduled_for"]
        elif status == "running":
            beat = item.get("heartbeat_at") or item.get("started_at") or now_ms
            at = int(beat) + heartbeat_stale_s * 1000 + 1000
        else:
            continue
        delay = min(MAX_DELAY_S, max(0, math.ceil((int(at) - now_ms) / 1000)))
        messages.append(
            RunMessage(str(item["job_id"]), int(item["scheduled_for"]), delay, enqueued_at=now_ms)
        )
    return messages


def _move_moto_state(
    sqlite_path: Path, saved: dict[str, list[Item]], *, synchronous: str, now_ms: int
) -> None:
    """Move the moto backend's saved tables into a new SQLite database at ``sqlite_path`` (``import_moto_state``),
    built in a file of its own and renamed into place once whole: a start killed midway leaves no database, so
    the next start moves the data dir again instead of serving what was moved before the kill."""
    from jobsched.sqlite.database import SqliteDatabase
    from jobsched.sqlite.migration import import_moto_state

    moving = sqlite_path.with_name(f".{sqlite_path.name}.moving")
    for leftover in (moving, moving.with_name(moving.name + "-wal"), moving.with_name(moving.name + "-shm")):
        leftover.unlink(missing_ok=True)  # a killed move's: started over
    staging = SqliteDatabase(moving, synchronous=synchronous)  # type: ignore[arg-type]
    try:
        import_moto_state(staging, saved, now_ms=now_ms)
    finally:
        staging.close()  # the WAL folded into the file: the rename moves everything
    os.replace(moving, sqlite_path)


def _refuse_jobs_only_on_moto(sqlite_path: Path, saved: dict[str, list[Item]], config: LocalConfig) -> None:
    """Refuse a SQLite start whose data dir's ``state.json`` (``saved``) holds live jobs the database at
    ``sqlite_path`` has never known: jobs created with ``--backend moto`` after the data dir moved to SQLite.
    Starting would rewrite the state file without them (only the moto-only tables stay in it), losing them from
    both files. Raises ``OSError`` naming the state file, how many jobs, and the two ways on (the CLI prints it
    as one line and exits 1)."""
    from jobsched.sqlite.database import SqliteDatabase

    specs = [i for i in saved.get("Jobs", []) if i.get("sk", {}).get("S") == SPEC_SK and "doc" in i]
    if not specs:
        return
    database = SqliteDatabase(sqlite_path, synchronous=config.sqlite_synchronous)  # type: ignore[arg-type]
    try:
        only_on_moto = {str(i["pk"]["S"]).removeprefix("job#") for i in specs} - database.known_job_ids()
    finally:
        database.close()
    if only_on_moto:
        raise OSError(
            f"{config.data_dir / STATE_FILE} holds {len(only_on_moto)} job(s) created with --backend moto after this data"
            f" dir moved to SQLite (e.g. {min(only_on_moto)}); start with --backend moto to keep using them, or"
            " move state.json aside to start on SQLite without them"
        )


class LocalRuntime:
    """The local system: ``start()`` brings it up (moto, restore, threads, API), ``stop()`` drains and saves.

    Not re-entrant and one per process: it starts ``moto.mock_aws`` (and points the process's AWS
    credentials at fake ones, ``isolate_from_aws``). Its components are built from ``settings``, set by
    ``start()``: the embedded resources plus local mode's knobs (shell and loopback HTTP targets on, the
    tokens file) and ``LocalConfig.settings``.
    """

    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self.state_path = config.data_dir / STATE_FILE
        self.server: ApiServer | None = None
        self.token = ""
        self.restored: dict[str, int] = {}
        self._mock: Any = None
        self._wrapper: Any = None
        self._snapshotter: Snapshotter | None = None
        self._stop_scheduling = threading.Event()
        self._stop_workers = threading.Event()
        self._stop_rest = threading.Event()
        self._threads: dict[str, list[threading.Thread]] = {"scheduling": [], "workers": [], "rest": []}
        self._stopped = False
        self._lock_fd: int | None = None
        self._console = sys.stdout
        self._redirected: Any = None
        self._api: Api | None = None
        self.components: Components | None = None
        """The ``jobsched.wiring.Components`` everything runs on (set by ``start()``)."""
        self.database: SqliteDatabase | None = None
        """The SQLite database of the ``sqlite`` backend (set by ``start()``; None on ``moto``)."""

    def emit(self, line: str) -> None:
        """One line for the terminal (``LocalConfig.emit``, or the stdout the process started with)."""
        if self.config.emit is not None:
            self.config.emit(line)
        else:
            print(line, file=self._console, flush=True)

    @property
    def url(self) -> str:
        return self.server.url if self.server else f"http://{self.config.host}:{self.config.port}"

    # --- start ------------------------------------------------------------------------------

    def start(self) -> None:
        """Bring the system up (the API answers once this returns). Raises ``StateFileError`` (unusable state
        file), ValueError (bad tokens file) or OSError (port in use, data dir not writable) before any
        loop runs."""
        config = self.config
        make_private_dir(config.data_dir)
        self._lock_fd = lock_data_dir(config.data_dir)
        sqlite_path = config.data_dir / SQLITE_FILE
        first_start = (
            not self.state_path.exists()
            and not any(config.data_dir.glob("state.*.changes"))
            and not sqlite_path.exists()
        )
        try:
            saved = read_state(self.state_path)
            if config.backend == "sqlite" and sqlite_path.exists():
                _refuse_jobs_only_on_moto(sqlite_path, saved, config)
        except BaseException:
            os.close(self._lock_fd)  # refused before anything started: the data dir is free again
            self._lock_fd = None
            raise
        tokens_path, self.token, generated = prepare_tokens(config.data_dir, config.tokens_file)
        from jobsched.api.wsgi import ApiWsgiApp

        try:  # bind first: a busy port fails before anything else starts
            app = ConsoleApp(ApiWsgiApp(self._serve_api))  # the web console at /ui/, the API elsewhere
            self.server = ApiServer(app, config.host, config.port, accept_hosts=config.accept_hosts)
        except OSError as error:
            raise OSError(
                f"cannot listen on {config.host}:{config.port} ({error.strerror or error}); is another "
                "jobsched local running? Pick another port with --port"
            ) from error

        from moto import mock_aws

        from jobsched.aws import Aws, provision
        from jobsched.settings import Settings
        from jobsched.wiring import Components, SqliteComponents

        isolate_from_aws()
        wrapper = serialize_dynamodb()
        if wrapper is None:
            raise RuntimeError(
                "this moto version is not supported by local mode (see jobsched.local.embedded_aws)"
            )
        self._mock = mock_aws()
        self._mock.start()
        aws = Aws(region=REGION)
        env = provision(aws, PREFIX)
        settings = Settings(
            **{
                **{name.lower(): value for name, value in env.items()},
                "allow_shell_targets": True,
                "allow_loopback_http_targets": True,
                "local_tokens_file": str(tokens_path.resolve()),
                **config.settings,
            }
        )
        # structured logs to the data dir from here on (a moto data dir's move to SQLite logs what it skips)
        route_logs(config.data_dir / LOG_FILE, os.environ.get("POWERTOOLS_LOG_LEVEL", config.log_level))
        sqlite = config.backend == "sqlite"
        if sqlite:
            from jobsched.sqlite.database import SqliteDatabase

            if not sqlite_path.exists() and saved:  # a data dir of the moto backend: its jobs, runs and marks
                _move_moto_state(
                    sqlite_path, saved, synchronous=config.sqlite_synchronous, now_ms=config.clock()
                )
            self.database = SqliteDatabase(sqlite_path, synchronous=config.sqlite_synchronous)  # type: ignore[arg-type]
            components: Components = SqliteComponents(
                settings, aws, clock=config.clock, database=self.database
            )
        else:
            components = Components(settings, aws, clock=config.clock)
        self.components = components
        # a scheduler tick without runs flushes no metric: Powertools warns each time; not news here
        warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)
        # EMF metrics (Powertools prints them) to a rotating file; the terminal keeps the run lines
        self._console = sys.stdout
        if config.redirect_stdout:
            self._redirected = _LinesToLog(
                _rotating_logger("jobsched.local.stdout", config.data_dir / METRICS_FILE)
            )
            sys.stdout = self._redirected

        table_names = {t.id: env[t.env_var] for t in TABLES}
        now = config.clock()
        if self.database is not None:
            saved = {table: items for table, items in saved.items() if table in MOTO_ONLY_TABLES}
        restored_items = restore(aws.dynamodb, table_names, saved, now_ms=now)
        if self.database is not None:
            self.database.reap_expired(now)
            self.restored = self.database.counts()
        else:
            self.restored = {
                "jobs": sum(1 for i in restored_items.get("Jobs", []) if i.get("sk", {}).get("S") == "spec"),
                "runs": len(restored_items.get(RUNS.id, [])),
            }

        journal = WriteJournal(Aws(region=REGION).dynamodb, table_names)
        mirror = TableMirror(journal, aws.dynamodb, table_names)
        for table_id, items in restored_items.items():
            mirror.load(table_id, items)
        wrapper.observer = journal.record
        self._wrapper = wrapper
        if self.database is not None:
            self.database.run_listeners.append(RowPrinter(self._job_name, self.emit))
        else:
            mirror.listeners.append(RunPrinter(mirror, self.emit))
        mirror.needs_base = bool(saved)  # expired items dropped and leases released: save a fresh generation
        self._snapshotter = Snapshotter(
            mirror, self.state_path, interval_s=config.snapshot_interval_s, clock=config.clock
        )
        self._snapshotter.remove_stale_logs()

        if self.database is not None:
            requeue = unfinished_row_messages(
                components.runs().unfinished(),  # type: ignore[attr-defined]
                now_ms=now,
                heartbeat_stale_s=settings.heartbeat_stale_s,
            )
        else:
            requeue = unfinished_messages(
                restored_items.get(RUNS.id, []), now_ms=now, heartbeat_stale_s=settings.heartbeat_stale_s
            )
        if requeue:
            components.run_queue().send(requeue)

        alerts = AlertPrinter(
            aws.sqs, aws.sns, settings.alerts_topic_arn, f"{PREFIX}-local-alerts", self.emit
        )

        self._api = components.with_own_clients().api()
        self.server.start()

        self._start_schedulers(components)
        self._start_workers(components)
        self._spawn("rest", "sweeper", self._sweep_loop, components.with_own_clients())
        self._spawn("rest", "change-pump", self._pump_loop, mirror)
        self._spawn("rest", "alerts", alerts.run, self._stop_rest)
        self._spawn("rest", "snapshotter", self._snapshotter.run, self._stop_rest)
        if self.database is not None:
            self._spawn("rest", "sqlite-sync", self._sync_loop, self.database, components.run_queue_client())

        self._banner(generated, requeue)
        if config.demo and first_start:
            self._register_demo()

    def _job_name(self, job_id: str) -> str:
        """The name of job ``job_id`` for a run line of the SQLite backend (the id when the job is gone)."""
        from jobsched.sqlite.jobs import SqliteJobStore

        assert self.database is not None
        return SqliteJobStore(self.database).name_of(job_id) or job_id

    def _spawn(self, group: str, name: str, target: Callable[..., Any], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads[group].append(thread)

    def _serve_api(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The API Lambda handler on local mode's API wiring (set by ``start()`` before the server starts)."""
        from jobsched.handlers.api import handler

        return handler(event, context, api=self._api)

    def _start_schedulers(self, components: Components) -> None:
        from jobsched.domain.lease import new_holder_id

        stop = self._stop_scheduling
        pacing = dataclasses.replace(components, sleep=_waiter(stop))
        for index in range(self.config.schedulers):
            for partition in range(components.settings.scheduler_partitions):
                loop = pacing.scheduler_group(partition, holder=new_holder_id(f"local-scheduler-{index}"))
                self._spawn("scheduling", f"scheduler-{index}-p{partition}", _run_loop, loop, stop)

    def _start_workers(self, components: Components) -> None:
        from jobsched.handlers.worker import handler

        batches = components.worker_batches()  # each record thread: a worker on clients of its own
        for index in range(self.config.workers):
            source = SqsEventSource(
                components.run_queue_client(),
                components.settings.run_queue_url,
                functools.partial(handler, batches=batches),
                function_name="jobsched-worker-local",
                region=REGION,
                timeout_s=WORKER_FUNCTION_TIMEOUT_S,
            )
            self._spawn("workers", f"worker-{index}", source.run, self._stop_workers)

    def _sweep_loop(self, components: Components) -> None:
        from jobsched.handlers.sweeper import handler

        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        sweeper = components.sweeper()
        while not self._stop_scheduling.is_set():
            try:
                context = LocalLambdaContext("jobsched-sweeper-local", timeout_s=60, region=REGION)
                handler(event, context, sweeper=sweeper)
                if self.database is not None:  # retention, as DynamoDB's TTL (the moto backend's snapshotter)
                    self.database.reap_expired(self.config.clock())
            except Exception:
                logger.exception("sweeper failed; next sweep in a minute")
            if self._stop_scheduling.wait(self.config.sweep_interval_s):
                return

    def _sync_loop(self, *files: Any) -> None:
        """Sync the SQLite WALs to the disk each second (``checkpoint()`` of the database and the run queue)."""
        while not self._stop_rest.wait(1.0):
            for file in files:
                try:
                    file.checkpoint()
                except Exception:
                    logger.exception("SQLite checkpoint failed; retrying")

    def _pump_loop(self, mirror: TableMirror) -> None:
        """Apply the write journal (printing run lines) twice a second; every ~5 s let moto forget the
        objects it tracks (``release_moto_bookkeeping``), so memory follows the data, not the traffic."""
        polls = 0
        while not self._stop_rest.wait(self.config.change_poll_s):
            polls += 1
            try:
                mirror.poll()
                if polls % max(1, round(5 / self.config.change_poll_s)) == 0:
                    release_moto_bookkeeping()
            except Exception:
                logger.exception("change pump failed; retrying")

    def _banner(self, generated: bool, requeue: list[RunMessage]) -> None:
        emit, config = self.emit, self.config
        restored = ""
        if any(self.restored.values()):
            jobs, runs = self.restored["jobs"], self.restored["runs"]
            source = self.database.path if self.database is not None else self.state_path
            restored = f"; restored {jobs} job(s) and {runs} run(s) from {source}"
            if requeue:
                restored += f", {len(requeue)} unfinished run(s) queued again"
        storage = f"SQLite {config.data_dir / SQLITE_FILE}" if self.database is not None else "moto"
        saving = (
            "each write saved before it is answered"
            if self.database is not None
            else f"snapshot every {config.snapshot_interval_s:g} s"
        )
        emit(f"jobsched local: API on {self.url}  (data in {config.data_dir}, {storage}{restored})")
        emit(f"console: {self.url}{CONSOLE_PREFIX}/  (the web console; it asks for a token)")
        if generated:
            emit(f"dev token (owner {LOCAL_OWNER!r}): {self.token}")
            emit(
                f'  saved in {config.data_dir / DEV_TOKEN_FILE}; the CLI uses it; curl -H "Authorization: Bearer {self.token}"'
            )
        else:
            emit(f"tokens from {config.tokens_file}")
        emit(
            f"{config.schedulers} scheduler loop(s), {config.workers} worker(s), sweeper every "
            f"{config.sweep_interval_s:g} s, {saving}; "
            f"logs in {config.data_dir / LOG_FILE}, metrics in {config.data_dir / METRICS_FILE}; Ctrl-C stops"
        )

    def _register_demo(self) -> None:
        import httpx

        from jobsched.client import ApiError, JobschedClient

        bodies = demo_jobs(self.url)
        if not bodies:
            self.emit("demo: no events/demo folder next to this installation; no demo jobs")
            return
        with JobschedClient(self.url, token=self.token, transport=httpx.HTTPTransport(retries=3)) as client:
            for body in bodies:
                try:
                    job, _ = client.create_job(body)
                except ApiError as error:
                    self.emit(f"demo: {body.get('name')}: {error}")
                else:
                    self.emit(
                        f"demo: registered {job['name']} ({job['schedule']}), next run {job.get('next_run_at')}"
                    )

    # --- stop -------------------------------------------------------------------------------

    def stop(self, timeout_s: float = 30.0) -> None:
        """Graceful stop: scheduler loops and sweeper, then workers (the batch in hand finishes), the API,
        the printers and a final snapshot from a full scan. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_scheduling.set()
        _join(self._threads["scheduling"], timeout_s)
        self._stop_workers.set()
        _join(self._threads["workers"], timeout_s)
        if self.server:
            self.server.stop()
        self._stop_rest.set()
        _join(self._threads["rest"], 5.0)
        if self._snapshotter:
            try:
                self._snapshotter.final()
            except Exception:
                logger.exception("final snapshot failed")
                self._snapshotter.save_if_changed()
        if self._wrapper is not None:
            self._wrapper.observer = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self.database is not None:
            self.database.close()
        if self._redirected is not None and sys.stdout is self._redirected:
            sys.stdout = self._console
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the data dir's lock
            self._lock_fd = None

    def emergency_save(self) -> None:
        """Best-effort save of the changes seen so far (a second Ctrl-C)."""
        if self._snapshotter:
            self._snapshotter.save_if_changed()


def _waiter(stop: threading.Event) -> Callable[[float], None]:
    """A sleep that ends early when ``stop`` is set (so a stop never waits for a scheduler's second)."""

    def wait(seconds: float) -> None:
        stop.wait(seconds)

    return wait


def _run_loop(loop: Any, stop: threading.Event) -> None:
    try:
        loop.run(lambda: not stop.is_set())
    except Exception:
        logger.exception("scheduler loop crashed")


def _join(threads: list[threading.Thread], timeout_s: float) -> None:
    for thread in threads:
        thread.join(timeout=timeout_s)
        if thread.is_alive():
            logger.warning("thread did not stop in time", thread=thread.name)


def run_forever(config: LocalConfig) -> None:
    """Start local mode and serve until SIGINT/SIGTERM; then stop gracefully (a second signal saves what it
    has and exits at once)."""
    runtime = LocalRuntime(config)
    stop = threading.Event()
    signals = {"count": 0}

    def on_signal(number: int, frame: Any) -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            runtime.emit("second signal: saving and exiting now")
            runtime.emergency_save()
            os._exit(130)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            runtime.start()
        except StateFileError as error:
            raise ValueError(str(error)) from error
        while not stop.wait(0.5):
            pass
        runtime.emit("stopping: finishing runs in progress (Ctrl-C again to exit now)...")
    finally:
        runtime.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)
    saved_in = runtime.database.path if runtime.database is not None else runtime.state_path
    runtime.emit(f"stopped; state saved in {saved_in}")
    sys.stdout.flush()
