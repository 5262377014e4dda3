"""The OpenAPI document is generated from the routes and models and lists every route with its models."""

from __future__ import annotations

import json
import re

import pytest

from jobsched.api.app import allowed_methods, app
from jobsched.api.cursor import CURSOR_PATTERN, encode_cursor
from jobsched.api.document import HTTP_URL_FORMAT, SCHEDULE_FORMAT
from jobsched.api.schemas import PATCH_NULLABLE_FIELDS
from jobsched.models import INSTANT_YEARS
from jobsched.schedule.engine import get_zone
from jobsched.settings import Settings

DOC = app.openapi_document()
REF = "#/components/schemas/"

ROUTES = {
    ("post", "/jobs"): ("JobCreate", {"201": "Job", "200": "Job"}),
    ("get", "/jobs"): (None, {"200": "Page_Job_"}),
    ("get", "/runs"): (None, {"200": "Page_Run_", "202": "ArchiveQueryStatus"}),
    ("get", "/jobs/{id}"): (None, {"200": "JobDetail"}),
    ("patch", "/jobs/{id}"): ("JobPatch", {"200": "Job"}),
    ("delete", "/jobs/{id}"): (None, {"204": None}),
    ("post", "/jobs/{id}/pause"): ("PauseRequest", {"200": "Job"}),
    ("post", "/jobs/{id}/resume"): (None, {"200": "Job"}),
    ("post", "/jobs/{id}/trigger"): (None, {"202": "Run"}),
    ("get", "/jobs/{id}/runs"): (None, {"200": "Page_Run_", "202": "ArchiveQueryStatus"}),
    ("get", "/archive/queries/{query_id}"): (
        None,
        {"200": "ArchiveQueryStatus", "202": "ArchiveQueryStatus"},
    ),
    ("get", "/jobs/{id}/fires"): (None, {"200": "Fires"}),
    ("get", "/jobs/{id}/events"): (None, {"200": "Page_JobEvent_"}),
    ("post", "/jobs/{id}/backfill"): ("BackfillRequest", {"200": "BackfillResult"}),
    ("get", "/jobs/{id}/runs/{run_id}"): (None, {"200": "RunDetail"}),
    ("post", "/jobs/{id}/runs/{run_id}/retry"): (None, {"202": "RunDetail"}),
    ("post", "/jobs/{id}/runs/{run_id}/cancel"): ("CancelRequest", {"200": "RunCancel"}),
    ("get", "/limits"): (None, {"200": "Limits"}),
    ("get", "/health"): (None, {"200": "Health"}),
}


OPTIONAL_BODIES = {"PauseRequest", "CancelRequest"}


def schema_ref(response: dict) -> str | None:
    content = response.get("content")
    if content is None:
        return None
    return content["application/json"]["schema"]["$ref"].removeprefix(REF)


def test_the_document_is_openapi_3_with_exactly_the_api_routes():
    assert DOC["openapi"].startswith("3.")
    listed = {(method, path) for path, operations in DOC["paths"].items() for method in operations}
    assert listed == set(ROUTES)


@pytest.mark.parametrize(("route", "models"), ROUTES.items(), ids=[f"{m.upper()} {p}" for m, p in ROUTES])
def test_every_route_has_its_request_and_response_models(route, models):
    method, path = route
    request_model, success = models
    operation = DOC["paths"][path][method]

    if request_model in OPTIONAL_BODIES:
        assert operation["requestBody"].get("required", False) is False
        any_of = operation["requestBody"]["content"]["application/json"]["schema"]["anyOf"]
        assert [one.get("$ref", "").removeprefix(REF) or one["type"] for one in any_of] == [
            request_model,
            "null",
        ]
    elif request_model:
        assert operation["requestBody"]["required"] is True
        assert schema_ref(operation["requestBody"]) == request_model
    else:
        assert "requestBody" not in operation
    for status, model in success.items():
        assert schema_ref(operation["responses"][status]) == model
    errors = {s: r for s, r in operation["responses"].items() if s.startswith(("4", "5"))}
    assert {"400", "401", "429", "500"} <= set(errors)
    assert all(schema_ref(r) == "ErrorBody" for r in errors.values())
    assert operation["operationId"] and operation["summary"]


def test_the_error_shape_is_documented_and_powertools_422_detail_is_not():
    schemas = DOC["components"]["schemas"]

    assert schemas["ErrorBody"]["required"] == ["error"]
    assert set(schemas["ErrorDetail"]["properties"]) == {"code", "message", "field"}
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert "422" not in DOC["paths"]["/jobs/{id}"]["get"]["responses"]


