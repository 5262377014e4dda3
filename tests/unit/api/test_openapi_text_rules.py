"""The OpenAPI document states the text rules validation enforces, so a client generated from it refuses what the
API refuses: an http target's ``url`` (absolute http(s), no space or control character), a pause ``reason`` (one
line, not blank), a shell target's ``shell`` (an absolute path without whitespace) and its ``env`` (variable names,
values without NUL). Each rule is one pattern,
used by the model's validator and written into the document."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from jobsched.api.app import app
from jobsched.api.schemas import PauseRequest
from jobsched.models import HttpTarget, ShellTarget
from jobsched.settings import Settings

DOCUMENT = app.openapi_document(Settings.model_construct(allow_shell_targets=True))
SCHEMAS = DOCUMENT["components"]["schemas"]
TRICKY = st.sampled_from(
    ["", " ", "\t", "\n", "\r\n", "\x00", "\x01", "\x1f", "\x7f", "\x85", "\x9b", "\xa0", "\u2028", "\u3000",
     "\ufeff", "/", "a", "é", "http://", "https://", "HTTP://", ":", "x.example", "%20"]
)  # fmt: skip
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=3)), max_size=6).map("".join)


def _pattern(schema: str, field: str, *within: str) -> re.Pattern[str]:
    """The document's pattern of a field (or of a part ``within`` it, such as its ``propertyNames``) as JSON Schema
    reads it (ECMA-262: a closing ``$`` is the end of the text, where Python's also matches before a final
    newline)."""
    found = SCHEMAS[schema]["properties"][field]
    for part in within:
        found = found[part]
    pattern = found["pattern"]
    assert isinstance(pattern, str) and pattern.endswith("$")
    return re.compile(pattern.removesuffix("$") + r"\Z")


def _accepted(model: Any, data: dict[str, Any]) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(
    ("schema", "field", "value"),
    [
        ("HttpTarget", "url", "ftp://example.com/"),
        ("HttpTarget", "url", "example.com/hook"),
        ("HttpTarget", "url", "https://example.com/a b"),
        ("PauseRequest", "reason", "\x01"),
        ("PauseRequest", "reason", "two\nlines"),
        ("PauseRequest", "reason", " \u3000 "),
        ("ShellTarget", "shell", "bin/bash"),
        ("ShellTarget", "shell", "/bin/ba sh"),
    ],
)
def test_the_document_refuses_what_validation_refuses(schema: str, field: str, value: str) -> None:
    assert not _pattern(schema, field).search(value)


@pytest.mark.parametrize("name", ["", "1A", "A-B", "JOBSCHED_RUN", "É"])
def test_the_document_refuses_the_env_names_validation_refuses(name: str) -> None:
    assert not _pattern("ShellTarget", "env", "propertyNames").search(name)
    assert not _accepted(ShellTarget, {"command": "true", "env": {name: "x"}})


@pytest.mark.parametrize("value", ["\x00", "a\x00b", "x" * 8193])
def test_the_document_refuses_the_env_values_validation_refuses(value: str) -> None:
    assert not _pattern("ShellTarget", "env", "additionalProperties").search(value)
    assert not _accepted(ShellTarget, {"command": "true", "env": {"A": value}})


@settings(max_examples=300, deadline=None)
@given(name=TEXT | st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,9}", fullmatch=True), value=TEXT)
def test_an_env_is_valid_by_the_document_exactly_when_the_api_takes_it(name: str, value: str) -> None:
    valid = bool(
        _pattern("ShellTarget", "env", "propertyNames").search(name)
        and _pattern("ShellTarget", "env", "additionalProperties").search(value)
    )
    assert valid is _accepted(ShellTarget, {"command": "true", "env": {name: value}})


@settings(max_examples=300, deadline=None)
@given(reason=TEXT)
def test_a_reason_is_valid_by_the_document_exactly_when_the_api_takes_it(reason: str) -> None:
    valid = bool(_pattern("PauseRequest", "reason").search(reason)) and 1 <= len(reason) <= 500
    assert valid is _accepted(PauseRequest, {"reason": reason})


@settings(max_examples=300, deadline=None)
@given(shell=TEXT.map(lambda text: "/" + text) | TEXT)
def test_a_shell_is_valid_by_the_document_exactly_when_the_api_takes_it(shell: str) -> None:
    valid = bool(_pattern("ShellTarget", "shell").search(shell)) and 2 <= len(shell) <= 256
    assert valid is _accepted(ShellTarget, {"command": "true", "shell": shell})


@settings(max_examples=300, deadline=None)
@given(
    url=st.sampled_from(["http://", "https://", "HTTP://", ""]).flatmap(
        lambda scheme: TEXT.map(scheme.__add__)
    )
)
def test_a_url_the_documents_pattern_refuses_is_refused(url: str) -> None:
    if not _pattern("HttpTarget", "url").search(url):
        assert not _accepted(HttpTarget, {"url": url})
