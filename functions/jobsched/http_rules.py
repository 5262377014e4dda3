"""What an HTTP target's URL and headers must be, and which of their parts are secret.

Pure: regular expressions and ``urllib.parse`` only. ``jobsched.models.HttpTarget`` validates with
``url_problem``, ``HEADER_NAME`` and ``HEADER_VALUE``, and names its secrets with ``credential_parts`` and
``url_secrets`` (``jobsched.domain.redaction`` removes them from what a run records).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from urllib.parse import parse_qsl, unquote, urlsplit

HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 section 5.1: a field name is a ``token``."""
HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?")
"""RFC 9110 section 5.5 field value, ASCII only (httpx encodes header values as ASCII): visible characters
with inner spaces or tabs; no CR/LF or other control characters, no leading or trailing whitespace."""
_HOST_LABEL = re.compile(r"(?:[A-Za-z0-9_-]|[^\x00-\x7f])+")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*", re.IGNORECASE)
# (all four are used with fullmatch: "$" would let a trailing newline through)


URL_PATTERN = r"^https?://[^\x00-\x20\x7f]*$"
"""An http target's ``url`` starts ``http://`` or ``https://`` (lower case) and has no space or control character
(``url_problem``'s first two checks; its OpenAPI ``pattern``, beside the ``http-url`` format for the rest)."""


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be requested (None when it can): the checks of RFC 3986 and the WHATWG URL standard
    that decide whether the worker's HTTP client reaches a host. Host names are DNS names (labels of letters,
    digits, ``-`` and ``_``, or internationalized); a host ending in a numeric label must be an IPv4 address
    (WHATWG "ends in a number"); a bracketed host an IPv6 address; the port 1-65535."""
    if not re.fullmatch(URL_PATTERN, url):
        if not url.startswith(("http://", "https://")):
            return "url must be an absolute http:// or https:// URL"
        return "url must not contain spaces or control characters (percent-encode them, e.g. %20)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:  # unbalanced brackets, a bad IPv6 literal, a port out of range
        return f"url is not a valid URL: {error}"
    host = parts.hostname or ""
    if not host:
        return "url has no host"
    if port == 0:
        return "url has port 0; use a port from 1 to 65535"
    if "[" in parts.netloc:
        return None  # urlsplit checked the IPv6 literal
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or any(not _HOST_LABEL.fullmatch(label) or len(label) > 63 for label in labels):
        return f"url host {host!r} is not a valid host name"
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        try:
            ipaddress.IPv4Address(host.removesuffix("."))
        except ValueError:
            return f"url host {host!r} is neither a host name nor an IPv4 address (four numbers 0-255)"
    return None


ALWAYS_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Request headers whose values a run's output and error never show, whether or not ``secret_headers`` names them."""
MIN_SECRET_PART_CHARS = 4
"""Parts of a secret (a password, an auth scheme's credentials, a cookie's value, a segment of a secret path)
shorter than this are not redacted on their own (they are within their whole value): a one-letter password
would blank every such letter of an output."""
MIN_QUERY_SECRET_CHARS = 8
"""A URL's query values this long or longer count as secret (API keys, signatures and tokens travel there);
shorter ones (``page=2``, ``format=json``) do not, so an output is not blanked by words of its own."""
_AUTH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*")


def _base64_spellings(pair: str) -> set[str]:
    """``pair`` (``user:password``) in base64 as HTTP Basic sends it, and as a server may echo it: without its
    ``=`` padding, and in the URL-safe alphabet (``-_`` for ``+/``) with and without."""
    standard = base64.b64encode(pair.encode()).decode()
    url_safe = base64.urlsafe_b64encode(pair.encode()).decode()
    return {standard, standard.rstrip("="), url_safe, url_safe.rstrip("=")}


def credential_parts(name: str, value: str) -> set[str]:
    """The parts of secret header ``name``'s ``value`` a server may echo on their own: an auth scheme's
    credentials (``Bearer <token>``), the ``user:password`` and password a ``Basic`` value encodes (and that pair's
    ``_base64_spellings``), a cookie's values; each at least ``MIN_SECRET_PART_CHARS`` long."""
    parts: set[str] = set()
    scheme, _, credentials = value.partition(" ")
    credentials = credentials.strip()
    if name.lower() != "cookie" and _AUTH_SCHEME.fullmatch(scheme) and credentials:
        parts.add(credentials)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(credentials, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                pair = ""
            if pair:
                parts.update({pair, pair.partition(":")[2], *_base64_spellings(pair)})
    if name.lower() == "cookie":
        parts.update(cookie.partition("=")[2].strip() for cookie in value.split(";"))
    return {part for part in parts if len(part) >= MIN_SECRET_PART_CHARS}


def url_secrets(url: str, *, secret_path: bool = False) -> set[str]:
    """The secrets ``url`` carries: its credentials (``user:password@``: the password, ``user:password`` and
    its base64 as HTTP Basic sends it, ``_base64_spellings``), its query values of ``MIN_QUERY_SECRET_CHARS`` or more characters
    (percent-decoded), and with ``secret_path`` its path and each of the path's segments (of at least
    ``MIN_SECRET_PART_CHARS``)."""
    parts = urlsplit(url)
    found: set[str] = set()
    if parts.password:
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        found.update({pair, *_base64_spellings(pair), unquote(parts.password)})
    found.update(v for _, v in parse_qsl(parts.query) if len(v) >= MIN_QUERY_SECRET_CHARS)
    if secret_path and parts.path.strip("/"):
        found.add(parts.path)
        found.update(unquote(s) for s in parts.path.split("/") if len(unquote(s)) >= MIN_SECRET_PART_CHARS)
    return {value for value in found if len(value) >= MIN_SECRET_PART_CHARS}