@pytest.mark.parametrize("route", [("post", "/jobs"), ("post", "/jobs/{id}/trigger")])
def test_idempotency_key_is_documented_where_accepted(route):
    method, path = route
    operation = DOC["paths"][path][method]
    (header,) = [p for p in operation["parameters"] if p["in"] == "header"]

    assert header["name"] == "Idempotency-Key" and header["required"] is False
    assert header["schema"]["type"] == "string" and header["schema"]["maxLength"] == 255
    assert "422" in operation["responses"] and "409" in operation["responses"]


def test_query_parameters_are_plain_optional_values():
    parameters = {p["name"]: p for p in DOC["paths"]["/jobs/{id}/runs"]["get"]["parameters"]}

    assert parameters["limit"]["schema"]["minimum"] == 1 and parameters["limit"]["schema"]["maximum"] == 100
    assert parameters["status"]["schema"]["$ref"] == REF + "RunStatus"
    assert "anyOf" not in parameters["cursor"]["schema"]


def test_both_auth_schemes_are_declared():
    schemes = DOC["components"]["securitySchemes"]

    assert schemes["bearer"]["scheme"] == "bearer"
    assert schemes["sigv4"]["name"] == "Authorization"
    assert DOC["security"] == [{"sigv4": []}, {"bearer": []}]


def test_job_models_carry_the_spec_field_names():
    job = DOC["components"]["schemas"]["Job"]["properties"]

    for name in (
        "id",
        "name",
        "owner",
        "schedule",
        "timezone",
        "target",
        "input",
        "retry",
        "timeout_s",
        "missed",
        "catch_up_window_s",
        "misfire_grace_s",
        "overlap",
        "priority",
        "jitter_s",
        "start_at",
        "end_at",
        "paused",
        "next_run_at",
        "created_at",
        "updated_at",
    ):
        assert name in job, name


def test_priority_is_documented_with_its_values_on_create_and_patch():
    schemas = DOC["components"]["schemas"]
    priority = schemas["Priority"]

    assert priority["enum"] == ["high", "normal", "low"]
    for model in ("Job", "JobPatch"):
        assert "Priority" in json.dumps(schemas[model]["properties"]["priority"]), model


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/jobs", ["GET", "POST"]),
        ("/jobs/", ["GET", "POST"]),
        ("/jobs/j_1", ["DELETE", "GET", "PATCH"]),
        ("/jobs/j_1/runs", ["GET"]),
        ("/jobs/j_1/trigger", ["POST"]),
        ("/jobs/j_1/other", []),
        ("/", []),
    ],
)
def test_allowed_methods_follow_the_document(path, methods):
    assert allowed_methods(path) == methods


def test_response_headers_are_documented():
    create = DOC["paths"]["/jobs"]["post"]["responses"]
    trigger = DOC["paths"]["/jobs/{id}/trigger"]["post"]["responses"]

    assert set(create["201"]["headers"]) == {"Location", "Idempotent-Replayed"}
    assert set(create["200"]["headers"]) == {"Idempotent-Replayed"}
    assert set(trigger["202"]["headers"]) == {"Idempotent-Replayed"}
    assert "Retry-After" in create["409"]["headers"] and "Retry-After" in create["429"]["headers"]
    assert "WWW-Authenticate" in create["401"]["headers"]
    assert "headers" not in DOC["paths"]["/jobs/{id}"]["get"]["responses"]["200"]


def test_the_command_shorthand_is_documented_as_an_alternative_to_target():
    create = DOC["components"]["schemas"]["JobCreate"]
    patch = DOC["components"]["schemas"]["JobPatch"]

    for model in (create, patch):
        assert model["properties"]["command"]["type"] == "string"
        assert model["not"] == {"required": ["command", "target"]}
    assert "target" not in create["required"]
    assert {"anyOf": [{"required": ["target"]}, {"required": ["command"]}]} in create["allOf"]
    assert "command" not in DOC["components"]["schemas"]["Job"]["properties"]


# --- the document says exactly what the API accepts ----------------------------------------------


@pytest.mark.parametrize(
    "target", ["HttpTarget", "LambdaTarget", "SqsTarget", "CommandTarget", "ShellTarget"]
)
def test_a_targets_type_is_required_as_the_api_requires_it(target):
    assert DOC["components"]["schemas"][target]["required"][0] == "type"


def test_patch_fields_allow_null_exactly_where_the_api_takes_it():
    properties = DOC["components"]["schemas"]["JobPatch"]["properties"]

    nullable = {name for name, prop in properties.items() if '"null"' in json.dumps(prop)}

    assert nullable == {"start_at", "end_at"}  # and `input`, which takes any JSON value
    assert properties["paused"] == {"type": "boolean", "title": "Paused"}
    assert properties["timeout_s"]["minimum"] == 1 and "ge" not in properties["timeout_s"]
    assert set(PATCH_NULLABLE_FIELDS) == {"input", "start_at", "end_at"}


