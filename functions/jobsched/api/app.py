"""The HTTP API's routes, on Powertools' REST resolver (``jobsched.api.openapi.JobschedResolver``), and
its wiring.

Request pipeline (every route but ``/openapi.json``): admission (caller identity -> owner, 401; body size,
413; ``jobsched.api.admission``) -> Powertools request validation (400 via ``errors``) -> the route ->
``JobService`` -> response validation. The routes only translate between HTTP and the use cases of
``service``; every error response comes from ``errors``; the OpenAPI document and the responses each route
documents come from ``openapi``.

Dependencies come from :func:`get_api` through Powertools ``Depends``: the ``Api`` the caller of
:func:`resolve_with` (the API Lambda handler) serves the request with, built by ``jobsched.runtime.wiring``.

Powertools keeps the current event on the resolver class, so one process resolves one request at a time
(as a Lambda execution environment does); ``jobsched.api.wsgi`` serializes requests accordingly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any, TypeVar

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query

from jobsched.api import routes
from jobsched.api.admission import Admission
from jobsched.api.archive_reads import (
    ARCHIVE_ACCEPTED,
    ARCHIVE_NOTE,
    HISTORY_GONE,
    ArchiveAnswer,
    ArchiveQueryStatus,
    ArchiveReads,
)
from jobsched.api.auth import Authenticator
from jobsched.api.cursor import CURSOR_PATTERN, MAX_CURSOR_CHARS
from jobsched.api.errors import IDEMPOTENCY_HEADER, register_error_handlers
from jobsched.api.health import Health, HealthReads
from jobsched.api.openapi import REPLAYED_HEADER, JobschedResolver, responses
from jobsched.api.quotas import Limits
from jobsched.api.schemas import (
    BackfillRequest,
    BackfillResult,
    CancelRequest,
    JobCreate,
    JobDetail,
    JobEvent,
    JobPatch,
    Page,
    PauseRequest,
    RunCancel,
)
from jobsched.api.service import JobService
from jobsched.domain.fires import MAX_FIRES
from jobsched.labels import LABEL_TERM_PATTERN, MAX_KEY_CHARS, MAX_LABELS, MAX_VALUE_CHARS
from jobsched.models import Fires, Instant, Job, Run, RunDetail, RunKind, RunStatus
from jobsched.ports.archive_queries import QueryState
from jobsched.settings import Settings


@dataclass(frozen=True)
class Api:
    """What the routes need: the deployment's settings, the use cases, who the caller is, the lateness summaries'
    reads, and the archive's (None: no archive configured; windows before the retention are refused by name)."""

    settings: Settings
    service: JobService
    authenticator: Authenticator
    health: HealthReads
    archive: ArchiveReads | None = None

    def archive_reads(self) -> ArchiveReads:
        """``archive``, or reads that refuse every window before the retention (no archive configured)."""
        return self.archive or ArchiveReads(None, retention_days=self.settings.retention_days)


def get_api() -> Api:
    """The wiring of the request being resolved (what the routes' ``Depends(get_api)`` sees): the ``Api``
    handed to :func:`resolve_with`. Raises KeyError outside a request."""
    return app.context["api"]  # type: ignore[no-any-return]


def current_api() -> Api:
    """The current request's ``Api`` (:func:`get_api`), for code running before the routes (admission)."""
    return get_api()


