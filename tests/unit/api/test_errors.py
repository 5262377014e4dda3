"""Request validation errors become 400s naming the field, in the API error shape (design §3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from jobsched.api.errors import error_response, validation_error_response


def body_of(response: Any) -> dict[str, Any]:
    return json.loads(json.dumps(response.body))["error"]


def test_error_response_has_the_spec_shape_and_headers():
    response = error_response(409, "conflict", "try again", headers={"Retry-After": "1"})

    assert response.status_code == 409
    assert response.body == {"error": {"code": "conflict", "message": "try again", "field": None}}
    assert response.headers["Retry-After"] == "1"
    assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("error", "field", "message"),
    [
        ({"type": "missing", "loc": ("body", "name"), "msg": "Field required"}, "name", "name is required"),
        # a message of the model's own validators names its subject: shown as it is, no "field: " prefix
        (
            {
                "type": "value_error",
                "loc": ("body", "target", "http", "url"),
                "msg": "Value error, url must be x",
            },
            "target.url",
            "url must be x",
        ),
        (
            {
                "type": "value_error",
                "loc": ("body", "target", "http", "headers"),
                "msg": "Value error, header name 'a b' is not valid",
            },
            "target.headers",
            "header name 'a b' is not valid",
        ),
        # pydantic's generic "Input should ..." gets the field as its subject
        (
            {
                "type": "less_than_equal",
                "loc": ("body", "retry", "max_attempts"),
                "msg": "Input should be less than or equal to 10",
            },
            "retry.max_attempts",
            "retry.max_attempts should be less than or equal to 10",
        ),
        (
            {
                "type": "string_too_long",
                "loc": ("header", "idempotency-key"),
                "msg": "String should have at most 255 characters",
            },
            "Idempotency-Key",
            "Idempotency-Key should have at most 255 characters",
        ),
        (
            {"type": "int_parsing", "loc": ("query", "limit"), "msg": "Input should be a valid integer"},
            "limit",
            "limit should be a valid integer",
        ),
        (
            {
                "type": "union_tag_invalid",
                "loc": ("body", "target"),
                "msg": "Input tag 'ftp' found using 'type' does not match any of the expected tags",
                "ctx": {"discriminator": "'type'", "tag": "ftp", "expected_tags": "'http', 'sqs'"},
            },
            "target",
            "target type 'ftp' is unknown; use one of command, http, lambda, shell, sqs",
        ),
        (
            {"type": "extra_forbidden", "loc": ("body", "colour"), "msg": "x"},
            "colour",
            "colour is not a known field",
        ),
        (
            {"type": "extra_forbidden", "loc": ("body", "owner"), "msg": "x"},
            "owner",
            "owner is not accepted in the body: a job's owner is the authenticated caller",
        ),
        (
            {"type": "union_tag_not_found", "loc": ("body", "target"), "msg": "x"},
            "target",
            "target needs a type: one of command, http, lambda, shell, sqs",
        ),
        (
            {"type": "model_attributes_type", "loc": ("body",), "msg": "x"},
            "body",
            "request body must be a JSON object",
        ),
        (
            {"type": "model_type", "loc": ("body", "retry"), "msg": "Input should be a valid dictionary"},
            "retry",
            "retry must be a JSON object",
        ),
        # a message that does not say what it is about keeps the field in front (it would be ambiguous)
        ({"type": "value_error", "loc": ("body", "items", 3, "x"), "msg": "bad"}, "items.x", "items.x: bad"),
    ],
)
def test_the_first_error_names_its_field(error, field, message):
    detail = body_of(validation_error_response(RequestValidationError([error])))

    assert detail["code"] == "invalid_input"
    assert detail["field"] == field
    assert detail["message"] == message


def test_malformed_json_is_invalid_json_on_the_body():
    error = {
        "type": "json_invalid",
        "loc": ("body", 7),
        "msg": "JSON decode error",
        "ctx": {"error": "Expecting ','"},
    }

    response = validation_error_response(RequestValidationError([error]))

    assert response.status_code == 400
    assert body_of(response) == {
        "code": "invalid_json",
        "message": "request body is not valid JSON: Expecting ','",
        "field": "body",
    }


def test_an_error_list_that_is_empty_is_still_a_400():
    response = validation_error_response(RequestValidationError([]))

    assert response.status_code == 400 and body_of(response)["field"] is None