def test_a_create_documents_one_of_schedule_and_after_neither_null():
    create = DOC["components"]["schemas"]["JobCreate"]

    assert {"anyOf": [{"required": ["schedule"]}, {"required": ["after"]}]} in create["allOf"]
    assert {"not": {"required": ["schedule", "after"]}} in create["allOf"]
    assert '"null"' not in json.dumps(create["properties"]["schedule"])
    assert '"null"' not in json.dumps(create["properties"]["after"])


def test_a_cursor_is_documented_as_what_next_cursor_is_made_of():
    for path in ("/jobs", "/jobs/{id}/runs"):
        operation = DOC["paths"][path]["get"]
        (cursor,) = [p for p in operation["parameters"] if p["name"] == "cursor"]
        assert cursor["schema"]["pattern"] == CURSOR_PATTERN
        assert "cursor" in operation["responses"]["404"]["description"]
    for page in ("Page_Job_", "Page_Run_"):
        (issued,) = [
            v
            for v in DOC["components"]["schemas"][page]["properties"]["next_cursor"]["anyOf"]
            if "pattern" in v
        ]
        assert issued["pattern"] == CURSOR_PATTERN
    token = encode_cursor("jobs", "owner", {"name": "a", "id": "j_1"})
    assert re.fullmatch(CURSOR_PATTERN.strip("^$"), token)


def test_time_zones_are_the_names_the_api_accepts():
    names = DOC["components"]["schemas"]["TimeZone"]["enum"]

    assert {"UTC", "GMT", "Europe/Berlin", "America/New_York", "Etc/GMT+5", "US/Pacific"} <= set(names)
    assert not {"EST", "CET", "Japan", "GMT0", "EST5EDT"} & set(names)
    for name in names:
        get_zone(name)  # raises for a name the API refuses
    for model in ("JobCreate", "JobPatch"):
        assert DOC["components"]["schemas"][model]["properties"]["timezone"]["$ref"] == REF + "TimeZone"


def test_rules_beyond_json_schema_are_named_formats_and_patterns():
    schemas = DOC["components"]["schemas"]
    http = schemas["HttpTarget"]["properties"]

    assert schemas["JobCreate"]["properties"]["schedule"]["format"] == SCHEDULE_FORMAT
    assert http["url"]["format"] == HTTP_URL_FORMAT
    assert re.search(http["headers"]["propertyNames"]["pattern"], "X-Request-Id")
    assert not re.search(http["headers"]["propertyNames"]["pattern"], "Bad Name")
    assert re.search(http["headers"]["additionalProperties"]["pattern"], "a b\tc")
    assert not re.search(http["headers"]["additionalProperties"]["pattern"], " padded")


def test_a_created_jobs_id_links_to_every_operation_on_it():
    responses = DOC["paths"]["/jobs"]["post"]["responses"]

    for status in ("200", "201"):
        links = responses[status]["links"]
        assert set(links) == {
            "getJob",
            "updateJob",
            "deleteJob",
            "pauseJob",
            "resumeJob",
            "triggerJob",
            "listRuns",
        }
        assert all(link["parameters"] == {"id": "$response.body#/id"} for link in links.values())


@pytest.mark.parametrize("shell", [False, True])
def test_the_served_document_carries_the_deployments_limits(shell):
    limits = Settings.model_construct(worker_timeout_cap_s=600, allow_shell_targets=shell)

    served = app.openapi_document(limits)

    for model in ("JobCreate", "JobPatch"):
        properties = served["components"]["schemas"][model]["properties"]
        assert properties["timeout_s"]["maximum"] == 600
        offered = json.dumps(properties["target"])
        assert ("ShellTarget" in offered) is shell and ('"shell"' in offered) is shell
    assert "ShellTarget" in json.dumps(served["components"]["schemas"]["Job"])  # stored jobs may have one
    assert "maximum" not in DOC["components"]["schemas"]["JobCreate"]["properties"]["timeout_s"]


def test_instants_are_documented_in_the_years_the_api_takes():
    (variant,) = [
        v
        for v in DOC["components"]["schemas"]["JobCreate"]["properties"]["start_at"]["anyOf"]
        if "format" in v
    ]
    low, high = INSTANT_YEARS

    for year, accepted in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
        assert bool(re.search(variant["pattern"], f"{year:04d}-01-01T00:00:00Z")) is accepted
