"""Opaque pagination cursors bound to the owner who received them.

A cursor is base64url (no padding) of compact JSON ``{"v": 1, "k": kind, "o": owner tag, "p": position}``.
The owner tag is the first 16 hex characters of SHA-256(owner): a cursor presented by another owner is
refused (400, field ``cursor``). Integrity needs no secret because a position only ever continues a
listing inside the caller's own data (the ``by_owner`` index partition of the caller, or the runs of a
job whose ownership was checked first): a forged cursor can at most skip entries of the forger's own data.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from jobsched.api.exceptions import InvalidInput

VERSION = 1
MAX_CURSOR_CHARS = 2048


def _owner_tag(owner: str) -> str:
    return hashlib.sha256(owner.encode()).hexdigest()[:16]


def encode_cursor(kind: str, owner: str, position: dict[str, Any]) -> str:
    """An opaque cursor for listing ``kind`` (``"jobs"`` or ``"runs"``) of ``owner``, resuming after ``position``."""
    document = {"v": VERSION, "k": kind, "o": _owner_tag(owner), "p": position}
    raw = json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(token: str, kind: str, owner: str) -> dict[str, Any]:
    """The position inside a cursor made by :func:`encode_cursor` for the same ``kind`` and ``owner``.

    Raises ``InvalidInput(field="cursor")`` for anything else: malformed, another listing's, another owner's.
    The caller still validates the position's fields.
    """
    bad = InvalidInput(
        "cursor", "cursor is not valid for this listing; pass next_cursor from the previous page"
    )
    if not token or len(token) > MAX_CURSOR_CHARS:
        raise bad
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
