"""Imports go down the layers: the CLI may use local mode and the API, local mode may use the Lambda handlers
and the API, the handlers use the API; never the other way round. Read from the source (imports inside
functions count too), so a lazy import cannot hide an upward dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jobsched

PACKAGE = Path(jobsched.__file__).parent

# (modules under this folder of jobsched, must not import this package)
RULES = [
    ("api", "jobsched.handlers"),
    ("api", "jobsched.local"),
    ("api", "jobsched.cli"),
    ("handlers", "jobsched.local"),
    ("handlers", "jobsched.cli"),
    ("local", "jobsched.cli"),
    ("console", "jobsched.local"),
    ("console", "jobsched.cli"),
    ("console", "jobsched.api"),
]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (``from a import b`` counts as ``a`` and
    ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def upward_imports(folder: str, forbidden: str) -> list[str]:
    """``"<file>: <module>"`` for each import of ``forbidden`` (or a module inside it) under ``folder``."""
    return [
        f"{path.relative_to(PACKAGE)}: {module}"
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        for module in sorted(imported_modules(path))
        if module == forbidden or module.startswith(forbidden + ".")
    ]


@pytest.mark.parametrize(("folder", "forbidden"), RULES, ids=[f"{f}-not-{x}" for f, x in RULES])
def test_no_module_imports_up_the_layers(folder: str, forbidden: str) -> None:
    assert (PACKAGE / folder).is_dir()
    assert upward_imports(folder, forbidden) == []


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    # Given a module whose only import of the CLI is inside a function
    module = tmp_path / "lazy.py"
    module.write_text("def main():\n    from jobsched.cli.jobs import jobs_app\n    return jobs_app\n")

    # Then it is found
    assert {"jobsched.cli.jobs", "jobsched.cli.jobs.jobs_app"} <= imported_modules(module)
