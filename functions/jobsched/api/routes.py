"""The one table of the API's routes (design §3): every place that needs to know them reads it here.

- ``jobsched.api.app`` registers each route's handler with :func:`route`'s method and path (a handler cannot
  be registered for a route that is not in the table);
- ``infra.api`` declares exactly these resources and methods (and query strings) on API Gateway;
- ``jobsched.api.wsgi`` maps local request paths onto these resource templates, as API Gateway does.

Paths use the template form of OpenAPI and API Gateway (``/jobs/{id}``); ``Route.resolver_path`` gives
Powertools' form (``/jobs/<id>``). Pure data: no AWS, no Powertools, safe for the CDK app to import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PARAMETER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Route:
    """One operation of the API.

    ``method``: upper-case HTTP method; ``path``: template (``/jobs/{id}/runs``); ``operation_id``: the
    OpenAPI ``operationId``; ``query``: names of its (optional) query-string parameters, the only ones it
    takes; ``body``: whether it takes a JSON request body; ``documented``: whether it is in the OpenAPI
    document (``GET /openapi.json``, the document itself, is not).
    """

    method: str
    path: str
    operation_id: str
    query: tuple[str, ...] = ()
    documented: bool = True
    body: bool = False

    @property
    def path_parameters(self) -> tuple[str, ...]:
        """The names of the path's ``{parameters}``, in order."""
        return tuple(_PARAMETER.findall(self.path))

    @property
    def resolver_path(self) -> str:
        """The path in Powertools' resolver syntax: ``/jobs/{id}`` -> ``/jobs/<id>``."""
        return _PARAMETER.sub(r"<\1>", self.path)


ROUTES: tuple[Route, ...] = (
    Route("POST", "/jobs", "createJob", body=True),
    Route("GET", "/jobs", "listJobs", query=("limit", "cursor", "label")),
    Route(
        "GET", "/runs", "listAllRuns", query=("status", "job_id", "kind", "since", "until", "limit", "cursor")
    ),
    Route("GET", "/jobs/{id}", "getJob"),
    Route("PATCH", "/jobs/{id}", "updateJob", body=True),
    Route("DELETE", "/jobs/{id}", "deleteJob"),
    Route("POST", "/jobs/{id}/pause", "pauseJob", body=True),
    Route("POST", "/jobs/{id}/resume", "resumeJob"),
    Route("POST", "/jobs/{id}/trigger", "triggerJob"),
    Route("GET", "/jobs/{id}/runs", "listRuns", query=("status", "since", "until", "limit", "cursor")),
    Route("GET", "/jobs/{id}/fires", "listFires", query=("count",)),
    Route("GET", "/jobs/{id}/events", "listEvents", query=("limit", "cursor")),
    Route("POST", "/jobs/{id}/backfill", "backfillJob", body=True),
    Route("GET", "/jobs/{id}/runs/{run_id}", "getRun"),
    Route("GET", "/archive/queries/{query_id}", "getArchiveQuery"),
    Route("POST", "/jobs/{id}/runs/{run_id}/retry", "retryRun"),
    Route("POST", "/jobs/{id}/runs/{run_id}/cancel", "cancelRun", body=True),
    Route("GET", "/limits", "getLimits"),
    Route("GET", "/health", "getHealth"),
    Route("GET", "/openapi.json", "getOpenApi", documented=False),
)
"""Every route of the API (design §3), each with its method, path and operation id."""


def route(operation_id: str) -> Route:
    """The route whose ``operationId`` is ``operation_id``. Raises ``KeyError`` for one not in ``ROUTES``."""
    for candidate in ROUTES:
        if candidate.operation_id == operation_id:
            return candidate
    raise KeyError(f"no route {operation_id!r} in jobsched.api.routes.ROUTES")


def find(method: str, path: str) -> Route | None:
    """The route serving ``method`` on the request path ``path`` (see :func:`match`), or None."""
    matched = match(path)
    if matched is None:
        return None
    for candidate in ROUTES:
        if candidate.path == matched[0] and candidate.method == method.upper():
            return candidate
    return None


def methods_by_path() -> dict[str, tuple[str, ...]]:
    """``{path template: (methods...)}`` in table order, e.g. ``{"/jobs": ("POST", "GET"), ...}``."""
    methods: dict[str, tuple[str, ...]] = {}
    for entry in ROUTES:
        methods[entry.path] = (*methods.get(entry.path, ()), entry.method)
    return methods


def match(path: str) -> tuple[str, dict[str, str]] | None:
    """The resource template a request path falls under, with its path parameters, as API Gateway maps it.

    ``/jobs/j_1/runs`` -> ``("/jobs/{id}/runs", {"id": "j_1"})``; a trailing ``/`` is ignored; a parameter
    matches one non-empty path segment. None when no route has that path.
    """
    parts = path.rstrip("/").split("/") if path != "/" else [""]
    for template in methods_by_path():
        names = template.split("/")
        if len(names) != len(parts):
            continue
        params: dict[str, str] = {}
        for name, part in zip(names, parts, strict=True):
            parameter = _PARAMETER.fullmatch(name)
            if parameter is not None:
                if not part:
                    break
                params[parameter.group(1)] = part
            elif name != part:
                break
        else:
            return template, params
    return None
