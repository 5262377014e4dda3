"""Imports go down the layers: the CLI may use local mode and the API, local mode may use the Lambda handlers
and the API, the handlers use the API; never the other way round. The domain and its ports import no backend,
adapter, observability, API or wiring: those depend on them. And no module reaches itself through others (no
import cycle). Read from the source (imports inside functions and under ``TYPE_CHECKING`` count too), so a lazy
or type-only import cannot hide an upward dependency or a cycle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
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

CORE = ("domain", "ports")
"""The pure core: the domain and the ports it works on."""
OUTSIDE_THE_CORE = ("dynamodb", "aws", "memory", "sqlite", "targets", "observability", "api", "runtime")
"""What implements, observes or wires the core, and never appears in its imports."""
RULES += [(core, f"jobsched.{outside}") for core in CORE for outside in OUTSIDE_THE_CORE]


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


def module_name(path: Path) -> str:
    """The dotted name of the package's module at ``path`` (a package's ``__init__.py`` is the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (``from a import b``: ``a``, and ``a.b`` when
    that is a module), at any depth of its code, ``TYPE_CHECKING`` blocks included."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: (imported_modules(path) & modules.keys()) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: each set of modules that reach one another (a strongly connected component
    of more than one module, Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def cycle_imports(graph: dict[str, set[str]]) -> Iterator[str]:
    """``"<file>: <module>"`` for each import that closes a cycle (both ends in one component of ``cycles``)."""
    for component in cycles(graph):
        for module in component:
            path = module.removeprefix("jobsched.").replace(".", "/")
            file = f"{path}/__init__.py" if (PACKAGE / path).is_dir() else f"{path}.py"
            yield from (f"{file}: {other}" for other in sorted(graph[module] & set(component)))


def test_no_module_imports_itself_through_others() -> None:
    assert list(cycle_imports(import_graph())) == []


def test_the_cycle_check_finds_the_modules_that_reach_one_another() -> None:
    # Given a module importing another through a third, and a fourth importing the first
    graph = {
        "jobsched.a": {"jobsched.b"},
        "jobsched.b": {"jobsched.c"},
        "jobsched.c": {"jobsched.a"},
        "jobsched.d": {"jobsched.a"},
    }

    # Then the three form one cycle, which the fourth is not part of; a chain without a way back is none
    assert cycles(graph) == [["jobsched.a", "jobsched.b", "jobsched.c"]]
    assert cycles({"jobsched.a": {"jobsched.b"}, "jobsched.b": set()}) == []


def test_the_graph_counts_imports_under_type_checking(tmp_path: Path) -> None:
    module = tmp_path / "typed.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jobsched.ports.runs import RunRow\n"
    )
    assert "jobsched.ports.runs" in imported_modules(module)
