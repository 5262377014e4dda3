"""Redaction of a target's secrets from what a try records, logs and alerts: the one place it is done.

What is secret is the target's (``secret_values``: for an http target ``HttpTarget.secret_values``, the
values of its secret headers and of its URL's credentials, query and, when marked, path; other targets
have none). A ``Redactor`` replaces each of them with ``[redacted]`` wherever it appears, spelled as a
server may echo it, character by character in any mix:

- as is;
- JSON-escaped: ``\\uXXXX`` for any character (hex in either case; a character outside the BMP as its
  surrogate pair), ``\\/``, ``\\"`` and ``\\\\``, each also escaped again (``\\\\u002f``: JSON inside JSON);
- URL-encoded: ``%XX`` for each UTF-8 byte (either case; also encoded again, ``%252F``), ``+`` for a space;
- as an HTML character reference: ``&#47;``, ``&#x2f;``, and ``&amp;``, ``&lt;``, ``&gt;``, ``&quot;``,
  ``&apos;``/``&#39;``.

A text ending in the first ``MIN_CUT_CHARS`` or more characters of a secret (in any of those spellings, the
last escape possibly cut too) is cut there and ends in ``[redacted]``: an excerpt cut short mid-secret. So
redact a text before cutting it to a limit, never after: a cut that adds a marker (``... [truncated]``)
hides the cut secret from this check.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

MARK = "[redacted]"
MIN_CUT_CHARS = 4
"""A text ending in this many or more leading characters of a secret is taken to be that secret, cut short."""

_HTML_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "(?:apos|#39)"}
_CUT_ESCAPE = r"\\+(?:[uU][0-9a-fA-F]{0,3})?|%(?:25)*[0-9a-fA-F]?|&#?[xX]?[0-9a-fA-F]*|&[a-z]*"
"""The start of an escape, cut off at the end of a text."""
MAX_CUT_UNITS = 64
"""A text ending in this many leading characters of a secret and more is cut there, whatever follows them."""


def _char_pattern(char: str) -> str:
    """A regular expression matching ``char`` in every spelling of the module docstring."""
    code = ord(char)
    spellings = []
    if code <= 0xFFFF:
        spellings.append(rf"\\+u(?i:{code:04x})")
    else:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        spellings.append(rf"\\+u(?i:{high:04x})\\+u(?i:{low:04x})")
    if char in '/"\\':
        spellings.append(r"\\+" + re.escape(char))
    spellings.append("".join(rf"%(?:25)*(?i:{byte:02x})" for byte in char.encode("utf-8")))
    if char == " ":
        spellings.append(r"\+")
    spellings.append(rf"&#0*{code};")
    spellings.append(rf"&#(?i:x)0*(?i:{code:x});")
    if char in _HTML_NAMED:
        spellings.append(f"&{_HTML_NAMED[char]};")
    spellings.append(re.escape(char))  # last: an escape starting with this character is tried first
    return "(?:" + "|".join(spellings) + ")"


class Redactor:
    """Redacts ``secrets`` (strings; empty ones ignored) from texts; see the module docstring. Callable:
    ``redactor(text) -> text``. A redactor of no secrets returns every text unchanged."""

    def __init__(self, secrets: Iterable[str]) -> None:
        wanted = tuple(sorted({secret for secret in secrets if secret}, key=lambda s: (-len(s), s)))
        self._whole: re.Pattern[str] | None = None
        self._tails: tuple[re.Pattern[str], ...] = ()
        if wanted:
            self._whole, self._tails = _patterns(wanted)

    def __bool__(self) -> bool:
        return self._whole is not None

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted]``, and cut (ending in ``[redacted]``) where a
        secret cut short begins at its end."""
        if self._whole is None:
            return text
        text = self._whole.sub(MARK, text)
        cut = min((found.start() for tail in self._tails if (found := tail.search(text))), default=None)
        return text if cut is None else text[:cut] + MARK

    def optional(self, text: str | None) -> str | None:
        """``self(text)``, None staying None."""
        return None if text is None else self(text)


@functools.lru_cache(maxsize=256)
def _patterns(secrets: tuple[str, ...]) -> tuple[re.Pattern[str], tuple[re.Pattern[str], ...]]:
    """The compiled patterns of ``secrets`` (longest first): every spelling of any of them whole, and each
    one's ``_tail_pattern``. Cached: compiling costs about half a millisecond per character, and a worker
    redacts the tries of the same jobs again and again."""
    units = [[_char_pattern(char) for char in secret] for secret in secrets]
    whole = re.compile("|".join("".join(each) for each in units))
    return whole, tuple(tail for each in units if (tail := _tail_pattern(each)) is not None)


def _tail_pattern(units: list[str]) -> re.Pattern[str] | None:
    """A pattern finding, at the end of a text, at least ``MIN_CUT_CHARS`` leading characters of the secret
    whose per-character patterns are ``units`` (but not all of them), with an escape cut off after them; None
    for a secret too short to be recognised cut. Past ``MAX_CUT_UNITS`` characters, whatever follows to the
    end is taken in. The regular expression engine backtracks over the ways a text may spell them (``\\\\``
    is a backslash JSON-escaped, or two)."""
    if len(units) <= MIN_CUT_CHARS:
        return None
    last = min(len(units) - 1, MAX_CUT_UNITS)
    inner = r"[\s\S]*" if last < len(units) - 1 else ""
    for unit in reversed(units[MIN_CUT_CHARS:last]):
        inner = f"(?:{unit}{inner})?"
    return re.compile("".join(units[:MIN_CUT_CHARS]) + inner + f"(?:{_CUT_ESCAPE})?\\Z")


def redactor_for(target: Any) -> Redactor:
    """The ``Redactor`` of a job's target: its ``secret_values()`` when it has any (http targets), else none."""
    values = getattr(target, "secret_values", None)
    return Redactor(values() if callable(values) else ())
