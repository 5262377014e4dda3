"""The WSGI adapter: HTTP request -> API Gateway REST proxy event -> handler -> HTTP response."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import pytest
from werkzeug.test import Client, EnvironBuilder

from jobsched.api.app import app
from jobsched.api.wsgi import ApiWsgiApp, event_from_environ
from jobsched.lambda_context import LOCAL_ACCOUNT_ID, LocalLambdaContext


def environ(**kwargs: Any) -> tuple[dict[str, Any], bytes]:
    env = EnvironBuilder(**kwargs).get_environ()
    return env, env["wsgi.input"].read()


def test_a_request_becomes_a_rest_proxy_event():
    env, body = environ(
        method="POST",
        path="/jobs/j_0123456789abcdef0123/trigger",
        query_string="a=1&b=2&a=3",
        headers={"Authorization": "Bearer t", "Idempotency-Key": "k-1"},
        json={"x": "é"},
    )

    event = event_from_environ(env, body, stage="local")

    assert event["httpMethod"] == "POST"
    assert event["path"] == "/jobs/j_0123456789abcdef0123/trigger"
    assert event["resource"] == "/jobs/{id}/trigger"
    assert event["pathParameters"] == {"id": "j_0123456789abcdef0123"}
    assert event["queryStringParameters"] == {"a": "3", "b": "2"}
    assert event["multiValueQueryStringParameters"] == {"a": ["1", "3"], "b": ["2"]}
    assert event["headers"]["Authorization"] == "Bearer t"
    assert event["headers"]["Idempotency-Key"] == "k-1"
    assert event["multiValueHeaders"]["Content-Type"] == ["application/json"]
    assert json.loads(event["body"]) == {"x": "é"} and event["isBase64Encoded"] is False
    context = event["requestContext"]
    # the path as the client sent it: local mode serves the API at its root (no stage in the URL)
    assert context["stage"] == "local" and context["path"] == "/jobs/j_0123456789abcdef0123/trigger"
    assert context["resourcePath"] == "/jobs/{id}/trigger" and context["requestId"]
    assert context["identity"]["userArn"] is None  # no IAM locally: the API checks the bearer token


@pytest.mark.parametrize(
    ("path", "resource", "params"),
    [
        ("/jobs", "/jobs", None),
        ("/jobs/", "/jobs", None),
        ("/jobs/j_1", "/jobs/{id}", {"id": "j_1"}),
        ("/jobs/j_1/runs", "/jobs/{id}/runs", {"id": "j_1"}),
        ("/openapi.json", "/openapi.json", None),
        ("/elsewhere/x", "/elsewhere/x", None),
    ],
)
def test_resources_and_path_parameters(path, resource, params):
    env, body = environ(path=path)

    event = event_from_environ(env, body)

    assert (event["resource"], event["pathParameters"]) == (resource, params)


def test_a_request_without_query_or_body_has_nulls_like_api_gateway():
    env, body = environ(path="/jobs")

    event = event_from_environ(env, body)

    assert event["queryStringParameters"] is None and event["multiValueQueryStringParameters"] is None
    assert event["body"] is None and event["isBase64Encoded"] is False


def test_an_empty_header_value_is_kept():
    env, body = environ(path="/jobs", headers={"Idempotency-Key": ""})

    assert event_from_environ(env, body)["headers"]["Idempotency-Key"] == ""


@pytest.mark.parametrize(
    ("content_type", "data"), [("application/octet-stream", b"\x00\x01"), ("application/json", b"\xff\xfe")]
)
def test_binary_and_non_utf8_bodies_travel_base64_encoded(content_type, data):
    env, body = environ(method="POST", path="/jobs", data=data, content_type=content_type)

    event = event_from_environ(env, body)

    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == data


def test_the_handlers_response_becomes_the_http_response():
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(event)
        assert (
            isinstance(context, LocalLambdaContext) and 0 < context.get_remaining_time_in_millis() <= 30_000
        )
        return {
            "statusCode": 201,
            "multiValueHeaders": {"Content-Type": ["application/json"], "Set-Cookie": ["a=1", "b=2"]},
            "headers": {"Location": "/jobs/j_1"},
            "body": '{"id":"j_1"}',
            "isBase64Encoded": False,
        }

    response = Client(ApiWsgiApp(handler)).post("/jobs", json={"name": "x"})

    assert response.status == "201 Created"
    assert response.json == {"id": "j_1"}
    assert response.headers["Location"] == "/jobs/j_1"
    assert response.headers.getlist("Set-Cookie") == ["a=1", "b=2"]
    assert response.headers["Content-Length"] == str(len(b'{"id":"j_1"}'))
    assert seen[0]["httpMethod"] == "POST"


def test_a_base64_response_is_decoded():
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        body = base64.b64encode(b"\x00bin").decode()
        return {"statusCode": 200, "headers": {}, "body": body, "isBase64Encoded": True}

    response = Client(ApiWsgiApp(handler)).get("/x")

    assert response.data == b"\x00bin"


def test_only_a_bounded_prefix_of_a_huge_body_is_read():
    sizes: list[int] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        sizes.append(len(event["body"]))
        return {"statusCode": 413, "headers": {}, "body": "", "isBase64Encoded": False}

    Client(ApiWsgiApp(handler, max_body_bytes=1000)).post(
        "/jobs", data="x" * 50_000, content_type="application/json"
    )

    assert sizes == [1001]


def test_requests_are_handled_one_at_a_time():
    # Given a first request held inside the handler until the test lets it go
    inside = threading.Event()
    release = threading.Event()
    entered: list[str] = []
    order: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        name = event["queryStringParameters"]["n"]
        order.append(f"in {name}")
        entered.append(name)
        if name == "first":
            inside.set()
            release.wait(30)
        order.append(f"out {name}")
        return {"statusCode": 204, "headers": {}, "body": "", "isBase64Encoded": False}

    app = ApiWsgiApp(handler)
    first = threading.Thread(target=lambda: Client(app).get("/jobs?n=first"))
    first.start()
    assert inside.wait(30)
    # When more requests arrive meanwhile
    others = [threading.Thread(target=lambda i=i: Client(app).get(f"/jobs?n={i}")) for i in range(5)]
    for thread in others:
        thread.start()
    # Then none enters the handler while the first is in it (a bounded look: a slow machine can only make
    # it miss a bug, never fail a correct app)
    try:
        for thread in others:
            thread.join(0.05)
        assert entered == ["first"]
        assert all(thread.is_alive() for thread in others)
    finally:
        release.set()
        for thread in [first, *others]:
            thread.join(30)
    # and each ran alone once the first was done
    assert len(entered) == 6
    assert order == [step for name in entered for step in (f"in {name}", f"out {name}")]


def test_local_requests_come_from_motos_account_in_the_event_and_the_context():
    # Given: one fake Lambda context for every local invocation, in moto's default account
    contexts: list[Any] = []
    env, body = environ(method="GET", path="/jobs")

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        contexts.append(context)
        return {"statusCode": 204, "body": None}

    Client(ApiWsgiApp(handler)).get("/jobs")

    assert LOCAL_ACCOUNT_ID == "123456789012"
    assert event_from_environ(env, body)["requestContext"]["accountId"] == LOCAL_ACCOUNT_ID
    (context,) = contexts
    assert (
        context.invoked_function_arn
        == f"arn:aws:lambda:us-east-1:{LOCAL_ACCOUNT_ID}:function:jobsched-api-local"
    )
    assert context.function_name == "jobsched-api-local" and context.memory_limit_in_mb == 512


def _served_routes() -> list[tuple[str, str]]:
    """``(method, path template)`` of every operation of the handler's OpenAPI document, and GET /openapi.json."""
    document = app.openapi_document()
    served = [(m.upper(), path) for path, operations in document["paths"].items() for m in operations]
    return [*served, ("GET", "/openapi.json")]


@pytest.mark.parametrize(("method", "template"), _served_routes())
def test_every_route_the_handler_serves_maps_to_its_api_gateway_resource(method, template):
    # Given: a request for the route, with a concrete value for each path parameter
    values = {
        "id": "j_0123456789abcdef0123",
        "run_id": "j_0123456789abcdef0123@1767578400000",
        "query_id": "q-1",
    }
    path = template
    for name, value in values.items():
        path = path.replace(f"{{{name}}}", value)
    env, body = environ(method=method, path=path)

    event = event_from_environ(env, body)

    # Then: the event carries the resource template and path parameters API Gateway would send
    assert event["resource"] == template and event["requestContext"]["resourcePath"] == template
    expected = {name: value for name, value in values.items() if f"{{{name}}}" in template}
    assert event["pathParameters"] == (expected or None)
