"""The HTTP client of the jobsched API (design §3), used by the CLI and by scripts.

Authentication follows the deployment:

- an API Gateway URL (``https://<id>.execute-api.<region>.amazonaws.com/<stage>``) is called with
  AWS Signature V4 (service ``execute-api``), credentials from the standard AWS chain (environment,
  shared config/SSO profiles, container/instance roles) through botocore's ``SigV4Auth``;
- any other URL (local mode) gets ``Authorization: Bearer <token>``.

Responses are the API's JSON objects as plain dicts (field names of design §2). Every failure is
one exception type, ``ApiError``, whose ``str()`` is one line a person can act on.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from jobsched.archived_rows import archived_run, epoch_ms_of, iso_ms

__all__ = [
    "DEFAULT_API",
    "ApiError",
    "ApiUnreachable",
    "JobschedClient",
    "SigV4",
    "api_gateway_region",
    "connection_auth",
    "is_loopback",
]

DEFAULT_API = "http://127.0.0.1:8080"
ARCHIVE_POLL_S = 1.0
"""Seconds between polls of an archive query (Athena answers an owner-month in seconds)."""
ARCHIVE_WAIT_S = 300.0
"""How long a runs listing waits for its archive query before it gives up (``archive_query_timeout``)."""
_API_GATEWAY = re.compile(r"^[a-z0-9]+\.execute-api\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_SIGNED_HEADERS = ("host", "content-type", "idempotency-key")


class ApiError(Exception):
    """A call failed. ``status`` is the HTTP status (0 when no response arrived); ``code``, ``message``
    and ``field`` come from the API's error body ``{"error": {"code", "message", "field"}}``."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def __str__(self) -> str:
        where = f" (field: {self.field})" if self.field else ""
        prefix = f"{self.status} {self.code}: " if self.status else ""
        return f"{prefix}{self.message}{where}"


def is_loopback(url: str) -> bool:
    """True for an API on this machine (local mode), which gets local mode's dev token: the name
    ``localhost`` or a literal loopback address (``127.0.0.0/8``, ``::1``). A name is never resolved, so a
    host named ``127.attacker.example`` is not loopback."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ApiUnreachable(ApiError):
    """No HTTP response: connection refused, DNS failure or timeout. For an API on this machine
    (``is_loopback``) the message asks whether local mode runs; otherwise it gives the reason."""

    def __init__(self, base_url: str, reason: str) -> None:
        hint = ": is `jobsched local` running?" if is_loopback(base_url) else f" ({reason})"
        super().__init__(0, "unreachable", f"cannot reach the API at {base_url}{hint}")


def api_gateway_region(url: str) -> str | None:
    """The AWS region of an API Gateway URL (``*.execute-api.<region>.amazonaws.com``), else None."""
    host = urlsplit(url).hostname or ""
    match = _API_GATEWAY.match(host)
    return match.group("region") if match else None


class SigV4(httpx.Auth):
    """httpx auth that signs each request with AWS SigV4 for API Gateway (``execute-api``).

    ``credentials`` is a botocore ``Credentials`` object (refreshable ones are frozen per request); None
    resolves the standard chain on first use and raises ``ApiError`` (status 0) when it finds nothing.
    """

    requires_request_body = True

    def __init__(self, region: str, credentials: Any = None, service: str = "execute-api") -> None:
        self.region = region
        self.service = service
        self._credentials = credentials

    def _resolve(self) -> Any:
        if self._credentials is None:
            import botocore.session

            self._credentials = botocore.session.Session().get_credentials()
            if self._credentials is None:
                raise ApiError(
                    0,
                    "no_credentials",
                    "no AWS credentials found for a SigV4-signed API Gateway call: configure the standard AWS "
                    "chain (AWS_PROFILE, `aws sso login`, environment variables or an instance role)",
                )
        return self._credentials.get_frozen_credentials()

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = {k: v for k, v in request.headers.items() if k.lower() in _SIGNED_HEADERS}
        aws_request = AWSRequest(
            method=request.method, url=str(request.url), data=request.content or None, headers=headers
        )
        SigV4Auth(self._resolve(), self.service, self.region).add_auth(aws_request)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-SHA256"):
            value = aws_request.headers.get(name)
            if value is not None:
                request.headers[name] = value
        yield request


def connection_auth(
    base_url: str, *, token: str | None = None, credentials: Any = None, sigv4_region: str | None = None
) -> tuple[httpx.Auth | None, dict[str, str]]:
    """How calls to ``base_url`` authenticate, as ``(auth, headers)`` for an ``httpx.Client``: ``SigV4`` for an
    API Gateway URL or with ``sigv4_region`` (``credentials`` as for ``SigV4``), else the header
    ``Authorization: Bearer <token>`` when a ``token`` is given, else nothing. Used by ``JobschedClient``
    and by ``jobsched ui``'s signing proxy, so both sign alike."""
    region = sigv4_region or api_gateway_region(base_url)
    if region:
        return SigV4(region, credentials), {}
    if token:
        return None, {"Authorization": f"Bearer {token}"}
    return None, {}


