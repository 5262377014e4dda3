"""Every ``design §N`` a docstring or comment cites names a section of docs/design.md, and nothing cites the
product spec or the walkthrough, which are not in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for d in ("functions", "infra", "bench") for p in (ROOT / d).rglob("*.py")]
CITATION = re.compile(r"design §(\d+(?:\.\d+)?)")


def _sections() -> set[str]:
    headings = re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", (ROOT / "docs" / "design.md").read_text(), re.M)
    return set(headings)


def test_every_design_citation_names_a_section_of_the_design() -> None:
    sections = _sections()
    assert {"1", "4.2", "5.3", "10"} <= sections  # the headings are read as numbered
    cited = {
        (path.relative_to(ROOT).as_posix(), number)
        for path in SOURCES
        for number in CITATION.findall(path.read_text())
    }
    assert cited, "no citations found: the pattern or the source list is wrong"
    assert [c for c in cited if c[1] not in sections] == []


def test_nothing_cites_documents_outside_the_repository() -> None:
    outside = re.compile(r"SPEC section|SPEC:|[Ww]alkthrough")
    assert [p.relative_to(ROOT).as_posix() for p in SOURCES if outside.search(p.read_text())] == []
