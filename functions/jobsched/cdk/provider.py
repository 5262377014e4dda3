"""The custom resource provider behind ``jobsched.cdk.Job``: CloudFormation's create, update and delete of one
job, as calls of the jobsched API signed with the provider function's own role.

The provider function runs this module's :func:`on_event` under ``aws_cdk.custom_resources.Provider`` (the
CDK's provider framework, which answers CloudFormation). It imports no CDK: its asset holds this module, the
API client (``jobsched.client``) and httpx. The resource's properties (``ResourceProperties``):

- ``ApiUrl``: the API root (``https://<id>.execute-api.<region>.amazonaws.com/<stage>``);
- ``Name``: the job's name;
- ``Spec``: the job's other fields (``JobSettings``' names, every one of them: the construct fills in the
  API's defaults) as one JSON object in a string, so numbers and booleans arrive as JSON gives them
  (CloudFormation passes other properties' scalars as strings).

What each request does:

- ``Create``: ``POST /jobs`` with an ``Idempotency-Key`` derived from the stack, the logical id and the
  request id (:func:`idempotency_key`), so a retry of the same request replays the first answer: one job, not
  two. The handler itself retries a create that got no answer or a 5xx (``CREATE_RETRY_DELAYS_S``): the job
  may exist then, and a create that fails is never deleted (the framework skips the Delete of a resource
  whose Create failed), so giving up at once would leave it running outside the stack. The job's id is the
  ``PhysicalResourceId``.
- ``Update``: a changed ``Name`` or ``ApiUrl`` (compared without a trailing ``/``, which names the same API)
  is a new job (the API never renames one), created as above under a new physical id; CloudFormation then
  deletes the old one. Otherwise ``PATCH /jobs/{id}`` with the fields of ``Spec`` that changed
  (:func:`changed_fields`), and no call when none did; a job deleted outside the stack (the PATCH answers
  404) is created anew from the whole spec under a new physical id, so neither the update nor its rollback
  fails on a job that is gone.
- ``Delete``: ``DELETE /jobs/{id}``; a job already gone (404) is deleted.

A refused call fails the request with the API's own error (``ApiError``'s text: status, code, message,
field), which the framework reports to CloudFormation as the resource's failure reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobsched.client import ApiError, JobschedClient, api_gateway_region

__all__ = [
    "API_URL_PROPERTY",
    "NAME_PROPERTY",
    "SPEC_PROPERTY",
    "JobRefused",
    "JobResource",
    "changed_fields",
    "idempotency_key",
    "on_event",
    "signed_client",
]

API_URL_PROPERTY = "ApiUrl"
NAME_PROPERTY = "Name"
SPEC_PROPERTY = "Spec"
"""The resource's property names (see the module docstring)."""
REPLACING = (API_URL_PROPERTY, NAME_PROPERTY)
"""Properties whose change makes a new job (the API renames nothing, and another API is another job)."""

ClientFactory = Callable[[str], JobschedClient]

CREATE_RETRY_DELAYS_S = (1.0, 2.0)
"""Seconds between the attempts of a create that got no answer (``ApiError`` status 0) or a 5xx: three
attempts of at most the client's 30 s each fit the function's 2 minutes."""


class JobRefused(Exception):
    """The API refused a call for a resource; the text names the job and gives the API's own error
    (``"job 'nightly' (Create): 400 invalid_input: ... (field: schedule)"``). ``error`` is the ``ApiError``."""

    def __init__(self, name: str, request: str, error: ApiError) -> None:
        super().__init__(f"job {name!r} ({request}): {error}")
        self.error = error