class JobschedClient:
    """Calls of the jobsched API. ``base_url`` is the API root (e.g. ``http://127.0.0.1:8080`` or
    ``https://abc.execute-api.eu-west-1.amazonaws.com/prod``); ``token`` is the local bearer token
    (ignored for API Gateway URLs, which are SigV4-signed); ``sigv4_region`` forces SigV4 for a URL that is
    not recognisably API Gateway (a custom domain); ``transport`` replaces the network (tests pass
    ``httpx.MockTransport`` or ``httpx.WSGITransport``). A runs listing the API answers from the archive (a
    ``since`` before the retention: ``query_id``, 202) is followed: ``GET /archive/queries/{query_id}`` every
    ``ARCHIVE_POLL_S`` seconds (``sleep``) for at most ``archive_wait_s``, then its runs are the page. Every method
    raises ``ApiError`` on failure.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_API,
        *,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
        credentials: Any = None,
        sigv4_region: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        archive_wait_s: float = ARCHIVE_WAIT_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._sleep = sleep
        self._archive_wait_s = archive_wait_s
        auth, headers = connection_auth(
            self.base_url, token=token, credentials=credentials, sigv4_region=sigv4_region
        )
        headers = {"Accept": "application/json", "User-Agent": "jobsched-cli", **headers}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            auth=auth,
            timeout=timeout_s,
            # connection-level retries only (nothing was sent): safe for every call
            transport=transport or httpx.HTTPTransport(retries=2),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> JobschedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transport --------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One call; returns the 2xx response. Raises ``ApiUnreachable`` without a response, ``ApiError``
        with the API's code/message/field for any other status."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, path, json=json, params=query, headers=headers)
        except (httpx.ConnectError, httpx.TimeoutException, httpx.RemoteProtocolError) as error:
            raise ApiUnreachable(self.base_url, str(error) or type(error).__name__) from error
        if response.is_success:
            return response
        raise _error_of(response)

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self.request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return {}
        try:
            body = response.json()
        except ValueError:  # another web server's page: say so as any failed call does
            text = " ".join(response.text.split())[:80]
            raise ApiError(
                response.status_code,
                "not_json",
                f"the answer is not JSON ({text!r}): is {self.base_url} the jobsched API?",
            ) from None
        return body if isinstance(body, dict) else {"items": body}

    # --- jobs -------------------------------------------------------------------------------

    def create_job(
        self, body: dict[str, Any], *, idempotency_key: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """``POST /jobs`` with ``body`` (a JobCreate as JSON). Returns ``(job, created)``: ``created`` is
        False when the API answered 200 (an identical job under that name, or an idempotent repeat)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        response = self.request("POST", "/jobs", json=body, headers=headers)
        return response.json(), response.status_code == 201

    def list_jobs(
        self, *, limit: int | None = None, cursor: str | None = None, labels: Sequence[str] = ()
    ) -> dict[str, Any]:
        """``GET /jobs``: one page ``{"items": [job, ...], "next_cursor": str | None}``; with ``labels``
        (``key=value`` terms, one ``label`` parameter each), only the jobs carrying all of them."""
        return self._json(
            "GET", "/jobs", params={"limit": limit, "cursor": cursor, "label": list(labels) or None}
        )

    def iter_jobs(self, *, page_size: int = 100, labels: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
        """Every job of the caller (carrying every label of ``labels``: ``key=value`` terms), following
        ``next_cursor``."""
        cursor: str | None = None
        while True:
            page = self.list_jobs(limit=page_size, cursor=cursor, labels=labels)
            yield from page.get("items", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def limits(self) -> dict[str, Any]:
        """``GET /limits``: the caller's quotas and use, ``{"owner", "jobs", "fires_per_minute",
        "triggers_per_minute": {"limit": number | None, "use": number}, "runs_in_flight": None}``."""
        return self._json("GET", "/limits")

    def health(self) -> dict[str, Any]:
        """``GET /health``: the scheduler's dispatch lateness over its latest window, ``{"since", "until",
        "partitions", "reporting", "by_priority": [{"priority", "runs", "p50_ms", "p99_ms", "max_ms"}],
        "top_owners": [{"rank", "owner", "you", "backlog", "by_priority"}], "other": [...]}``."""
        return self._json("GET", "/health")

    def get_job(self, job_id: str) -> dict[str, Any]:
        """``GET /jobs/{id}``."""
        return self._json("GET", f"/jobs/{_segment(job_id)}")

    def update_job(self, job_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """``PATCH /jobs/{id}`` with a JobPatch as JSON; returns the updated job."""
        return self._json("PATCH", f"/jobs/{_segment(job_id)}", json=patch)

    def delete_job(self, job_id: str) -> None:
        """``DELETE /jobs/{id}`` (no new runs; history kept until retention)."""
        self.request("DELETE", f"/jobs/{_segment(job_id)}")

    def pause_job(self, job_id: str, *, reason: str | None = None) -> dict[str, Any]:
        """``POST /jobs/{id}/pause`` (with ``{"reason": reason}`` when given); returns the job."""
        body = {"reason": reason} if reason is not None else None
        return self._json("POST", f"/jobs/{_segment(job_id)}/pause", json=body)

    def resume_job(self, job_id: str) -> dict[str, Any]:
        """``POST /jobs/{id}/resume`` (the job's ``missed`` policy applies); returns the job."""
        return self._json("POST", f"/jobs/{_segment(job_id)}/resume")

    def trigger_job(self, job_id: str, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """``POST /jobs/{id}/trigger``: one run now, outside the schedule; returns the run."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._json("POST", f"/jobs/{_segment(job_id)}/trigger", headers=headers)

    def backfill_job(
        self, job_id: str, *, start: str, end: str, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """``POST /jobs/{id}/backfill`` for ``[start, end)`` (ISO 8601): ``{"count", "created", "rerun", "fires",
        "existing", "first", "last"}``."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        body = {"start": start, "end": end}
        return self._json("POST", f"/jobs/{_segment(job_id)}/backfill", json=body, headers=headers)

    def list_events(
        self, job_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``GET /jobs/{id}/events``, newest first: ``{"items": [{"at", "kind", "actor", "detail"}, ...],
        "next_cursor": str | None}``."""
        return self._json(
            "GET", f"/jobs/{_segment(job_id)}/events", params={"limit": limit, "cursor": cursor}
        )

    def list_fires(self, job_id: str, *, count: int | None = None) -> dict[str, Any]:
        """``GET /jobs/{id}/fires``: ``{"items": [{"scheduled_for", "dispatch_at", "local_time", "note"}, ...],
        "reason": str | None}``, the next ``count`` fires (1-100; the API's default 10)."""
        return self._json("GET", f"/jobs/{_segment(job_id)}/fires", params={"count": count})

    def list_runs(
        self, job_id: str, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``GET /jobs/{id}/runs``, newest first: ``{"items": [run, ...], "next_cursor": str | None}``."""
        return self._runs_page(
            f"/jobs/{_segment(job_id)}/runs", {"status": status, "limit": limit, "cursor": cursor}
        )

    def list_all_runs(
        self, *, limit: int | None = None, cursor: str | None = None, **filters: str | None
    ) -> dict[str, Any]:
        """``GET /runs``: the caller's runs across their jobs, newest first; ``filters`` among ``status``,
        ``job_id``, ``kind``, ``since``, ``until`` (ISO 8601). ``{"items": [run, ...], "next_cursor": str | None}``."""
        return self._runs_page("/runs", {**filters, "limit": limit, "cursor": cursor})

    def _runs_page(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        """A runs listing's page; one answered from the archive (``query_id``) is polled to its runs, which come
        as one page (``archived_run``'s shape, ``archived`` true or false) without a cursor; when it is full
        (``limit`` runs), ``next_until`` is the instant just after its oldest run (ISO 8601 UTC): the same
        listing with ``until`` set to it holds the older runs (and again those of that instant)."""
        body = self._json("GET", path, params=params)
        if "query_id" not in body:
            return body
        rows = self.archive_query_runs(body)
        page: dict[str, Any] = {"items": [archived_run(row) for row in rows], "next_cursor": None}
        limit = params.get("limit")
        if rows and limit is not None and len(rows) >= int(limit):
            page["next_until"] = iso_ms(int(rows[-1]["scheduled_for"]) + 1)
        return page

    def archive_query_runs(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        """The archived runs of an archive query answer (``{"query_id", "status", ...}``), polling
        ``GET /archive/queries/{query_id}`` while it is ``running``. Raises ``ApiError`` (code
        ``archive_query_failed``, or ``archive_query_timeout`` after ``archive_wait_s``)."""
        waited = 0.0
        while answer.get("status") == "running":
            if waited >= self._archive_wait_s:
                raise ApiError(
                    504,
                    "archive_query_timeout",
                    f"the archive query {answer.get('query_id')} still runs after {waited:.0f} s: narrow the window",
                )
            self._sleep(ARCHIVE_POLL_S)
            waited += ARCHIVE_POLL_S
            answer = self._json("GET", f"/archive/queries/{_segment(str(answer['query_id']))}")
        if answer.get("status") != "succeeded":
            raise ApiError(502, "archive_query_failed", f"the archive query failed: {answer.get('reason')}")
        return list(answer.get("runs") or [])

    def iter_all_runs(self, *, page_size: int = 100, **filters: str | None) -> Iterator[dict[str, Any]]:
        """Every run ``GET /runs`` lists with ``filters`` (newest first), following ``next_cursor``; across a
        window the archive answers, following ``next_until`` (``_runs_page``), each run once. Should more than
        ``page_size`` runs share one instant, the archive's pages list ``page_size`` of them."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = self.list_all_runs(limit=page_size, cursor=cursor, **filters)
            items = page.get("items", [])
            fresh = [run for run in items if run.get("id") not in seen]
            yield from fresh
            cursor = page.get("next_cursor")
            if cursor:
                continue
            until = page.get("next_until")
            if not until:
                return
            seen.update(str(run.get("id")) for run in items)
            # no new run: the page was one instant's runs only; go on from just before it
            filters = {
                **filters,
                "until": until if fresh else iso_ms(epoch_ms_of(items[-1]["scheduled_for"])),
            }

    def iter_runs(
        self, job_id: str, *, status: str | None = None, page_size: int = 100
    ) -> Iterator[dict[str, Any]]:
        """Every run of a job (newest first), following ``next_cursor``."""
        cursor: str | None = None
        while True:
            page = self.list_runs(job_id, status=status, limit=page_size, cursor=cursor)
            yield from page.get("items", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def get_run(self, job_id: str, run_id: str) -> dict[str, Any]:
        """``GET /jobs/{id}/runs/{run_id}``: the run with ``attempts`` (its tries: ``attempt``, ``started_at``,
        ``finished_at``, ``worker``, ``error``, ``output``) and ``previous_attempts`` (before each re-run)."""
        return self._json("GET", f"/jobs/{_segment(job_id)}/runs/{_segment(run_id)}")

    def retry_run(self, job_id: str, run_id: str, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """``POST /jobs/{id}/runs/{run_id}/retry``: a dead or skipped run queued again (same run id, fresh
        attempts); returns the run. Raises ``ApiError`` 409 for a run in any other status."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._json("POST", f"/jobs/{_segment(job_id)}/runs/{_segment(run_id)}/retry", headers=headers)

    def cancel_run(self, job_id: str, run_id: str, *, reason: str | None = None) -> dict[str, Any]:
        """``POST /jobs/{id}/runs/{run_id}/cancel`` (with ``{"reason": reason}`` when given): the cancelled run
        with ``stop`` and ``note`` (what became of its try). Raises ``ApiError`` 409 for a finished run."""
        body = {"reason": reason} if reason is not None else None
        return self._json("POST", f"/jobs/{_segment(job_id)}/runs/{_segment(run_id)}/cancel", json=body)


def _segment(value: str) -> str:
    """A path segment: job ids are ``[A-Za-z0-9_]``; anything else is percent-encoded, never a new path."""
    from urllib.parse import quote

    return quote(value, safe="")


def _error_of(response: httpx.Response) -> ApiError:
    """The ``ApiError`` of a non-2xx response (the API's error body, or the status text otherwise)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return ApiError(
            response.status_code, str(error.get("code") or "error"), str(error["message"]), error.get("field")
        )
    if isinstance(body, dict) and body.get("message"):  # API Gateway's own errors: {"message": "..."}
        return ApiError(response.status_code, _status_code(response.status_code), str(body["message"]))
    text = " ".join(response.text.split())[:200] or response.reason_phrase
    return ApiError(response.status_code, _status_code(response.status_code), text)


def _status_code(status: int) -> str:
    return {
        400: "bad_request",
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        409: "conflict",
        413: "too_large",
        422: "unprocessable",
        429: "throttled",
    }.get(status, f"http_{status}")
