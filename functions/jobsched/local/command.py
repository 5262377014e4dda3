"""The ``local`` command's options and entry: ``jobsched local`` and ``python -m jobsched.local``.

Defined here, in local mode's own package, so that both entry points share one declaration of the options
and local mode does not import the CLI (the CLI registers this command; the dependency goes downward).
The runtime (boto3, SQLite, the embedded moto) is imported only when the command runs, which lasts until
interrupted; a data dir or tokens file it cannot use (``OSError``, ``ValueError``) is one error line on
stderr and exit status 1.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from jobsched.exits import fail
from jobsched.local.paths import DEFAULT_DATA_DIR

__all__ = ["AcceptHostOpt", "local_command"]


PortOpt = Annotated[int, typer.Option("--port", help="Port of the API on 127.0.0.1.")]
DataDirOpt = Annotated[Path, typer.Option("--data-dir", help="Where jobs and history are kept.")]
TokensOpt = Annotated[
    Path | None,
    typer.Option(
        "--tokens",
        help='JSON object token -> owner, or token -> {"owner": ..., "shell": true} for an owner that may use '
        "shell targets and http targets on loopback (default: a dev token for `local`, with both).",
    ),
]
QuotasOpt = Annotated[
    Path | None,
    typer.Option(
        "--quotas",
        help='JSON file of quotas per owner: {"default": {"jobs": N, "fires_per_minute": N, '
        '"triggers_per_minute": N}, "owners": {"OWNER": {...}}} (default: none; see README, Quotas).',
    ),
]
SchedulersOpt = Annotated[int, typer.Option("--schedulers", min=1, max=16, help="Competing scheduler loops.")]
WorkersOpt = Annotated[int, typer.Option("--workers", min=1, max=64, help="Worker threads.")]


class Backend(StrEnum):
    """Where local mode keeps jobs, runs and leases (``jobsched.local.config.BACKENDS``)."""

    sqlite = "sqlite"
    moto = "moto"


BackendOpt = Annotated[
    Backend,
    typer.Option(
        "--backend",
        help="Storage of jobs, runs and leases: sqlite (each write durable before it is acknowledged) or "
        "moto (the AWS adapters on the embedded moto, saved every 2 s).",
    ),
]
AcceptHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--accept-host",
        help="Also answer requests for this host name (NAME, or NAME:PORT for a port forward); repeatable. "
        "Otherwise only localhost, 127.0.0.1 and [::1] at --port are answered (against DNS rebinding).",
        show_default=False,
        metavar="NAME[:PORT]",
    ),
]
DemoOpt = Annotated[
    bool, typer.Option("--demo", help="Register the sample jobs of events/demo on first start.")
]


def local_command(
    port: PortOpt = 8080,
    data_dir: DataDirOpt = DEFAULT_DATA_DIR,
    tokens: TokensOpt = None,
    schedulers: SchedulersOpt = 1,
    workers: WorkersOpt = 4,
    demo: DemoOpt = False,
    backend: BackendOpt = Backend.sqlite,
    accept_host: AcceptHostOpt = None,
    quotas: QuotasOpt = None,
) -> None:
    """Run the whole system on this machine: API, scheduler, workers and sweeper, on an embedded SQLite
    (jobs, runs, leases) and moto (queues, topic)."""
    from jobsched.local.config import LocalConfig
    from jobsched.local.runtime import run_forever

    try:
        config = LocalConfig(
            port=port,
            data_dir=data_dir,
            tokens_file=tokens,
            schedulers=schedulers,
            workers=workers,
            demo=demo,
            backend=backend.value,
            redirect_stdout=True,
            accept_hosts=tuple(accept_host or ()),
            quotas_file=quotas,
        )
        run_forever(config)
    except (OSError, ValueError) as error:
        fail(str(error))
