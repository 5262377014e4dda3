"""A job's labels: a small map of strings its owner sets to group and select jobs (``GET /jobs?label=k=v``,
``jobsched jobs list -l k=v``, ``jobsched apply --selector k=v``).

The rule, one definition for the API's validation and its OpenAPI document (so a generated client refuses
what the API refuses), modelled on Kubernetes' labels without their prefix and start/end rules:

- at most ``MAX_LABELS`` (16) labels;
- a key is 1 to 63 characters of ``A-Z a-z 0-9 . _ / -`` (``KEY_PATTERN``);
- a value is 0 to 63 characters of the same (``VALUE_PATTERN``): no ``=`` or ``,``, so ``key=value`` always
  splits at its first ``=``, and no spaces or control characters, so a label prints as one word.

Labels live on the job's spec only: not on its scheduling state, its due entries or its runs, so the
scheduler and workers never read or write them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MAX_LABELS = 16
MAX_KEY_CHARS = 63
MAX_VALUE_CHARS = 63
KEY_PATTERN = rf"^[A-Za-z0-9._/-]{{1,{MAX_KEY_CHARS}}}$"
VALUE_PATTERN = rf"^[A-Za-z0-9._/-]{{0,{MAX_VALUE_CHARS}}}$"
LABEL_TERM_PATTERN = rf"^[A-Za-z0-9._/-]{{1,{MAX_KEY_CHARS}}}=[A-Za-z0-9._/-]{{0,{MAX_VALUE_CHARS}}}$"
"""A selector term, ``key=value`` (``GET /jobs?label=team=billing``)."""
_KEY = re.compile(KEY_PATTERN)
_VALUE = re.compile(VALUE_PATTERN)

LABELS_DESCRIPTION = (
    f"labels to group and select jobs by (`GET /jobs?label=key=value`): at most {MAX_LABELS}; keys 1-"
    f"{MAX_KEY_CHARS} and values 0-{MAX_VALUE_CHARS} characters of `A-Z a-z 0-9 . _ / -`"
)


def label_problem(key: Any, value: Any) -> str | None:
    """Why ``key: value`` is not a valid label (a sentence naming the key), or None when it is one."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return (
            f"label key {key!r} must be 1-{MAX_KEY_CHARS} characters of letters, digits, '.', '_', '/' or '-'"
        )
    if not isinstance(value, str) or not _VALUE.fullmatch(value):
        return (
            f"the value of label {key!r} must be a string of 0-{MAX_VALUE_CHARS} letters, digits, '.', '_', "
            "'/' or '-'"
        )
    return None


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` as a dict when it follows the rule (see the module docstring). Raises ValueError saying which
    label breaks it and how."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"a job has at most {MAX_LABELS} labels; {len(labels)} given")
    for key, value in labels.items():
        problem = label_problem(key, value)
        if problem is not None:
            raise ValueError(problem)
    return dict(labels)


def labels_schema(schema: dict[str, Any]) -> None:
    """The rule as JSON Schema, on the ``labels`` property's ``schema`` in place (pydantic's ``object`` of
    strings): ``maxProperties``, ``propertyNames`` and the values' pattern."""
    schema["maxProperties"] = MAX_LABELS
    schema["propertyNames"] = {"pattern": KEY_PATTERN, "minLength": 1, "maxLength": MAX_KEY_CHARS}
    schema["additionalProperties"] = {
        "type": "string",
        "pattern": VALUE_PATTERN,
        "maxLength": MAX_VALUE_CHARS,
    }


class ContradictorySelector(ValueError):
    """A selector naming one key with two values: no job can match it."""


def parse_selector(terms: Iterable[str]) -> dict[str, str]:
    """A label selector from ``key=value`` terms (``["team=billing", "tier=gold"]``): the labels a job must all
    carry. A term splits at its first ``=``. Raises ValueError naming the term that is not ``key=value`` with a
    valid label, or ``ContradictorySelector`` for a key given twice with two values."""
    selector: dict[str, str] = {}
    for term in terms:
        key, equals, value = term.partition("=")
        if not equals:
            raise ValueError(f"label selector {term!r} must be key=value, e.g. team=billing")
        problem = label_problem(key, value)
        if problem is not None:
            raise ValueError(f"label selector {term!r}: {problem}")
        if selector.get(key, value) != value:
            raise ContradictorySelector(f"label selector names {key!r} twice with two values: no job matches")
        selector[key] = value
    if len(selector) > MAX_LABELS:
        raise ValueError(f"a label selector has at most {MAX_LABELS} terms; {len(selector)} given")
    return selector


def matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether ``labels`` carry every ``key: value`` of ``selector`` (an empty selector matches every job)."""
    return all(labels.get(key) == value for key, value in selector.items())
