"""``docs/security.md`` names a test for every guard: each test it names exists. A reference is
``tests/<path>.py::<name>``, or ``::<name>`` after it in the same table cell for another test of that file,
or ``tests/<path>.py`` alone for a whole file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`")


def _named_tests(text: str) -> list[tuple[str, str | None]]:
    """The ``(file, test name or None)`` pairs the doc names, a bare ``::name`` taking the file named before it
    on its line."""
    named: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        current: str | None = None
        for match in REFERENCE.finditer(line):
            path, name = match.groups()
            if path is None and name is None:
                continue
            current = path or current
            assert current is not None, f"{match.group(0)} names no file before it: {line}"
            named.append((current, name))
    return named


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_the_threat_model_names_exists() -> None:
    named = _named_tests(DOC.read_text())
    assert len(named) > 30
    missing = [
        f"{path}::{name}" if name else path
        for path, name in named
        if not (ROOT / path).is_file() or (name is not None and name not in _test_names(ROOT / path))
    ]
    assert missing == []


def test_a_wrong_name_is_found() -> None:
    named = _named_tests(
        "| guard | `tests/unit/test_security_doc.py::no_such_test`, `::test_a_wrong_name_is_found` |"
    )
    assert named == [
        ("tests/unit/test_security_doc.py", "no_such_test"),
        ("tests/unit/test_security_doc.py", "test_a_wrong_name_is_found"),
    ]
    assert "no_such_test" not in _test_names(ROOT / "tests/unit/test_security_doc.py")
