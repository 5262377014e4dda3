"""The Lambda code asset, bundled on this machine without Docker.

CDK asks an ``ILocalBundling`` first and falls back to a Docker image only when it declines. Ours
never declines: it either builds the asset or raises ``BundlingError`` with pip's output, so the
Docker fallback (an image named ``unused``) is never reached on a machine without a Docker engine.

The asset is the ``jobsched`` package plus its runtime dependencies (no CDK, moto, pytest), installed as
manylinux x86_64 wheels for CPython 3.12 (the functions' runtime and architecture, see ``infra.functions``)
from ``functions/requirements.lock``: the whole closure of ``functions/requirements.txt``, each wheel pinned
by version and sha256 (``infra.lock``), installed with ``--require-hashes --no-deps``; the bundle is checked
to hold every dependency of every package it holds. boto3 is not bundled: the Lambda runtime provides it.

Everything is then compiled to byte code by a CPython 3.12 (``runtime_python``), deterministically: hash-based
``.pyc`` files that Python never checks against the source (``unchecked-hash``: the asset is immutable) and
file names rewritten to ``/var/task/...``, where Lambda unpacks the asset. So a cold start imports byte code
instead of compiling every module (``/var/task`` is read-only: Python cannot cache what it compiles there),
and two bundles of one commit are byte for byte the same.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from jobsched.lambda_wheels import PLATFORM, PYTHON_VERSION, pip_install_for_lambda

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = ROOT / "functions"
PACKAGE = "jobsched"
REQUIREMENTS = FUNCTIONS_DIR / "requirements.txt"
LOCK = FUNCTIONS_DIR / "requirements.lock"
TASK_ROOT = "/var/task"
"""Where Lambda unpacks the asset (``LAMBDA_TASK_ROOT``): the file names compiled into the byte code."""
RUNTIME_PYTHON_ENV = "JOBSCHED_LAMBDA_PYTHON"
"""Environment variable naming the CPython 3.12 interpreter that compiles the asset (else found on PATH or
through pyenv)."""
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})
"""Distributions the Lambda runtime provides: a bundled package may depend on them without bundling them."""

__all__ = [
    "PLATFORM",
    "PYTHON_VERSION",
    "BundlingError",
    "LocalBundler",
    "compile_command",
    "lambda_code",
    "missing_dependencies",
    "pip_command",
    "pip_install_for_lambda",
    "runtime_python",
]

# Never part of the asset, and never part of its hash (so a stray __pycache__ does not force a re-bundle).
EXCLUDE = ("**/__pycache__", "**/*.pyc", "*.egg-info", "**/.mypy_cache")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", "tests")
# Installed by pip but useless in a Lambda: console scripts.
_PRUNE = ("bin",)

Runner = Callable[..., subprocess.CompletedProcess[str]]


class BundlingError(RuntimeError):
    """Local bundling failed (pip could not install the pinned wheels); the message carries pip's output."""


def pip_command(output_dir: str, *, python: str = sys.executable, requirements: Path = LOCK) -> list[str]:
    """The pip invocation that installs the locked runtime dependencies into ``output_dir``.

    Binary wheels only (``--only-binary=:all:``) for the Lambda's platform and Python, so nothing is
    built on this machine; exactly the locked wheels (``--require-hashes``, ``--no-deps``: nothing the lock
    does not name); ``--no-compile`` because byte code from the local Python would not match the
    runtime's (``compile_command`` compiles it with a 3.12).
    """
    return pip_install_for_lambda(
        python,
        "--disable-pip-version-check",
        "--no-compile",
        "--require-hashes",
        "--no-deps",
        "--target",
        output_dir,
        "-r",
        str(requirements),
    )


def compile_command(output_dir: str, *, python: str) -> list[str]:
    """The ``compileall`` invocation that byte-compiles everything in ``output_dir`` with ``python`` (a
    CPython 3.12), deterministically: ``unchecked-hash`` ``.pyc`` (no timestamps) and source paths recorded as
    ``/var/task/...`` whatever the build directory."""
    return [
        python,
        "-m",
        "compileall",
        "-q",
        "--invalidation-mode",
        "unchecked-hash",
        "-s",
        output_dir,
        "-p",
        TASK_ROOT,
        output_dir,
    ]


