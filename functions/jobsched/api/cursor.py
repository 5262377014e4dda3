"""Opaque pagination cursors bound to the owner who received them.

A cursor is base64url (no padding) of compact JSON ``{"v": 1, "k": kind, "o": owner tag, "p": position}``.
The owner tag is the first 16 hex characters of SHA-256(owner). A cursor not in that alphabet (or empty,
or longer than ``MAX_CURSOR_CHARS``) is bad input (400, field ``cursor``; the API document's pattern says
so); a well-formed one the listing did not issue (another owner's, another listing's, altered) is not
found (404, field ``cursor``), as a job of another owner is. Integrity needs no secret because a position only ever continues a
listing inside the caller's own data (the ``by_owner`` index partition of the caller, or the runs of a
job whose ownership was checked first): a forged cursor can at most skip entries of the forger's own data.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any, TypeVar

from jobsched.api.exceptions import CursorNotFound, InvalidInput

T = TypeVar("T")

VERSION = 1
MAX_CURSOR_CHARS = 2048
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"
"""What ``next_cursor`` is made of (unpadded base64url); the API document gives it for ``cursor``."""


def _owner_tag(owner: str) -> str:
    return hashlib.sha256(owner.encode()).hexdigest()[:16]


def encode_cursor(kind: str, owner: str, position: dict[str, Any]) -> str:
    """An opaque cursor for listing ``kind`` (``"jobs"`` or ``"runs"``) of ``owner``, resuming after ``position``."""
    document = {"v": VERSION, "k": kind, "o": _owner_tag(owner), "p": position}
    raw = json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(token: str, kind: str, owner: str) -> dict[str, Any]:
    """The position inside a cursor made by :func:`encode_cursor` for the same ``kind`` and ``owner``.

    Raises ``InvalidInput(field="cursor")`` when ``token`` is not of the cursor alphabet and length
    (``CURSOR_PATTERN``, at most ``MAX_CURSOR_CHARS``); ``CursorNotFound`` for any other string not issued
    for this ``kind`` and ``owner``. The caller still validates the position's fields (raising
    ``CursorNotFound`` too).
    """
    if not token or len(token) > MAX_CURSOR_CHARS or not re.fullmatch(CURSOR_PATTERN, token):
        raise InvalidInput(
            "cursor",
            f"cursor must be 1-{MAX_CURSOR_CHARS} characters of A-Z, a-z, 0-9, '-' and '_': "
            "pass next_cursor from the previous page",
        )
    bad = CursorNotFound()
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        document = json.loads(raw)
    except (binascii.Error, ValueError):
        raise bad from None
    if (
        not isinstance(document, dict)
        or document.get("v") != VERSION
        or document.get("k") != kind
        or document.get("o") != _owner_tag(owner)
        or not isinstance(document.get("p"), dict)
    ):
        raise bad
    return dict(document["p"])


def history_before(token: str | None, kind: str, owner: str, job_id: str, before_type: type[T]) -> T | None:
    """Where a page of one job's history listing ``kind`` (``"runs"``: ``before`` an epoch ms; ``"events"``:
    ``before`` an event key) resumes: the ``before`` of the cursor ``token``, None without one. Raises as
    :func:`decode_cursor`, and ``CursorNotFound`` for a cursor of another job or whose ``before`` is not a
    ``before_type``."""
    if token is None:
        return None
    position = decode_cursor(token, kind, owner)
    before = position.get("before")
    if position.get("job") != job_id or not isinstance(before, before_type):
        raise CursorNotFound()
    return before
