"""The tests a document names (docs/security.md, docs/protocol.md): a reference is ``tests/<path>.py::<name>``,
or ``::<name>`` after one in the same line for another test of that file, or ``tests/<path>.py`` alone for a
whole file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: references are relative to it."""
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`")


def named_tests(text: str) -> list[tuple[str, str | None]]:
    """The ``(file, test name or None)`` pairs ``text`` names, a bare ``::name`` taking the file named before it
    on its line. Raises AssertionError for a bare ``::name`` with no file before it."""
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


def defined_functions(path: Path) -> set[str]:
    """The names of the functions (sync or async, at any depth) the Python file ``path`` defines."""
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def missing_tests(named: list[tuple[str, str | None]]) -> list[str]:
    """The references of ``named`` (``named_tests``) to no file or to no function of their file, as
    ``path::name`` (or ``path`` for a whole file), in order."""
    return [
        f"{path}::{name}" if name else path
        for path, name in named
        if not (ROOT / path).is_file() or (name is not None and name not in defined_functions(ROOT / path))
    ]
