"""Local mode's path: HTTP through the WSGI app to the same Lambda handler, with bearer tokens."""

from __future__ import annotations

import json

import pytest
from werkzeug.test import Client

from jobsched.api.wsgi import ApiWsgiApp


@pytest.fixture
def client(http, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-a": http.alice_owner, "tok-b": http.bob_owner}))
    http.reconfigure(http.settings, local_tokens_file=str(tokens))
    return Client(ApiWsgiApp(http.handler))


def test_a_job_registered_over_http_is_the_token_owners(client, http):
    created = client.post(
        "/jobs",
        json={"name": "report", "schedule": "daily 02:00", "command": "echo"},
        headers={"Authorization": "Bearer tok-a", "Idempotency-Key": "wsgi-1"},
    )
    replayed = client.post(
        "/jobs",
        json={"name": "report", "schedule": "daily 02:00", "command": "echo"},
        headers={"Authorization": "Bearer tok-a", "Idempotency-Key": "wsgi-1"},
    )
    job = created.json

    assert created.status_code == 201 and created.headers["Location"] == f"/jobs/{job['id']}"
    assert job["owner"] == http.alice_owner and job["schedule"] == "daily 02:00"
    assert replayed.status_code == 201 and replayed.json == job
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert client.get(f"/jobs/{job['id']}", headers={"Authorization": "Bearer tok-b"}).status_code == 404
    listed = client.get("/jobs?limit=10", headers={"Authorization": "Bearer tok-a"}).json
    assert [j["id"] for j in listed["items"]] == [job["id"]]


def test_errors_over_http_keep_the_spec_shape(client):
    unauthorized = client.get("/jobs")
    too_large = client.post("/jobs", data="x" * 300_000, headers={"Authorization": "Bearer tok-a"})
    form = client.post("/jobs", data={"name": "x"}, headers={"Authorization": "Bearer tok-a"})

    assert unauthorized.status_code == 401 and unauthorized.json["error"]["code"] == "unauthorized"
    assert too_large.status_code == 413 and too_large.json["error"]["code"] == "payload_too_large"
    assert form.status_code == 400 and form.json["error"]["code"] == "unsupported_media_type"


def test_the_openapi_document_is_served(client):
    response = client.get("/openapi.json")

    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    assert set(response.json["paths"]) == {
        "/jobs",
        "/runs",
        "/jobs/{id}",
        "/jobs/{id}/pause",
        "/jobs/{id}/fires",
        "/jobs/{id}/events",
        "/jobs/{id}/backfill",
        "/jobs/{id}/resume",
        "/jobs/{id}/trigger",
        "/jobs/{id}/runs",
        "/jobs/{id}/runs/{run_id}",
        "/jobs/{id}/runs/{run_id}/retry",
        "/jobs/{id}/runs/{run_id}/cancel",
        "/limits",
        "/health",
        "/archive/queries/{query_id}",
    }
