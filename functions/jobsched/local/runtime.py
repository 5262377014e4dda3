"""``jobsched local``: the whole system in one process, on an embedded SQLite and moto (design §7).

What runs, each in its own thread(s):

- the API: ``jobsched.api.wsgi.ApiWsgiApp`` (HTTP request -> API Gateway proxy event -> the API Lambda
  handler) on a threaded stdlib HTTP server, ``127.0.0.1:<port>``;
- ``--schedulers N`` scheduler loops per partition (``jobsched.runtime.wiring.Components.scheduler_group``),
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
moto too, for fidelity with AWS. One process per data dir (``local.paths.lock_data_dir``).

Durability of what is on moto (``local.state``): the tables are restored from ``<data dir>/state.json`` and
its change log at start; every write is journaled and the changes are saved every 2 s, compacted into a new
snapshot now and then, and a final snapshot is written at a graceful stop (SIGINT/SIGTERM: schedulers stop,
workers finish the batch in hand). A SIGKILL loses at most the last ~2.5 s of those writes (with ``sqlite``:
only idempotency records, whose loss costs a replayed response, never a second job or run: the name and
a manual trigger's key are bound in SQLite). On ``moto`` queue messages are not saved: after a restart, fires missed
while stopped follow each job's ``missed`` policy (the scheduler works from the stored ``next_run_at``), and
unfinished runs (queued, retrying, running) are put on the run queue again.

Every component is built by ``jobsched.runtime.wiring.Components`` from local mode's own ``Settings`` (the embedded
resources' names and local mode's knobs) and the embedded AWS; the Lambda handlers are called with those
components, so nothing is configured through the process environment.

The terminal gets one line per run outcome and per alert; structured logs go to ``<data dir>/local.log``
and EMF metrics to ``<data dir>/metrics.log``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobsched.console import PREFIX as CONSOLE_PREFIX
from jobsched.console import ConsoleApp
from jobsched.local.archive import archive_dir, archive_then_reap
from jobsched.local.config import LocalConfig
from jobsched.local.demo import demo_jobs
from jobsched.local.embedded_aws import REGION, isolate_from_aws, serialize_dynamodb
from jobsched.local.event_source import SqsEventSource
from jobsched.local.logs import LOG_FILE, METRICS_FILE, LinesToLog, rotating_logger, route_logs
from jobsched.local.loops import join, pump_loop, run_loop, sweep_loop, sync_loop, waiter
from jobsched.local.paths import DEV_TOKEN_FILE, SQLITE_FILE, lock_data_dir, make_private_dir
from jobsched.local.printer import AlertPrinter, RowPrinter, RunPrinter
from jobsched.local.recovery import (
    move_moto_state,
    refuse_jobs_only_on_moto,
    unfinished_messages,
    unfinished_row_messages,
)
from jobsched.local.server import ApiServer
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
from jobsched.local.tokens import LOCAL_OWNER, prepare_tokens
from jobsched.observability import logger
from jobsched.ports.run_messages import RunMessage
from jobsched.resources import RUNS, TABLES, WORKER_FUNCTION_TIMEOUT_S

if TYPE_CHECKING:
    from jobsched.api.app import Api
    from jobsched.aws.clients import Aws
    from jobsched.runtime.wiring import Components
    from jobsched.settings import Settings
    from jobsched.sqlite.database import SqliteDatabase

MOTO_ONLY_TABLES = {"Idempotency"}
"""The tables (``jobsched.resources`` ids) that stay on moto with the ``sqlite`` backend."""
PREFIX = "jobsched"
"""The name prefix of the embedded resources (``jobsched.aws.clients.provision``)."""


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
        """The ``jobsched.runtime.wiring.Components`` everything runs on (set by ``start()``)."""
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
        """The API's base URL (``http://host:port``; the bound port once the server is bound)."""
        return self.server.url if self.server else f"http://{self.config.host}:{self.config.port}"

    # --- start ------------------------------------------------------------------------------

    def start(self) -> None:
        """Bring the system up (the API answers once this returns). Raises ``StateFileError`` (unusable state
        file), ValueError (bad tokens file) or OSError (port in use, data dir not writable) before any
        loop runs."""
        saved, first_start = self._claim_data_dir()
        tokens_path, self.token, generated = prepare_tokens(self.config.data_dir, self.config.tokens_file)
        self._bind_server()
        aws, env = self._start_embedded_aws()
        settings = self._settings(env, tokens_path)
        # structured logs to the data dir from here on (a moto data dir's move to SQLite logs what it skips)
        route_logs(
            self.config.data_dir / LOG_FILE, os.environ.get("POWERTOOLS_LOG_LEVEL", self.config.log_level)
        )
        components = self._wire(settings, aws, saved)
        self._divert_metrics()
        table_names = {t.id: env[t.env_var] for t in TABLES}
        now = self.config.clock()
        restored_items = self._restore_tables(aws, table_names, saved, now)
        mirror = self._journal_writes(aws, table_names, restored_items, saved)
        requeue = self._requeue_unfinished(components, restored_items, now)
        self._serve(components, mirror, aws)
        self._banner(generated, requeue)
        if self.config.demo and first_start:
            self._register_demo()

    def _claim_data_dir(self) -> tuple[dict[str, list[Item]], bool]:
        """Make the data dir private and lock it (``lock_data_dir``), then read the saved state: the saved tables
        (``read_state``) and whether this is the data dir's first start (no state, change log or database).
        Raises ``StateFileError`` or the ``OSError`` of ``refuse_jobs_only_on_moto``, the lock released."""
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
                refuse_jobs_only_on_moto(sqlite_path, saved, config)
        except BaseException:
            os.close(self._lock_fd)  # refused before anything started: the data dir is free again
            self._lock_fd = None
            raise
        return saved, first_start

    def _bind_server(self) -> None:
        """Bind the API's server (the web console at ``/ui/``, the API elsewhere), not serving yet: a busy port
        fails before anything else starts. Raises OSError naming the address."""
        from jobsched.api.wsgi import ApiWsgiApp

        config = self.config
        try:
            app = ConsoleApp(ApiWsgiApp(self._serve_api))
            self.server = ApiServer(app, config.host, config.port, accept_hosts=config.accept_hosts)
        except OSError as error:
            raise OSError(
                f"cannot listen on {config.host}:{config.port} ({error.strerror or error}); is another "
                "jobsched local running? Pick another port with --port"
            ) from error

    def _start_embedded_aws(self) -> tuple[Aws, dict[str, str]]:
        """Start moto in this process (fake credentials, DynamoDB's calls serialized) and provision the
        resources; their clients and their environment (env var -> name, ``jobsched.aws.clients.provision``). Raises
        RuntimeError for a moto version local mode does not support."""
        from moto import mock_aws

        from jobsched.aws.clients import Aws, provision

        isolate_from_aws()
        wrapper = serialize_dynamodb()
        if wrapper is None:
            raise RuntimeError(
                "this moto version is not supported by local mode (see jobsched.local.embedded_aws)"
            )
        self._wrapper = wrapper
        self._mock = mock_aws()
        self._mock.start()
        aws = Aws(region=REGION)
        return aws, provision(aws, PREFIX)

    def _settings(self, env: dict[str, str], tokens_path: Path) -> Settings:
        """Local mode's ``Settings``: the embedded resources (``env``), shell and loopback HTTP targets on, the
        tokens file, then ``LocalConfig.settings``."""
        from jobsched.settings import Settings

        return Settings(
            **{
                **{name.lower(): value for name, value in env.items()},
                "allow_shell_targets": True,
                "allow_loopback_http_targets": True,
                "local_tokens_file": str(tokens_path.resolve()),
                **self.config.settings,
            }
        )

    def _wire(self, settings: Settings, aws: Aws, saved: dict[str, list[Item]]) -> Components:
        """The components of ``LocalConfig.backend``: on ``sqlite``, ``SqliteComponents`` on the data dir's
        database (a ``moto`` data dir's ``saved`` tables moved into it first, ``move_moto_state``); on ``moto``,
        ``Components`` on ``aws``. Sets ``components`` and ``database``."""
        from jobsched.local.components import SqliteComponents
        from jobsched.runtime.wiring import Components

        config = self.config
        components: Components
        if config.backend == "sqlite":
            from jobsched.sqlite.database import SqliteDatabase

            sqlite_path = config.data_dir / SQLITE_FILE
            if not sqlite_path.exists() and saved:  # a data dir of the moto backend: its jobs, runs and marks
                move_moto_state(
                    sqlite_path, saved, synchronous=config.sqlite_synchronous, now_ms=config.clock()
                )
            self.database = SqliteDatabase(sqlite_path, synchronous=config.sqlite_synchronous)
            components = SqliteComponents(settings, aws, clock=config.clock, database=self.database)
        else:
            components = Components(settings, aws, clock=config.clock)
        self.components = components
        return components

    def _divert_metrics(self) -> None:
        """EMF metrics (Powertools prints them on stdout) to the data dir's metrics file when
        ``LocalConfig.redirect_stdout``; the terminal keeps the run lines."""
        # a scheduler tick without runs flushes no metric: Powertools warns each time; not news here
        warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)
        self._console = sys.stdout
        if self.config.redirect_stdout:
            self._redirected = LinesToLog(
                rotating_logger("jobsched.local.stdout", self.config.data_dir / METRICS_FILE)
            )
            sys.stdout = self._redirected

    def _restore_tables(
        self, aws: Aws, table_names: dict[str, str], saved: dict[str, list[Item]], now: int
    ) -> dict[str, list[Item]]:
        """Put the ``saved`` tables kept on moto back into it (on ``sqlite``: the moto-only ones), drop what has
        expired by ``now`` (epoch ms), and count the restored jobs and runs (``restored``). Returns the items
        restored, by table id."""
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
        return restored_items

    def _journal_writes(
        self,
        aws: Aws,
        table_names: dict[str, str],
        restored_items: dict[str, list[Item]],
        saved: dict[str, list[Item]],
    ) -> TableMirror:
        """Journal every write to moto's tables into a mirror of them (loaded with ``restored_items``), print a
        line per run outcome (from the mirror on ``moto``, from the database on ``sqlite``), and build the
        snapshotter that saves the mirror. Returns the mirror."""
        from jobsched.aws.clients import Aws

        journal = WriteJournal(Aws(region=REGION).dynamodb, table_names)
        mirror = TableMirror(journal, aws.dynamodb, table_names)
        for table_id, items in restored_items.items():
            mirror.load(table_id, items)
        self._wrapper.observer = journal.record
        if self.database is not None:
            self.database.run_listeners.append(RowPrinter(self._job_name, self.emit))
        else:
            mirror.listeners.append(RunPrinter(mirror, self.emit))
        mirror.needs_base = bool(saved)  # expired items dropped and leases released: save a fresh generation
        self._snapshotter = Snapshotter(
            mirror, self.state_path, interval_s=self.config.snapshot_interval_s, clock=self.config.clock
        )
        self._snapshotter.remove_stale_logs()
        return mirror

    def _requeue_unfinished(
        self, components: Components, restored_items: dict[str, list[Item]], now: int
    ) -> list[RunMessage]:
        """Put the runs the last stop left unfinished on the run queue again (``unfinished_row_messages`` of the
        database's runs, or ``unfinished_messages`` of the restored runs table); the messages sent."""
        from jobsched.local.components import SqliteComponents

        stale_s = components.settings.heartbeat_stale_s
        if isinstance(components, SqliteComponents):
            requeue = unfinished_row_messages(
                components.runs().unfinished(), now_ms=now, heartbeat_stale_s=stale_s
            )
        else:
            requeue = unfinished_messages(
                restored_items.get(RUNS.id, []), now_ms=now, heartbeat_stale_s=stale_s
            )
        if requeue:
            components.run_queue().send(requeue)
        return requeue

    def _serve(self, components: Components, mirror: TableMirror, aws: Aws) -> None:
        """Start serving: the API's server, then the threads (scheduler loops, workers, the sweeper, the change
        pump, the alert printer, the snapshotter and, on ``sqlite``, the WALs' sync)."""
        alerts = AlertPrinter(
            aws.sqs, aws.sns, components.settings.alerts_topic_arn, f"{PREFIX}-local-alerts", self.emit
        )
        self._api = components.with_own_clients().api()
        assert self.server is not None and self._snapshotter is not None  # set by the steps before
        self.server.start()
        self._start_schedulers(components)
        self._start_workers(components)
        config, rest = self.config, self._stop_rest
        # on sqlite, each sweep also moves expired runs to the archive and reaps the rest (as DynamoDB's TTL)
        reap = (
            archive_then_reap(self.database, archive_dir(config.data_dir))
            if self.database is not None
            else None
        )
        sweeping = (self._stop_scheduling, config.sweep_interval_s, reap, config.clock)
        self._spawn("rest", "sweeper", sweep_loop, components.with_own_clients(), *sweeping)
        self._spawn("rest", "change-pump", pump_loop, mirror, rest, config.change_poll_s)
        self._spawn("rest", "alerts", alerts.run, rest)
        self._spawn("rest", "snapshotter", self._snapshotter.run, rest)
        if self.database is not None:
            self._spawn("rest", "sqlite-sync", sync_loop, rest, self.database, components.run_queue_client())

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
        pacing = dataclasses.replace(components, sleep=waiter(stop))
        for index in range(self.config.schedulers):
            for partition in range(components.settings.scheduler_partitions):
                loop = pacing.scheduler_group(partition, holder=new_holder_id(f"local-scheduler-{index}"))
                self._spawn("scheduling", f"scheduler-{index}-p{partition}", run_loop, loop, stop)

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
        join(self._threads["scheduling"], timeout_s)
        self._stop_workers.set()
        join(self._threads["workers"], timeout_s)
        if self.server:
            self.server.stop()
        self._stop_rest.set()
        join(self._threads["rest"], 5.0)
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
