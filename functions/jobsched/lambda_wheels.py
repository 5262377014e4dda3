"""The Lambda functions' Python and platform, as pip spells them: one definition for the stack's asset
(``infra.bundling``, ``infra.lock``), the cold start bench and the provider asset of ``jobsched.cdk.Job``.

No CDK import: the package's own modules use it too.
"""

from __future__ import annotations

PYTHON_VERSION = "3.12"
"""CPython version of the Lambda runtime the wheels are chosen for (``Runtime.PYTHON_3_12``)."""
PLATFORM = "manylinux2014_x86_64"
"""Wheel platform tag for ``Architecture.X86_64`` (Amazon Linux 2023, glibc 2.34, accepts manylinux2014)."""


def pip_install_for_lambda(python: str, *options: str) -> list[str]:
    """``python -m pip install --quiet`` of binary wheels only (``--only-binary=:all:``) for the Lambda's
    platform, Python and implementation, with ``options`` (what to install, where). The one spelling of that
    target for bundling (``infra.bundling.pip_command``), the lock (``infra.lock``), ``bench.cold_start`` and
    the provider asset of ``jobsched.cdk.Job``."""
    return [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--platform",
        PLATFORM,
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
        "--only-binary=:all:",
        *options,
    ]
