"""The Lambda code asset, bundled on this machine without Docker.

CDK asks an ``ILocalBundling`` first and falls back to a Docker image only when it declines. Ours
never declines: it either builds the asset or raises ``BundlingError`` with pip's output, so the
Docker fallback (an image named ``unused``) is never reached on a machine without a Docker engine.

The asset is the ``jobsched`` package plus its runtime dependencies from
``functions/requirements.txt`` (no CDK, moto, pytest), installed as manylinux x86_64 wheels for
CPython 3.12 (the functions' runtime and architecture, see ``infra.functions``). boto3 is not
bundled: the Lambda runtime provides it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = ROOT / "functions"
PACKAGE = "jobsched"
REQUIREMENTS = FUNCTIONS_DIR / "requirements.txt"

PYTHON_VERSION = "3.12"
"""CPython version of the Lambda runtime the wheels are chosen for (``Runtime.PYTHON_3_12``)."""
PLATFORM = "manylinux2014_x86_64"
"""Wheel platform tag for ``Architecture.X86_64`` (Amazon Linux 2023, glibc 2.34, accepts manylinux2014)."""

# Never part of the asset, and never part of its hash (so a stray __pycache__ does not force a re-bundle).
EXCLUDE = ("**/__pycache__", "**/*.pyc", "*.egg-info", "**/.mypy_cache")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", "tests")
# Installed by pip but useless in a Lambda: console scripts.
_PRUNE = ("bin",)

Runner = Callable[..., subprocess.CompletedProcess[str]]


class BundlingError(RuntimeError):
    """Local bundling failed (pip could not install the pinned wheels); the message carries pip's output."""


def pip_command(
    output_dir: str, *, python: str = sys.executable, requirements: Path = REQUIREMENTS
) -> list[str]:
    """The pip invocation that installs the runtime dependencies into ``output_dir``.

    Binary wheels only (``--only-binary=:all:``) for the Lambda's platform and Python, so nothing is
    compiled on this machine; ``--no-compile`` because byte code from the local Python would not
    match the runtime's.
    """
    return [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--platform",
        PLATFORM,
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
        "--only-binary=:all:",
        "--target",
        output_dir,
        "-r",
        str(requirements),
    ]


@jsii.implements(ILocalBundling)
class LocalBundler:
    """Builds the asset with the local pip (``try_bundle`` is called by CDK during synth).

    ``run`` is ``subprocess.run`` (injected so tests can force a failure); ``source`` is the
    directory holding the ``jobsched`` package.
    """

    def __init__(
        self,
        *,
        source: Path = FUNCTIONS_DIR,
        requirements: Path = REQUIREMENTS,
        python: str = sys.executable,
        run: Runner = subprocess.run,
    ) -> None:
        self._source = source
        self._requirements = requirements
        self._python = python
        self._run = run

    def try_bundle(self, output_dir: str, options: Any = None, **_: Any) -> bool:
        """Install the dependencies and copy the package into ``output_dir``; always True.

        Raises ``BundlingError`` when pip fails or the package is missing: returning False would
        make CDK try Docker, which this project never uses.
        """
        package = self._source / PACKAGE
        if not (package / "__init__.py").is_file():
            raise BundlingError(f"local bundling: no Python package at {package}")
        command = pip_command(output_dir, python=self._python, requirements=self._requirements)
        result = self._run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BundlingError(
                "local bundling of the Lambda asset failed (pip exit status "
                f"{result.returncode}); the Docker fallback is not used.\n"
                f"command: {' '.join(command)}\n{result.stdout}{result.stderr}"
            )
        out = Path(output_dir)
        for name in _PRUNE:
            shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(package, out / PACKAGE, ignore=_IGNORE, dirs_exist_ok=True)
        return True


def lambda_code(bundler: LocalBundler | None = None, exclude: Sequence[str] = EXCLUDE) -> lambda_.Code:
    """The one code asset all four functions share (bundled locally; see the module docstring)."""
    return lambda_.Code.from_asset(
        str(FUNCTIONS_DIR),
        exclude=list(exclude),
        bundling=BundlingOptions(
            # Required by the API but never used: LocalBundler either succeeds or raises.
            image=DockerImage.from_registry("unused"),
            local=bundler or LocalBundler(),
        ),
    )
