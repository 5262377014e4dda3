"""The Lambda asset's dependency lock: every package of the closure of ``functions/requirements.txt``, pinned
with the sha256 of the one wheel pip picks for the functions' platform (CPython 3.12, manylinux x86_64).

``functions/requirements.txt`` says what the functions need (top-level pins); ``functions/requirements.lock``
is what the asset ships, installed with ``--require-hashes --no-deps``, so two synths of one commit ship the
same bytes (a transitive package releasing a new version changes nothing until the lock is regenerated).
The lock lives in ``functions/``, so it is part of the asset's source hash.

Regenerate after changing ``requirements.txt`` (needs the package index)::

    .venv/bin/python -m infra.lock
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infra.bundling import LOCK, REQUIREMENTS, pip_install_for_lambda

HEADER = (
    "# The Lambda asset's whole dependency closure, one wheel each (cp312, manylinux2014_x86_64), with its hash.\n"
    "# Generated from functions/requirements.txt by `python -m infra.lock`: do not edit by hand.\n"
)

_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+) --hash=sha256:(?P<sha256>[0-9a-f]{64})$")


@dataclass(frozen=True)
class Pin:
    """One locked package: normalized ``name``, exact ``version``, the wheel's ``sha256``."""

    name: str
    version: str
    sha256: str

    def line(self) -> str:
        """``name==version --hash=sha256:<hex>``, pip's hash-checking requirement format."""
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


def normalize(name: str) -> str:
    """A distribution name in PEP 503 normalized form (``Typing_Extensions`` -> ``typing-extensions``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> list[Pin]:
    """The pins of a lock file's text; raises ``ValueError`` naming the first line that is not a pin."""
    pins = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise ValueError(
                f"requirements.lock line {number}: not 'name==version --hash=sha256:<hex>': {line}"
            )
        pins.append(Pin(normalize(match["name"]), match["version"], match["sha256"]))
    return pins


def resolve(requirements: Path = REQUIREMENTS, *, python: str = sys.executable) -> list[Pin]:
    """Ask pip which wheels it would install for the functions' platform (``--dry-run --report``), sorted
    by name. Raises ``subprocess.CalledProcessError`` when pip cannot resolve them."""
    with tempfile.TemporaryDirectory() as work:
        report = Path(work) / "report.json"
        subprocess.run(
            pip_install_for_lambda(
                python,
                "--dry-run",
                "--ignore-installed",
                "--report",
                str(report),
                "--target",
                str(Path(work) / "target"),
                "-r",
                str(requirements),
            ),
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    pins = [
        Pin(
            normalize(item["metadata"]["name"]),
            item["metadata"]["version"],
            item["download_info"]["archive_info"]["hashes"]["sha256"],
        )
        for item in installs
    ]
    return sorted(pins, key=lambda pin: pin.name)


def main() -> None:
    """Write ``functions/requirements.lock`` from a fresh resolution of ``functions/requirements.txt``."""
    pins = resolve()
    LOCK.write_text(HEADER + "".join(pin.line() + "\n" for pin in pins))
    print(f"{LOCK}: {len(pins)} packages")


if __name__ == "__main__":
    main()