def resolve_with(api: Api, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway REST proxy ``event`` into its proxy response, served by ``api`` (built by
    ``jobsched.runtime.wiring.Components.api``). Powertools clears the request's context after each request."""
    app.append_context(api=api)
    return app.resolve(event, context)


def caller() -> str:
    """The authenticated owner of the current request (set by admission)."""
    return str(app.context["owner"])


def actor() -> str:
    """Who is making the current request, as recorded on what it changes (set by admission: design §3.2)."""
    return str(app.context["actor"])


app = JobschedResolver(Admission(current_api))
"""The API's resolver: ``handlers.api`` resolves every API Gateway event with it."""


def allowed_methods(path: str) -> list[str]:
    """The methods the API serves on ``path`` (``routes.ROUTES``), sorted; empty when the path is unknown."""
    matched = routes.match(path)
    return sorted(routes.methods_by_path()[matched[0]]) if matched else []


register_error_handlers(app, allowed_methods)


_CURSOR_NOT_FOUND = "A `cursor` this listing did not issue (another caller's or another listing's)"
_UPSTREAM_NOT_FOUND = "The job `after.job` names does not exist (or is not the caller's)"
_HISTORY_NOT_FOUND = "No such job (or not the caller's), or a `cursor` this listing did not issue"


def _public_prefix() -> str:
    """What the caller's URL path has before this API's own paths: ``/v1`` on the execute-api URL (the
    stage), a custom domain's base path, or ``""``. API Gateway reports the path as the caller sent it in
    ``requestContext.path`` and the path within the API in ``path``; the prefix is the difference."""
    event = app.current_event.raw_event
    path = str(event.get("path") or "")
    public = str((event.get("requestContext") or {}).get("path") or path)
    return public.removesuffix(path) if path and public.endswith(path) else ""


_Body = TypeVar("_Body")


def _json(
    status: HTTPStatus, body: _Body, headers: dict[str, str] | None = None, *, replayed: bool = False
) -> Response[_Body]:
    """A JSON response of ``body`` with ``headers``, plus ``Idempotency-Replayed: true`` when ``replayed`` (the
    stored answer to an earlier request with the same idempotency key)."""
    headers = dict(headers or {})
    if replayed:
        headers[REPLAYED_HEADER] = "true"
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers
    )


ApiDep = Annotated[Api, Depends(get_api)]
Owner = Annotated[str, Depends(caller)]
Actor = Annotated[str, Depends(actor)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=IDEMPOTENCY_HEADER,
        min_length=1,
        max_length=255,
        pattern=r"^[\x20-\x7e]+$",
        description="a unique key per logical request (IETF draft 'The Idempotency-Key HTTP Header Field'); "
        "repeats with the same key and request replay the first response for 24 h",
    ),
]
JobId = Annotated[str, Path(description="the job's id (`j_` and 20 hex digits)")]
Limit = Annotated[int, Query(ge=1, le=100, description="page size, 1-100")]
Since = Annotated[Instant | None, Query(description="scheduled_for at or after (ISO 8601, with offset)")]
Until = Annotated[Instant | None, Query(description="scheduled_for before (ISO 8601, with offset)")]
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_CURSOR_CHARS,
        pattern=CURSOR_PATTERN,
        description="`next_cursor` of the previous page, unchanged (opaque). A cursor this listing did not "
        "issue (another caller's or another listing's) is answered 404 naming `cursor`",
    ),
]

LabelSelector = Annotated[
    list[Annotated[str, Query(pattern=LABEL_TERM_PATTERN, max_length=MAX_KEY_CHARS + 1 + MAX_VALUE_CHARS)]]
    | None,
    Query(
        max_length=MAX_LABELS,
        description="`key=value`: only the jobs carrying this label; repeat it for several (all must match)",
    ),
]


# --- routes ---------------------------------------------------------------------------------------

_F = TypeVar("_F", bound=Callable[..., Any])


def _route(operation_id: str, **options: Any) -> Callable[[_F], _F]:
    """Register the handler of route ``operation_id`` of ``routes.ROUTES``, with the method and path given
    there (the table API Gateway and the WSGI adapter are built from); ``options`` are Powertools' route
    options (summary, responses, ...). A documented route is admitted (admission, request and response
    validation); an undocumented one (``/openapi.json``) is served as is."""
    entry = routes.route(operation_id)
    if entry.documented:
        return app.admitted_route(entry.resolver_path, entry.method, operation_id=operation_id, **options)
    return app.route(entry.resolver_path, entry.method, include_in_schema=False, **options)


