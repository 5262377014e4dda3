"""The options of ``jobsched local`` (:class:`LocalConfig`) and its storage backends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobsched.clock import Clock, system_clock
from jobsched.local.paths import DEFAULT_DATA_DIR
from jobsched.local.server import accepted_hosts

if TYPE_CHECKING:
    from jobsched.sqlite.database import Synchronous

BACKENDS = ("sqlite", "moto")
"""Local mode's storage backends (``LocalConfig.backend``); the first is the default."""


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
    ``port`` (``jobsched.local.server.accepted_hosts``). ``quotas_file``: a JSON file holding the ``quotas``
    setting (``{"default": {...}, "owners": {...}}``, design §4.11), read at start into ``settings`` (the
    environment variable ``QUOTAS`` is the other way). Raises ValueError for a bad value, OSError for an
    unreadable quotas file.
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
    sqlite_synchronous: Synchronous = "NORMAL"
    accept_hosts: tuple[str, ...] = ()
    quotas_file: Path | None = None

    def __post_init__(self) -> None:
        self.accept_hosts = tuple(self.accept_hosts)
        accepted_hosts(self.port, self.accept_hosts)  # ValueError naming a bad --accept-host
        if self.schedulers < 1 or self.workers < 1:
            raise ValueError("--schedulers and --workers must be at least 1")
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        self.data_dir = Path(self.data_dir)
        if self.quotas_file is not None:
            from pydantic import ValidationError

            from jobsched.domain.quotas import QuotaTable

            text = Path(self.quotas_file).read_text()
            try:
                self.settings["quotas"] = QuotaTable.model_validate_json(text)
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "the file"
                raise ValueError(f"--quotas {self.quotas_file}: {where}: {first['msg']}") from None
