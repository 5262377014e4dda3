"""The ``Spec`` property of a ``jobsched.cdk.Job`` resource: the job's fields, complete, as JSON.

No CDK import (the tests of the provider build specs without it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from jobsched.api.schemas import PATCH_NULLABLE_FIELDS
from jobsched.models import JobSettings

__all__ = ["complete_spec"]


def complete_spec(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every field of ``JobSettings`` as JSON: ``given``'s value, else the API's default; a policy object
    (``retry``, ``alerts``) given in part is completed with its defaults. Nulls are kept where the API takes
    them (``late_after_s``, the ``PATCH_NULLABLE_FIELDS``), so a value removed from the code is set back to its
    default by the update's PATCH, also where the API merges an object's fields; a null ``schedule`` or
    ``after`` (the one of the two a job does not use) is left out."""
    spec: dict[str, Any] = {}
    for field, info in JobSettings.model_fields.items():
        default = (
            None if info.is_required() else to_jsonable_python(info.get_default(call_default_factory=True))
        )
        value = to_jsonable_python(given[field]) if field in given else default
        if isinstance(default, dict) and isinstance(value, dict):
            value = {**default, **value}
        if value is not None or field in PATCH_NULLABLE_FIELDS:
            spec[field] = value
    return spec