@_route(
    "createJob",
    summary="Register a job",
    tags=["jobs"],
    responses=responses(
        {201: (Job, "Created"), 200: (Job, "An identical job already has this name: that job")},
        404,
        409,
        413,
        422,
        idempotent=True,
        descriptions={404: _UPSTREAM_NOT_FOUND},
    ),
)
def create_job(
    body: JobCreate, api: ApiDep, owner: Owner, by: Actor, idempotency_key: IdempotencyKey = None
) -> Response[Job]:
    """Register a job for the caller. ``"command": "x"`` is shorthand for ``"target": {"type": "command", "name": "x"}``."""
    result = api.service.create_job(owner, body, idempotency_key=idempotency_key, actor=by)
    if not result.created:
        return _json(HTTPStatus.OK, result.job, replayed=result.replayed)
    location = {"Location": f"{_public_prefix()}/jobs/{result.job.id}"}
    return _json(HTTPStatus.CREATED, result.job, location, replayed=result.replayed)


@_route(
    "listJobs",
    summary="The caller's jobs, by name",
    tags=["jobs"],
    responses=responses({200: (Page[Job], "A page of jobs")}, 404, descriptions={404: _CURSOR_NOT_FOUND}),
)
def list_jobs(
    api: ApiDep, owner: Owner, limit: Limit = 50, cursor: Cursor = None, label: LabelSelector = None
) -> Page[Job]:
    """A page of the caller's jobs; pass ``next_cursor`` back as ``cursor`` (and the same ``label``s) for the
    next one. With ``label``, only the jobs carrying every label given (a page may then hold fewer than
    ``limit`` jobs while ``next_cursor`` says more may follow)."""
    return api.service.list_jobs(owner, limit=limit, cursor=cursor, labels=label)


@_route(
    "getJob",
    summary="Read a job",
    tags=["jobs"],
    responses=responses({200: (JobDetail, "The job, with its chain (upstream and downstream jobs)")}, 404),
)
def get_job(id: JobId, api: ApiDep, owner: Owner) -> JobDetail:
    return api.service.chains.detail(api.service.get_job(owner, id))


@_route(
    "updateJob",
    summary="Change a job",
    tags=["jobs"],
    responses=responses(
        {200: (Job, "The changed job")},
        404,
        409,
        413,
        descriptions={404: "No such job (or not the caller's), or no such job as `after.job` names"},
    ),
)
def update_job(id: JobId, body: JobPatch, api: ApiDep, owner: Owner, by: Actor) -> Job:
    """Fields given replace the stored ones (``retry`` merges field by field). Changing the schedule,
    timezone, start_at or end_at recomputes ``next_run_at`` from now on; fires still pending (inside their
    jitter window, or missed while the scheduler was down) are kept and follow the job's ``missed`` policy."""
    return api.service.update_job(owner, id, body, actor=by)


@_route(
    "deleteJob",
    summary="Delete a job",
    tags=["jobs"],
    responses=responses({204: (None, "Deleted: no new runs; run history is kept until retention")}, 404),
)
def delete_job(id: JobId, api: ApiDep, owner: Owner, by: Actor) -> Response[None]:
    api.service.delete_job(owner, id, actor=by)
    return Response(status_code=HTTPStatus.NO_CONTENT)


@_route(
    "pauseJob",
    summary="Pause a job (it leaves the due index)",
    tags=["jobs"],
    responses=responses({200: (Job, "The paused job")}, 404, 409),
)
def pause_job(id: JobId, api: ApiDep, owner: Owner, by: Actor, body: PauseRequest | None = None) -> Job:
    """The job shows who paused it, when, and the ``reason`` given (optional body ``{"reason": "..."}``)."""
    return api.service.pause_job(owner, id, reason=body.reason if body else None, actor=by)


@_route(
    "resumeJob",
    summary="Resume a job (from its first fire after now; fires of the paused time do not run)",
    tags=["jobs"],
    responses=responses({200: (Job, "The resumed job")}, 404, 409),
)
def resume_job(id: JobId, api: ApiDep, owner: Owner, by: Actor) -> Job:
    return api.service.resume_job(owner, id, actor=by)