def runtime_python(
    *,
    environ: dict[str, str] | None = None,
    candidates: Iterable[str] | None = None,
    run: Runner = subprocess.run,
) -> str:
    """A CPython ``PYTHON_VERSION`` interpreter to compile the asset with: ``$JOBSCHED_LAMBDA_PYTHON``, else
    ``python3.12`` on PATH, else pyenv's (``$PYENV_ROOT`` or ``~/.pyenv``, ``versions/3.12.*``). Raises
    ``BundlingError`` saying how to provide one when none runs as 3.12."""
    env = os.environ if environ is None else environ
    if candidates is None:
        root = env.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
        pyenv = sorted(
            glob.glob(f"{root}/versions/{PYTHON_VERSION}.*/bin/python{PYTHON_VERSION}"), reverse=True
        )
        on_path = shutil.which(f"python{PYTHON_VERSION}")
        candidates = [c for c in (env.get(RUNTIME_PYTHON_ENV), on_path, *pyenv) if c]
    for candidate in candidates:
        try:
            result = run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            continue
        if result.returncode == 0 and result.stdout.strip() == PYTHON_VERSION:
            return candidate
    raise BundlingError(
        f"local bundling needs a CPython {PYTHON_VERSION} (the functions' runtime) to compile the asset's byte "
        f"code: install one (`pyenv install {PYTHON_VERSION}`) or set {RUNTIME_PYTHON_ENV} to its path"
    )


def missing_dependencies(site: Path) -> list[str]:
    """Requirements of the distributions installed in ``site`` (a ``--target`` directory) that no distribution
    there satisfies, for CPython ``PYTHON_VERSION`` on Linux x86_64 (markers evaluated so; extras not
    requested are skipped; ``RUNTIME_PROVIDED`` ones are fine). ``["httpx 0.28.1 needs anyio"]``; empty when
    the closure is complete."""
    from packaging.requirements import Requirement  # the build machine's, not the asset's

    installed = {
        _normalize(dist.metadata["Name"]): dist.version for dist in metadata.distributions(path=[str(site)])
    }
    marker_env = {
        "python_version": PYTHON_VERSION,
        "python_full_version": f"{PYTHON_VERSION}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "extra": "",
    }
    missing = []
    for dist in metadata.distributions(path=[str(site)]):
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(marker_env):
                continue
            name = _normalize(requirement.name)
            if name in RUNTIME_PROVIDED:
                continue
            version = installed.get(name)
            if version is None or not requirement.specifier.contains(version, prereleases=True):
                missing.append(f"{dist.metadata['Name']} {dist.version} needs {requirement}")
    return sorted(set(missing))


def _normalize(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()


@jsii.implements(ILocalBundling)
class LocalBundler:
    """Builds the asset with the local pip (``try_bundle`` is called by CDK during synth).

    ``run`` is ``subprocess.run`` (injected so tests can force a failure); ``source`` is the
    directory holding the ``jobsched`` package; ``requirements`` the lock; ``compiler`` the CPython 3.12
    that compiles the byte code (default: ``runtime_python()``, looked up at bundling time).
    """

    def __init__(
        self,
        *,
        source: Path = FUNCTIONS_DIR,
        requirements: Path = LOCK,
        python: str = sys.executable,
        compiler: str | None = None,
        run: Runner = subprocess.run,
    ) -> None:
        self._source = source
        self._requirements = requirements
        self._python = python
        self._compiler = compiler
        self._run = run

    def try_bundle(self, output_dir: str, options: Any = None, **_: Any) -> bool:
        """Install the locked dependencies, copy the package into ``output_dir`` and compile it all; always True.

        Raises ``BundlingError`` when pip fails, the lock misses a dependency, the package is missing, no
        CPython 3.12 is found or compiling fails: returning False would make CDK try Docker, which this
        project never uses.
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
        missing = missing_dependencies(out)
        if missing:
            raise BundlingError(
                f"{self._requirements.name} is not the whole dependency closure (regenerate it: "
                f"python -m infra.lock): " + "; ".join(missing)
            )
        compiler = self._compiler or runtime_python(run=self._run)
        command = compile_command(str(out), python=compiler)
        result = self._run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BundlingError(
                f"compiling the Lambda asset with {compiler} failed (exit status {result.returncode}).\n"
                f"command: {' '.join(command)}\n{result.stdout}{result.stderr}"
            )
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
