"""A test double of API Gateway's IAM auth in front of local mode: it recomputes each request's SigV4 signature
with botocore from fixed keys (``KEYS``, ``REGION``) and forwards the requests that check out with local mode's
bearer token. Used by the tests of SigV4 callers: ``jobsched ui``'s signing proxy and the provider of
``jobsched.cdk.Job``."""

from __future__ import annotations

import hmac
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

REGION = "eu-west-1"
KEYS = Credentials("AKIDCONSOLETEST", "console-test-secret-key")
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/"
    r"aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def signature_problem(method: str, url: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why the request's SigV4 signature is not the one botocore computes with ``KEYS``, or None when it is."""
    match = _AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if match is None:
        return "no SigV4 Authorization header"
    if (match["key"], match["region"], match["service"]) != (KEYS.access_key, REGION, "execute-api"):
        return f"wrong credential scope {match['key']}/{match['region']}/{match['service']}"
    signed = match["signed"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "host and x-amz-date must be signed"
    request = AWSRequest(
        method=method, url=url, data=body or None, headers={n: headers[n] for n in signed if n != "host"}
    )
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(KEYS, "execute-api", REGION)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    return None if hmac.compare_digest(expected, match["signature"]) else "signature mismatch"


@dataclass
class IamGateway:
    """WSGI stand-in for API Gateway with IAM auth in front of local mode: a request whose signature checks
    out is forwarded with local mode's bearer token; any other is answered 403 as API Gateway words it.
    ``verified`` and ``refused`` list the requests (``"POST /jobs"``); ``answered`` the forwarded ones with their
    status and ``Idempotent-Replayed`` header (``"POST /jobs 200 replayed"``)."""

    upstream: str
    token: str
    verified: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        path = quote(environ["PATH_INFO"], safe="/:@!$&'()*+,;=-._~")
        query = environ.get("QUERY_STRING", "")
        target = path + (f"?{query}" if query else "")
        headers = {k[5:].lower().replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        problem = signature_problem(method, f"http://{headers['host']}{target}", headers, body)
        with self._lock:
            (self.refused if problem else self.verified).append(f"{method} {path} {problem or ''}".strip())
        if problem:
            start_response("403 Forbidden", [("Content-Type", "application/json")])
            return [
                b'{"message": "The request signature we calculated does not match the signature you provided."}'
            ]
        forwarded = {k: v for k, v in headers.items() if k in ("content-type", "idempotency-key", "accept")}
        reply = httpx.request(
            method,
            self.upstream + target,
            headers={**forwarded, "Authorization": f"Bearer {self.token}"},
            content=body or None,
        )
        replayed = " replayed" if reply.headers.get("idempotent-replayed") == "true" else ""
        with self._lock:
            self.answered.append(f"{method} {path} {reply.status_code}{replayed}")
        out = [
            (k, v)
            for k, v in reply.headers.items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding", "connection")
        ]
        start_response(
            f"{reply.status_code} {reply.reason_phrase}", [*out, ("Content-Length", str(len(reply.content)))]
        )
        return [reply.content]
