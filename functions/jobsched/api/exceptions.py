"""Named errors of the API use cases (no HTTP here); ``jobsched.api.errors`` maps each to a response."""

from __future__ import annotations

JSON_BODY_ONLY = "send the request body as JSON (Content-Type: application/json)"
"""The message of a body refused for its media type (400, code ``unsupported_media_type``, field
``Content-Type``): request admission's and Powertools' own refusal say the same."""


class ApiProblem(Exception):
    """Base of the use-case errors. ``message`` is one sentence a person can act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(ApiProblem):
    """Bad input (400). ``field`` names the request field (dotted for nested ones, e.g. ``retry.max_attempts``)."""

    def __init__(self, field: str | None, message: str, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.field = field
        self.code = code


class Unauthorized(ApiProblem):
    """No or bad credentials (401). ``challenge`` is the ``WWW-Authenticate`` value naming the scheme to use."""

    def __init__(self, message: str, challenge: str = 'Bearer realm="jobsched"') -> None:
        super().__init__(message)
        self.challenge = challenge


class Forbidden(ApiProblem):
    """The caller is authenticated but has no owner (403): with ``Settings.owner_from = "tag:<key>"``, a principal
    without a usable ``<key>`` tag. ``field`` names what is missing (``tag:<key>``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class JobNotFound(ApiProblem):
    """The job does not exist or belongs to another owner (404: the two are never told apart)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} not found")
        self.job_id = job_id


class UpstreamNotFound(JobNotFound):
    """The job a job's ``after.job`` names does not exist or is another owner's (404, field ``after.job``; as
    for a job, never told apart)."""

    def __init__(self, job: str) -> None:
        super().__init__(job)
        self.message = f"after.job: job {job!r} not found; name one of your jobs by its id or name"
        self.args = (self.message,)


class RunNotFound(JobNotFound):
    """The run does not exist, its id is malformed or of another job, or its job is another owner's (404, as
    for a job: never told apart)."""

    def __init__(self, job_id: str, run_id: str) -> None:
        super().__init__(job_id)
        self.message = f"run {run_id!r} of job {job_id!r} not found"
        self.args = (self.message,)
        self.run_id = run_id


class CursorNotFound(ApiProblem):
    """A well-formed ``cursor`` this listing did not issue: another owner's, another listing's, altered, or
    of an older format (404, field ``cursor``; like a job of another owner, never told apart)."""

    def __init__(self) -> None:
        super().__init__(
            "cursor was not issued for this listing; pass next_cursor from the previous page, "
            "or start again without a cursor"
        )


class ArchiveQueryNotFound(ApiProblem):
    """An archive query id that is unknown, another owner's, or not one the API started (404, field
    ``query_id``; never told apart)."""

    def __init__(self) -> None:
        super().__init__("no such archive query; start one by listing runs with since before the retention")


class HistoryGone(ApiProblem):
    """A window of runs older than the runs table's retention, on a deployment without an archive (410, code
    ``beyond_retention``, field ``since``): the message says where the history went."""


class NameConflict(ApiProblem):
    """The owner already has a job with this ``name`` and a different spec (409)."""

    def __init__(self, name: str, job_id: str) -> None:
        super().__init__(
            f"a job named {name!r} already exists ({job_id}) with a different spec; "
            "pick another name, or PATCH that job"
        )
        self.name = name
        self.job_id = job_id


class ConcurrentChange(ApiProblem):
    """The job kept changing under a read-modify-write (409); the caller may retry."""


class RunNotRetryable(ApiProblem):
    """A re-run of a run that is not ``dead`` or ``skipped`` (409), or cannot be re-run as one run.

    ``retry_after_s``: seconds after which the same request may succeed when the refusal is temporary (a dead
    run whose notification is still being sent), answered as ``Retry-After``; None when it is final (no
    ``Retry-After``: asking again cannot succeed)."""

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RunNotCancellable(ApiProblem):
    """A cancel of a run that has finished (``succeeded``, ``dead`` or ``skipped``): 409."""


class PayloadTooLarge(ApiProblem):
    """The request body is larger than the deployment allows (413)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request body is {size} bytes; the limit is {limit} bytes")
        self.size = size
        self.limit = limit
