"""A target's secrets never reach what a try records, logs or alerts (``jobsched.domain.redaction``): in every
spelling a server may echo (JSON escapes, URL encoding, HTML references, base64 of Basic credentials), cut
short at the end of an excerpt, and redacted before any cut."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.aws.queue import delivery_of
from jobsched.domain.redaction import MARK, Redactor, redactor_for
from jobsched.domain.retries import Outcome
from jobsched.domain.worker import Worker
from jobsched.models import HttpTarget
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.targets import Targets
from jobsched.targets.http import display_url
from tests.support.worker import T0, Kit

SECRET = 'k-12/34"5 6789\\x'


def _json_u(text: str) -> str:
    return "".join(f"\\u{ord(c):04X}" for c in text)


SPELLINGS: dict[str, Callable[[str], str]] = {
    "as is": lambda s: s,
    "json": lambda s: json.dumps(s)[1:-1],
    "json with \\/": lambda s: json.dumps(s)[1:-1].replace("/", "\\/"),
    "json \\u for every character": _json_u,
    "json in json": lambda s: json.dumps(json.dumps(s)),
    "percent-encoded": lambda s: quote(s, safe=""),
    "percent-encoded, lower case": lambda s: re.sub(
        "%[0-9A-F]{2}", lambda m: m[0].lower(), quote(s, safe="")
    ),
    "form-encoded (+ for space)": lambda s: quote_plus(s),
    "percent-encoded twice": lambda s: quote(quote(s, safe=""), safe=""),
    "html": lambda s: html.escape(s),
    "html decimal references": lambda s: "".join(f"&#{ord(c)};" for c in s),
    "html hex references": lambda s: "".join(f"&#x{ord(c):x};" for c in s),
}


@pytest.mark.parametrize("spelling", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_a_secret_is_redacted_in_every_spelling_a_server_may_echo(spelling: Callable[[str], str]) -> None:
    echoed = f"seen: {spelling(SECRET)}, team: billing"
    redacted = Redactor([SECRET])(echoed)
    assert spelling(SECRET) not in redacted and MARK in redacted
    assert redacted.endswith(", team: billing")


CHARACTER_WISE = {name: spell for name, spell in SPELLINGS.items() if name != "json in json"}


@pytest.mark.parametrize("spelling", CHARACTER_WISE.values(), ids=CHARACTER_WISE.keys())
def test_a_secret_cut_short_at_the_end_is_redacted(spelling: Callable[[str], str]) -> None:
    whole = spelling(SECRET)
    for cut in range(len(spelling(SECRET[:4])), len(whole)):  # anywhere, mid-escape included
        redacted = Redactor([SECRET])("HTTP 401\nbad key " + whole[:cut])
        assert redacted == "HTTP 401\nbad key " + MARK, whole[:cut]


printable = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=5, max_size=40)


@settings(max_examples=200, deadline=None)
@given(printable, st.sampled_from(sorted(SPELLINGS)), st.text(max_size=30), st.text(max_size=30))
def test_no_spelling_of_a_secret_survives(secret: str, name: str, before: str, after: str) -> None:
    spelled = SPELLINGS[name](secret)
    assert spelled not in Redactor([secret])(before + spelled + after)


@settings(max_examples=200, deadline=None)
@given(printable, st.integers(min_value=4), st.text(alphabet=" \n\t", max_size=30))
def test_no_head_of_a_secret_survives_at_the_end(secret: str, keep: int, before: str) -> None:
    head = secret[: min(keep, len(secret) - 1)]
    redacted = Redactor([secret])(before + head)
    assert redacted.endswith(MARK) and before.startswith(redacted[: -len(MARK)])


def test_the_secrets_of_an_http_target() -> None:
    target = HttpTarget(
        url="https://ci:pa%24%24word@hooks.example.com/services/T0001/B0002/XyZsecret?sig=abcdef0123&page=2",
        headers={
            "Authorization": "Basic " + base64.b64encode(b"svc:hunter22").decode(),
            "Cookie": "session=s3ss10nvalue; theme=ok",
            "X-Api-Key": "key-0123456789",
            "X-Team": "billing",
        },
        secret_headers=["x-api-key"],
        secret_path=True,
    )
    values = set(target.secret_values())
    # header values, and the parts a server may echo alone: Basic's user:password and password, cookie values
    assert {"key-0123456789", "svc:hunter22", "hunter22", "s3ss10nvalue"} <= values
    # the URL's password (decoded), user:password and its base64 as HTTP Basic sends it
    assert {"pa$$word", "ci:pa$$word", base64.b64encode(b"ci:pa$$word").decode()} <= values
    # query values of 8 or more characters, the marked path and its segments
    assert {"abcdef0123", "/services/T0001/B0002/XyZsecret", "XyZsecret", "T0001"} <= values
    assert not {"billing", "2", "ok"} & values  # not secret, or too short to redact alone
    assert display_url(target.url, secret_path=True) == "https://hooks.example.com/[redacted]"


@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
@pytest.mark.parametrize("padded", [True, False])
def test_the_base64_of_basic_credentials_is_redacted_however_echoed(
    encode: Callable[[bytes], bytes], padded: bool
) -> None:
    # Given credentials whose base64 has padding and URL-unsafe characters, in a Basic header and in the URL
    pairs = {"header": b"svc:hunter22?>>", "url": b"ci:p?ss~w0rd>>"}
    target = HttpTarget(
        url="https://ci:p%3Fss~w0rd%3E%3E@hooks.example.com/x",
        headers={"Authorization": "Basic " + base64.b64encode(pairs["header"]).decode()},
    )
    redact = redactor_for(target)
    for pair in pairs.values():
        echoed = encode(pair).decode()
        echoed = echoed if padded else echoed.rstrip("=")
        # When a server echoes it mid-text, padded or not, in either alphabet; Then none of it shows
        assert redact(f"seen {echoed} here") == f"seen {MARK} here"


def test_a_target_without_secrets_changes_nothing() -> None:
    assert not redactor_for(HttpTarget(url="https://example.com/a"))
    assert redactor_for(HttpTarget(url="https://example.com/a"))("anything") == "anything"


# --- through the worker: the run's error, the tries' output, the dead-run message (the alert), the log --------


class EchoingExecutor:
    """An http executor standing in for a server that echoes a secret JSON-escaped (``\\/``), past the
    point where an error is cut."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def execute(self, target: HttpTarget, call: TargetCall) -> str:
        echoed = json.dumps({"seen": self.secret}).replace("/", "\\/")
        call.output = f"HTTP 401\n{echoed}"
        raise TargetFailed("x" * 1_990 + echoed)


def test_the_worker_redacts_before_it_cuts_records_logs_or_alerts(
    kit: Kit, build_worker: Callable[..., Worker], capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "tok/0123456789abcdefghij0123456789ABCD"
    worker = build_worker(Targets(http=EchoingExecutor(secret)))
    job = kit.due_job(
        target={
            "type": "http",
            "url": "https://example.com/h",
            "headers": {"Authorization": f"Bearer {secret}"},
        },
        retry={"max_attempts": 1},
    )
    capsys.readouterr()
    assert worker.process(delivery_of(kit.record(job.id, T0))) is Outcome.DEAD
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.error is not None
    (dead,) = kit.dead_runs.notified
    logged = capsys.readouterr().out
    for text in (row.error, row.tries[-1].error or "", row.tries[-1].output or "", dead.error, logged):
        for piece in (secret[:10], secret[-10:], secret.replace("/", "\\/")[:10]):
            assert piece not in text
    assert row.error.endswith("... [truncated]") and "[redacted]" in (row.tries[-1].output or "")