@_route(
    "triggerJob",
    summary="Run a job once now, outside its schedule",
    tags=["runs"],
    responses=responses({202: (Run, "The run, queued")}, 404, 409, 422, idempotent=True),
)
def trigger_job(
    id: JobId, api: ApiDep, owner: Owner, by: Actor, idempotency_key: IdempotencyKey = None
) -> Response[Run]:
    result = api.service.trigger_job(owner, id, idempotency_key=idempotency_key, actor=by)
    return _json(HTTPStatus.ACCEPTED, result.run, replayed=result.replayed)


@_route(
    "listRuns",
    summary="A job's runs, newest first",
    description="Newest `scheduled_for` first, optionally only one `status`, and `scheduled_for` in `[since, until)`. "
    "A deleted job's runs stay listed for its owner until retention. " + ARCHIVE_NOTE,
    tags=["runs"],
    responses=responses(
        {200: (Page[Run], "A page of runs"), 202: (ArchiveQueryStatus, ARCHIVE_ACCEPTED)},
        404,
        410,
        descriptions={404: _HISTORY_NOT_FOUND, 410: HISTORY_GONE},
    ),
)
def list_runs(
    id: JobId,
    api: ApiDep,
    owner: Owner,
    status: Annotated[RunStatus | None, Query(description="only runs in this status")] = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response[Page[Run] | ArchiveQueryStatus]:
    if since is None and until is None:
        return _json(
            HTTPStatus.OK, api.service.list_runs(owner, id, status=status, limit=limit, cursor=cursor)
        )
    return _runs_window(
        api, owner, cursor, job_id=id, status=status, kind=None, since=since, until=until, limit=limit
    )


@_route(
    "getArchiveQuery",
    summary="An archive query's state, and its runs once done",
    description="A query a runs listing started for a window before the retention (`202`, `Location`). Answered "
    "only to the owner whose runs it reads: another caller's, or an unknown id, is 404. `202` while running.",
    tags=["runs"],
    responses=responses(
        {
            200: (ArchiveQueryStatus, "Done: succeeded (with `runs`) or failed (with `reason`)"),
            202: (ArchiveQueryStatus, "Still running: poll again"),
        },
        404,
        descriptions={404: "No such archive query for the caller (field `query_id`)"},
    ),
)
def get_archive_query(
    query_id: Annotated[str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9-]+$")],
    api: ApiDep,
    owner: Owner,
) -> Response[ArchiveQueryStatus]:
    return _archive_response(api.archive_reads().poll(owner, query_id))


def _runs_window(api: Api, owner: str, cursor: str | None, **query: Any) -> Response[Any]:
    """A page of ``owner``'s runs matching ``query`` (``job_id``, ``status``, ``kind``, ``since``, ``until``,
    ``limit``): the archive's answer when ``since`` is before the retention (:func:`_archive_window`), else the
    runs table's (``RunListing.across_jobs`` from ``cursor``)."""
    archived = _archive_window(api, owner, cursor=cursor, **query)
    if archived is not None:
        return archived
    return _json(HTTPStatus.OK, api.service.run_listing.across_jobs(owner, cursor=cursor, **query))


def _archive_window(api: Api, owner: str, **query: Any) -> Response[Any] | None:
    """The archive's answer when ``since`` is before the retention (``ArchiveReads.window``, design §11), else
    None."""
    answer = api.archive_reads().window(owner, now_ms=api.service.clock(), **query)
    return None if answer is None else _archive_response(answer)


def _archive_response(answer: ArchiveAnswer) -> Response[Any]:
    running = answer.status is QueryState.RUNNING
    return _json(
        HTTPStatus.ACCEPTED if running else HTTPStatus.OK, answer.model(), {"Location": answer.location}
    )


@_route(
    "backfillJob",
    summary="Run a job's past fires that have no run yet",
    description="Every fire of the job's schedule in `[start, end)` (at most 1,000, `end` at most now) without "
    "a run gets one, kind `backfill`, dispatched at the deployment's backfill rate; a repeat creates nothing "
    "new. Paused jobs too.",
    tags=["runs"],
    responses=responses({200: (BackfillResult, "What was created")}, 404, 409, 422, idempotent=True),
)
def backfill_job(
    id: JobId,
    body: BackfillRequest,
    api: ApiDep,
    owner: Owner,
    by: Actor,
    idempotency_key: IdempotencyKey = None,
) -> Response[BackfillResult]:
    result, replayed = api.service.backfill(owner, id, body, idempotency_key=idempotency_key, actor=by)
    return _json(HTTPStatus.OK, result, replayed=replayed)


@_route(
    "listEvents",
    summary="A job's audit events, newest first",
    description="Created, updated (with the fields given), paused (with the reason), resumed, triggered, "
    "deleted, each with its actor and time; kept as long as run history, a deleted job's too.",
    tags=["jobs"],
    responses=responses(
        {200: (Page[JobEvent], "A page of events")}, 404, descriptions={404: _HISTORY_NOT_FOUND}
    ),
)
def list_events(
    id: JobId, api: ApiDep, owner: Owner, limit: Limit = 50, cursor: Cursor = None
) -> Page[JobEvent]:
    return api.service.list_events(owner, id, limit=limit, cursor=cursor)


@_route(
    "listAllRuns",
    summary="The caller's runs across all their jobs, newest first",
    description="Optionally one `status`, `job_id` or `kind`, and `scheduled_for` in `[since, until)` (`until` after "
    "`since`). Failed "
    "runs (`status` retrying, dead or skipped) come from an index of failures; other listings merge the "
    "caller's jobs (at most 500: narrow by `job_id` or a failure `status` beyond that). Pass `next_cursor` "
    "back as `cursor` with the same filters. " + ARCHIVE_NOTE,
    tags=["runs"],
    responses=responses(
        {200: (Page[Run], "A page of runs"), 202: (ArchiveQueryStatus, ARCHIVE_ACCEPTED)},
        404,
        410,
        descriptions={
            404: "No such job (`job_id`), or a `cursor` this listing did not issue",
            410: HISTORY_GONE,
        },
    ),
)
def list_all_runs(
    api: ApiDep,
    owner: Owner,
    status: Annotated[RunStatus | None, Query(description="only runs in this status")] = None,
    job_id: Annotated[
        str | None, Query(pattern=r"^j_[0-9a-f]{20}$", description="only this job's runs")
    ] = None,
    kind: Annotated[RunKind | None, Query(description="only runs of this kind")] = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response[Page[Run] | ArchiveQueryStatus]:
    return _runs_window(
        api, owner, cursor, job_id=job_id, status=status, kind=kind, since=since, until=until, limit=limit
    )


@_route(
    "listFires",
    summary="A job's next fires, as the scheduler will dispatch them",
    description="From the job's stored `next_run_at` on, each with its dispatch instant (jitter included) and "
    "a note where daylight saving moves or merges it. Empty, with the `reason`, for a paused or ended job.",
    tags=["jobs"],
    responses=responses({200: (Fires, "The next fires")}, 404),
)
def list_fires(
    id: JobId,
    api: ApiDep,
    owner: Owner,
    count: Annotated[int, Query(ge=1, le=MAX_FIRES, description=f"how many fires, 1-{MAX_FIRES}")] = 10,
) -> Fires:
    return api.service.list_fires(owner, id, count)


@_route(
    "getLimits",
    summary="The caller's quotas and their use",
    description="Each quota's `limit` (null: none) and the caller's `use` now: `jobs` (live jobs), "
    "`fires_per_minute` (summed over the caller's schedules, each its long-run average; one-offs count 0), "
    "`triggers_per_minute` (manual triggers and backfills this minute; counted while a limit is set). "
    "A create, PATCH, trigger or backfill over a quota answers 429, code `quota_exceeded`, `field` the quota "
    "(`jobs`, `fires_per_minute`; `triggers_per_minute` with `Retry-After`). Quotas are "
    "checked only here: the scheduler never skips a fire for them.",
    tags=["limits"],
    responses=responses({200: (Limits, "The caller's quotas and use")}),
)
def get_limits(api: ApiDep, owner: Owner) -> Limits:
    return api.service.quotas.limits(owner)


@_route(
    "getHealth",
    summary="The scheduler's dispatch lateness per priority and for the top owners by backlog",
    description="From each scheduler partition's latest summary (saved at most once a minute while runs are "
    "dispatched): dispatch lateness (enqueued minus the dispatch instant, ms) per priority, for the owners with "
    "the largest backlog (another owner's name is not shown: `owner` null) and for every other owner.",
    tags=["health"],
    responses=responses({200: (Health, "The latest figures")}),
)
def get_health(api: ApiDep, owner: Owner) -> Health:
    return api.health.health(owner)


RunId = Annotated[
    str,
    Path(
        max_length=64,
        description="the run's id: the job's id, `@`, its `scheduled_for` in epoch milliseconds "
        "(`j_0123456789abcdef0123@1767578400000`)",
    ),
]


@_route(
    "getRun",
    summary="One run, with its tries and their output",
    description="The run with `attempts`: one entry per try of its current round (`attempt`, `started_at`, "
    "`finished_at`, `worker`, `error`, `output`), and `previous_attempts`: the tries before each re-run. The "
    "listing of runs keeps its shape and leaves the tries out. A malformed run id, another job's, or a run of "
    "another owner's job answers 404.",
    tags=["runs"],
    responses=responses({200: (RunDetail, "The run")}, 404),
)
def get_run(id: JobId, run_id: RunId, api: ApiDep, owner: Owner) -> RunDetail:
    return api.service.reruns.get_run(owner, id, run_id)


@_route(
    "retryRun",
    summary="Run a dead or skipped run again",
    description="Puts the run back on the queue with the same run id and `scheduled_for` (its target gets the "
    "same idempotency key) and a fresh set of attempts; its earlier tries stay in `previous_attempts`. A "
    "`succeeded`, `queued`, `running` or `retrying` run answers 409, as does a dead run whose alert is still "
    "being sent (for about a minute) and a summary of several skipped fires.",
    tags=["runs"],
    responses=responses({202: (RunDetail, "The run, queued again")}, 404, 409, 422, idempotent=True),
)
def retry_run(
    id: JobId, run_id: RunId, api: ApiDep, owner: Owner, by: Actor, idempotency_key: IdempotencyKey = None
) -> Response[RunDetail]:
    result = api.service.reruns.retry_run(owner, id, run_id, idempotency_key=idempotency_key, actor=by)
    return _json(HTTPStatus.ACCEPTED, result.run, replayed=result.replayed)


@_route(
    "cancelRun",
    summary="Cancel a queued, retrying or running run",
    description="The run ends `cancelled` with `cancelled_by` (the caller) and the optional `reason`; no retry "
    "and no dead-run alert follow. A queued or retrying run never starts a try; a running `shell` or `command` "
    "try is terminated and an `http` request aborted by its worker within one heartbeat interval; a `lambda` "
    "or `sqs` target cannot be recalled and may still finish (`stop` says which). A cancelled run answers as "
    "the first cancel did; a `succeeded`, `dead` or `skipped` run answers 409. A scheduled fire the listings "
    "show `queued` (dispatched, not yet claimed) is cancelled by its id too; a fire not yet dispatched is a 404.",
    tags=["runs"],
    responses=responses({200: (RunCancel, "The cancelled run, and what became of its try")}, 404, 409),
)
def cancel_run(
    id: JobId, run_id: RunId, api: ApiDep, owner: Owner, by: Actor, body: CancelRequest | None = None
) -> RunCancel:
    reason = body.reason if body else None
    return api.service.cancels.cancel_run(owner, id, run_id, actor=by, reason=reason)


@_route("getOpenApi", enable_validation=False)
def openapi_json() -> Response[dict[str, Any]]:
    """The OpenAPI document of this API with this deployment's limits (no credentials needed: it holds no
    data)."""
    return _json(HTTPStatus.OK, app.openapi_document(current_api().settings))