def idempotency_key(event: Mapping[str, Any]) -> str:
    """The ``Idempotency-Key`` of a request that creates a job: ``cfn-`` and 40 hex digits of the SHA-256 of
    the stack id, the logical id and the request id, so every retry of one request sends the same key and
    two requests never share one."""
    parts = (event.get("StackId", ""), event.get("LogicalResourceId", ""), event["RequestId"])
    return "cfn-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The PATCH body from ``old`` to ``new`` (two ``Spec`` objects): each field of ``new`` whose value differs
    from ``old``'s, and null for a field ``old`` has and ``new`` has not (a field the API clears with null;
    the construct always gives the others). Empty when nothing changed."""
    patch = {name: value for name, value in new.items() if name not in old or old[name] != value}
    patch.update({name: None for name in old.keys() - new.keys()})
    return patch


def signed_client(api_url: str) -> JobschedClient:
    """A client of ``api_url`` whose calls are signed with SigV4 with the function's own credentials (its
    role), in the API's region (from an API Gateway URL, else the function's ``AWS_REGION``)."""
    region = api_gateway_region(api_url) or os.environ["AWS_REGION"]
    return JobschedClient(api_url, sigv4_region=region)


class JobResource:
    """Handles one custom resource request (the framework's ``onEvent`` event: ``RequestType``,
    ``ResourceProperties``, ``OldResourceProperties``, ``PhysicalResourceId``, ``RequestId``, ...) with a client
    from ``client_for(api_url)``. :meth:`handle` returns ``{"PhysicalResourceId": job id, "Data": {"JobId",
    "Name"}}`` (Delete: the physical id alone) and raises ``JobRefused`` when the API refuses a call,
    ``KeyError``/``ValueError`` for an event without the properties the construct writes."""

    def __init__(
        self, client_for: ClientFactory = signed_client, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._client_for = client_for
        self._sleep = sleep

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        request = event["RequestType"]
        properties = event["ResourceProperties"]
        if request == "Create":
            return self._create(event, properties)
        if request == "Update":
            old = event["OldResourceProperties"]
            if any(
                _comparable(name, old.get(name)) != _comparable(name, properties[name]) for name in REPLACING
            ):
                return self._create(event, properties)
            return self._update(event, old, properties)
        if request == "Delete":
            return self._delete(event["PhysicalResourceId"], properties)
        raise ValueError(f"unknown RequestType {request!r}")

    def _create(self, event: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
        name = properties[NAME_PROPERTY]
        body = {"name": name, **_spec(properties)}
        key = idempotency_key(event)
        with self._client_for(properties[API_URL_PROPERTY]) as client:
            for delay_s in CREATE_RETRY_DELAYS_S:
                try:
                    return _answer(client.create_job(body, idempotency_key=key)[0])
                except ApiError as error:
                    if not _unanswered(error):
                        raise JobRefused(name, event["RequestType"], error) from error
                self._sleep(delay_s)
            try:
                return _answer(client.create_job(body, idempotency_key=key)[0])
            except ApiError as error:
                raise JobRefused(name, event["RequestType"], error) from error

    def _update(
        self, event: Mapping[str, Any], old: Mapping[str, Any], properties: Mapping[str, Any]
    ) -> dict[str, Any]:
        job_id, name = event["PhysicalResourceId"], properties[NAME_PROPERTY]
        patch = changed_fields(_spec(old), _spec(properties))
        if not patch:
            return {"PhysicalResourceId": job_id, "Data": {"JobId": job_id, "Name": name}}
        with self._client_for(properties[API_URL_PROPERTY]) as client:
            try:
                job = client.update_job(job_id, patch)
            except ApiError as error:
                if error.status != 404:
                    raise JobRefused(name, "Update", error) from error
                return self._create(event, properties)
        return _answer(job)

    def _delete(self, job_id: str, properties: Mapping[str, Any]) -> dict[str, Any]:
        with self._client_for(properties[API_URL_PROPERTY]) as client:
            try:
                client.delete_job(job_id)
            except ApiError as error:
                if error.status != 404:
                    raise JobRefused(properties.get(NAME_PROPERTY, job_id), "Delete", error) from error
        return {"PhysicalResourceId": job_id}


def _comparable(name: str, value: Any) -> Any:
    """A replacing property's value as compared between updates: an ``ApiUrl`` without its trailing ``/``
    (the client calls the same API either way)."""
    return value.rstrip("/") if name == API_URL_PROPERTY and isinstance(value, str) else value


def _spec(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Spec`` property as an object; ``ValueError`` when it is not a JSON object."""
    try:
        spec = json.loads(properties.get(SPEC_PROPERTY) or "{}")
    except json.JSONDecodeError as error:
        # The construct writes JSON, but a token's deploy-time value is spliced into it unescaped
        raise ValueError(
            f"job {properties.get(NAME_PROPERTY)!r}: the {SPEC_PROPERTY} property is not JSON ({error}): a value "
            "resolved at deploy time (a parameter, an import) holds a quote or a backslash; pass it in input "
            "another way"
        ) from None
    if not isinstance(spec, dict):
        raise ValueError(f"the {SPEC_PROPERTY} property must be a JSON object, not {type(spec).__name__}")
    return spec


def _unanswered(error: ApiError) -> bool:
    """Whether a call may have been carried out without its answer reaching us: no response, or a 5xx."""
    return error.status == 0 or error.status >= 500


def _answer(job: Mapping[str, Any]) -> dict[str, Any]:
    return {"PhysicalResourceId": job["id"], "Data": {"JobId": job["id"], "Name": job["name"]}}


def on_event(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    """The provider function's entry point (``jobsched.cdk.provider.on_event``): :meth:`JobResource.handle`
    with :func:`signed_client`."""
    return JobResource().handle(event)
