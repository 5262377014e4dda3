"""Every ``design §N`` a docstring or comment cites names a section of docs/design.md that says what the citation
is about, and nothing cites the product spec or the walkthrough, which are not in the repository.

What a section is about is given by its keywords (:data:`KEYWORDS`): each must appear in the section's own
text (its heading and the paragraphs before the next heading), and each citation must have one of its
section's keywords in its own line, the two lines before it or the line after it. A citation of a section with no keywords,
or whose lines share none with the section, fails."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
SOURCES = [p for d in ("functions", "infra", "bench", "tests") for p in (ROOT / d).rglob("*.py")]
NUMBER = r"\d+(?:\.\d+)?"
CITATION = re.compile(rf"design §({NUMBER}(?:(?:, ?| ?- ?)§{NUMBER})*)")
HEADING = re.compile(r"^#{2,3} (?:(\d+(?:\.\d+)?)\.? )?", re.M)

KEYWORDS: dict[str, tuple[str, ...]] = {
    "1": ("one-off", "iana", "anchor", "next_fire", "whole milliseconds"),
    "2": (
        "field names",
        "limit",
        "64 kib",
        "worker's cap",
        "tombstone",
        "deleted",
        "statuses",
        "succeeded",
        "manual",
    ),
    "2.1": ("chain", "upstream", "downstream", "after"),
    "3": ("http", "route", "error", "owner", "idempotency", "24 h", "conflict", "trigger", "identical spec"),
    "3.1": ("what will run next",),
    "3.2": ("who did what", "audit", "actor", "admission"),
    "3.3": ("backfill",),
    "3.4": ("get /runs", "failed runs"),
    "3.5": ("queued fires", "queued runs"),
    "4.1": ("due index", "timer", "idle tick", "jobs due", "backlog"),
    "4.2": ("durable record", "claim", "run once", "send"),
    "4.3": ("lease", "fencing"),
    "4.4": ("paused", "missed", "patch", "new settings", "grace", "dispatched on time"),
    "4.5": ("jitter",),
    "4.7": ("sweep", "dead-letter", "lost worker"),
    "4.8": ("skipped fires", "re-enqueue", "watermark"),
    "4.9": ("instant",),
    "4.10": ("priority", "fair", "owner", "high", "messagegroupid"),
    "4.11": ("quota", "limits"),
    "5.1": ("claim",),
    "5.3": ("out of attempts", "outcome"),
    "5.4": ("overlap", "lock"),
    "5.5": ("idempotency key", "2xx", "envelope", "executor", "ships", "command"),
    "5.6": ("alert",),
    "5.7": ("tries", "re-run", "a try", "each try"),
    "5.8": ("cancel", "cancelled", "heartbeat"),
    "6": ("stack", "python 3.12"),
    "7": ("one process",),
    "8": ("metrics", "alarm", "logs"),
    "10": ("116 runs a second",),
    "11": ("archive", "ttl", "partition", "dedupe"),
}
"""Per section of the design, words (lower case) that say what it is about: a citation must use one of them."""


def sections(text: str) -> dict[str, str]:
    """Each numbered section's own text, lower case, from its heading to the next heading of any level."""
    marks = list(HEADING.finditer(text))
    return {
        mark.group(1): text[
            mark.start() : (marks[i + 1].start() if i + 1 < len(marks) else len(text))
        ].lower()
        for i, mark in enumerate(marks)
        if mark.group(1)
    }


def citations(text: str) -> list[tuple[int, str, str]]:
    """``(line number, section number, context)`` for each section a ``design §N`` of ``text`` cites (a list
    ``§4.1, §4.2`` or a range ``§5.1-§5.3`` cites each number written); the context is the citing line, the two
    lines before it and the one after it, lower case."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        context = "\n".join(lines[max(i - 2, 0) : i + 2]).lower()
        for match in CITATION.finditer(line):
            found += [(i + 1, number, context) for number in re.findall(NUMBER, match.group(1))]
    return found


def miscited(text: str, design: dict[str, str]) -> list[str]:
    """``"<line>: §<N> ..."`` for each citation of ``text`` whose section is absent, has no keywords, or shares
    none of them with the citation's context."""
    problems = []
    for line, number, context in citations(text):
        if number not in design:
            problems.append(f"{line}: §{number} is not a section of the design")
        elif number not in KEYWORDS:
            problems.append(f"{line}: §{number} has no keywords in KEYWORDS")
        elif not any(word in context for word in KEYWORDS[number]):
            problems.append(f"{line}: §{number} shares none of {KEYWORDS[number]} with its lines")
    return problems


def test_every_keyword_is_in_the_section_it_describes() -> None:
    design = sections(DESIGN.read_text())
    assert {"1", "4.2", "5.3", "10"} <= design.keys()  # the headings are read as numbered
    missing = {n: [w for w in words if w not in design.get(n, "")] for n, words in KEYWORDS.items()}
    assert {n: words for n, words in missing.items() if words} == {}


def test_every_design_citation_names_a_section_that_says_what_it_cites() -> None:
    design = sections(DESIGN.read_text())
    problems = [
        f"{path.relative_to(ROOT).as_posix()}:{problem}"
        for path in SOURCES
        for problem in miscited(path.read_text(), design)
    ]
    assert sum(len(citations(path.read_text())) for path in SOURCES) > 50, (
        "the pattern or the sources are wrong"
    )
    assert problems == []


def test_a_citation_of_the_wrong_section_is_refused() -> None:
    design = sections(DESIGN.read_text())
    right = (
        '"""A scheduled run has no row until its claim: its message is its durable record (design §4.2)."""'
    )

    assert miscited(right, design) == []
    assert miscited(right.replace("§4.2", "§4.3"), design) == [
        "1: §4.3 shares none of ('lease', 'fencing') with its lines"
    ]
    assert miscited(right.replace("§4.2", "§4.2, §9"), design) == ["1: §9 has no keywords in KEYWORDS"]
    assert miscited(right.replace("§4.2", "§4.2-§4.19"), design) == [
        "1: §4.19 is not a section of the design"
    ]


def test_nothing_cites_documents_outside_the_repository() -> None:
    outside = re.compile(r"SPEC section|SPEC:|SPEC §|[Ww]alkthrough")
    sources = [p for p in SOURCES if p != Path(__file__).resolve()]
    assert [p.relative_to(ROOT).as_posix() for p in sources if outside.search(p.read_text())] == []
