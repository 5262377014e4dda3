"""Opaque cursors: round trip, and refusal of anything not issued for this owner and listing."""

from __future__ import annotations

import base64
import json

import pytest

from jobsched.api.cursor import decode_cursor, encode_cursor
from jobsched.api.exceptions import CursorNotFound, InvalidInput

OWNER = "arn:aws:iam::123456789012:role/billing"
OTHER = "arn:aws:iam::123456789012:role/search"


def test_a_cursor_round_trips_its_position():
    token = encode_cursor("jobs", OWNER, {"name": "nightly", "id": "j_0123456789abcdef0123"})

    assert decode_cursor(token, "jobs", OWNER) == {"name": "nightly", "id": "j_0123456789abcdef0123"}


def test_a_cursor_is_url_safe_and_does_not_show_the_owner():
    token = encode_cursor("runs", OWNER, {"job": "j_1", "before": 1_772_445_600_000})

    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert "billing" not in base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


@pytest.mark.parametrize("token", ["", "not base64 !", "eyJ2IjoxfQ==", "A" * 3000])
def test_a_string_not_in_the_cursor_alphabet_is_a_400_naming_the_cursor(token):
    with pytest.raises(InvalidInput) as raised:
        decode_cursor(token, "jobs", OWNER)

    assert raised.value.field == "cursor"


@pytest.mark.parametrize(
    ("token", "kind", "owner"),
    [
        (encode_cursor("jobs", OWNER, {"name": "a", "id": "j_1"}), "jobs", OTHER),  # another owner's
        (encode_cursor("jobs", OWNER, {"name": "a", "id": "j_1"}), "runs", OWNER),  # another listing's
        ("0", "jobs", OWNER),  # well-formed, but no cursor
        (base64.urlsafe_b64encode(b"[1, 2]").decode().rstrip("="), "jobs", OWNER),
        (base64.urlsafe_b64encode(b"\xff\xfe").decode().rstrip("="), "jobs", OWNER),
    ],
)
def test_a_well_formed_cursor_not_issued_for_this_listing_is_not_found(token, kind, owner):
    with pytest.raises(CursorNotFound):
        decode_cursor(token, kind, owner)


def test_a_cursor_of_another_version_is_refused():
    token = encode_cursor("jobs", OWNER, {"name": "a", "id": "j_1"})
    document = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    document["v"] = 2
    forged = base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")

    with pytest.raises(CursorNotFound):
        decode_cursor(forged, "jobs", OWNER)
