"""Options shared by the API-facing commands, declared once: the connection (``--api``, ``--token``,
``--sigv4-region``), ``--json``, the JOB argument, and the decorator that gives a command a whole group of
options from one dataclass parameter.

The connection options stay on each command (``jobsched jobs list --api URL``), as they always were: they
are part of the CLI's public contract. Each command declares them with one parameter,
``conn: Connection = Connection()``, expanded by :func:`option_groups`.

Tests reach the client's HTTP transport through the click context object:
``runner.invoke(app, args, obj={"transport": httpx.WSGITransport(app=...)})`` (see :func:`injected`).
:func:`option_groups` makes that object available to the command while it runs.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from jobsched.client import DEFAULT_API, ApiError, JobschedClient, is_loopback
from jobsched.exits import fail
from jobsched.local.paths import DEFAULT_DATA_DIR, DEV_TOKEN_FILE

__all__ = [
    "Connection",
    "JobArgument",
    "JsonOption",
    "OutputFormat",
    "OutputOption",
    "find_dev_token",
    "injected",
    "option_groups",
]

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


class OutputFormat(StrEnum):
    """What ``-o``/``--output`` prints: a table, the API's JSON (as ``--json``), or YAML job specs in the
    format ``jobsched apply`` reads (``jobsched.apply_plan.export_spec``)."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


OutputOption = Annotated[
    OutputFormat | None,
    typer.Option(
        "--output",
        "-o",
        help="table, json (the API's JSON) or yaml (job specs as `jobsched apply` reads them).",
    ),
]
JobArgument = Annotated[str, typer.Argument(help="Job id (j_...) or name.", show_default=False)]


_context_object: ContextVar[dict[str, Any] | None] = ContextVar("jobsched_cli_context_object", default=None)


def injected(name: str) -> Any:
    """What a test put under ``name`` in the click context object (``obj={...}``) of the command running
    (one decorated with :func:`option_groups`), else None.

    Used for ``"transport"`` (an httpx transport for the client) and, by ``smoke``, ``"clock"`` (epoch ms)
    and ``"sleep"`` (seconds)."""
    return (_context_object.get() or {}).get(name)


def find_dev_token(start: Path | None = None) -> str | None:
    """The dev token local mode saved (``.jobsched/dev-token``) in ``start`` (default cwd) or a parent."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_DATA_DIR / DEV_TOKEN_FILE
        if candidate.is_file():
            return candidate.read_text().strip() or None
    return None


@dataclass(frozen=True)
class Connection:
    """Where the API is and how to authenticate: ``--api``/``JOBSCHED_API`` (default
    ``http://127.0.0.1:8080``, local mode), ``--token``/``JOBSCHED_TOKEN``, and
    ``--sigv4-region``/``JOBSCHED_SIGV4_REGION``.

    API Gateway URLs (``*.execute-api.<region>.amazonaws.com``) are signed with SigV4 from the standard AWS
    credential chain; ``sigv4_region`` does the same for a custom domain. Without a token, an API on this
    machine gets the dev token local mode saved (:func:`find_dev_token`).
    """

    api: ApiOption = DEFAULT_API
    token: TokenOption = None
    sigv4_region: SigV4RegionOption = None

    @contextmanager
    def client(self) -> Iterator[JobschedClient]:
        """A client of the API; every ``ApiError`` inside the block becomes one error line and exit 1."""
        token = self.token
        if token is None and is_loopback(self.api):
            token = find_dev_token()
        client = JobschedClient(
            self.api, token=token, transport=injected("transport"), sigv4_region=self.sigv4_region
        )
        try:
            yield client
        except ApiError as error:
            fail(str(error))
        finally:
            client.close()


def option_groups(command: Callable[..., None]) -> Callable[..., None]:
    """Give a typer command the options of each dataclass-typed parameter (e.g. ``conn: Connection``).

    typer reads a command's options from its signature: the returned function's signature lists the
    dataclass's fields (each an ``Annotated`` typer option with its default) where the parameter stood, so
    ``--help`` keeps their order, and each call folds the values typer passes (always by keyword) back into
    one instance of the dataclass. The command also runs with the click context object at hand
    (:func:`injected`). Raises ``TypeError`` at decoration when two groups, or a group and the command,
    share a parameter name.
    """
    hints = get_type_hints(command, include_extras=True)
    groups: dict[str, tuple[type, list[str]]] = {}
    context = inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    parameters: list[inspect.Parameter] = [context]
    for parameter in inspect.signature(command).parameters.values():
        hint = hints[parameter.name]
        if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
            parameters.append(parameter.replace(annotation=hint))
            continue
        group_hints = get_type_hints(hint, include_extras=True)
        group_fields = dataclasses.fields(hint)
        groups[parameter.name] = (hint, [f.name for f in group_fields])
        parameters += [
            inspect.Parameter(
                f.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=f.default,
                annotation=group_hints[f.name],
            )
            for f in group_fields
        ]
    names = [p.name for p in parameters]
    if len(names) != len(set(names)):
        raise TypeError(f"{command.__name__}: option groups repeat a parameter name: {names}")

    @functools.wraps(command)
    def wrapper(context: typer.Context, *args: Any, **kwargs: Any) -> None:
        for group, (cls, field_names) in groups.items():
            kwargs[group] = cls(**{name: kwargs.pop(name) for name in field_names if name in kwargs})
        reset = _context_object.set(context.obj if isinstance(context.obj, dict) else None)
        try:
            command(*args, **kwargs)
        finally:
            _context_object.reset(reset)

    wrapper.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return wrapper
