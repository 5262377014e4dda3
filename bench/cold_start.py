"""Cold import time of each Lambda handler under CPython 3.12, from the asset as ``cdk synth`` bundles it.

The asset is built with the real bundler (``infra.bundling.LocalBundler``: locked wheels, byte code compiled
by a 3.12), boto3 is installed next to it as the Lambda runtime provides it (compiled too), and each handler
module is imported in a fresh ``python3.12 -I -B`` process (no user site, nothing written: like Lambda's
read-only ``/var/task``), ``repeats`` times; the figure is the median. The same is measured on a copy of the
asset without its byte code (``source``), which is what every cold start paid before the asset shipped it.
The machine's file cache is warm after the first import, as it is not in Lambda: these are the CPU part of
a cold start, not its disk or download part. Needs pip's index (the first time) and a CPython 3.12.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

HANDLERS = ("api", "scheduler", "worker", "sweeper")

_IMPORT = (
    "import sys, time; sys.path[:0] = [{asset!r}, {runtime!r}]; t = time.perf_counter(); "
    "import {module}; print(time.perf_counter() - t)"
)


def _import_s(python: str, asset: Path, runtime: Path, module: str) -> float:
    code = _IMPORT.format(asset=str(asset), runtime=str(runtime), module=module)
    out = subprocess.run(
        [python, "-I", "-B", "-c", code], capture_output=True, text=True, check=True, cwd=asset
    ).stdout
    return float(out.strip().splitlines()[-1])


def measure_cold_start(repeats: int = 5) -> dict[str, Any]:
    """``{"python": "3.12.x", "repeats": n, "handlers": {"api": {"bytecode_s", "source_s", "speedup"}, ...},
    "asset_pyc_files": n}`` (seconds, medians)."""
    from infra.bundling import LocalBundler, compile_command, pip_install_for_lambda, runtime_python

    python = runtime_python()
    with tempfile.TemporaryDirectory(prefix="jobsched-cold-") as tmp:
        asset, runtime, source = Path(tmp, "asset"), Path(tmp, "runtime"), Path(tmp, "source")
        asset.mkdir()
        LocalBundler(compiler=python).try_bundle(str(asset))
        subprocess.run(
            pip_install_for_lambda(
                sys.executable,
                "--disable-pip-version-check",
                "--no-compile",
                "--target",
                str(runtime),
                f"boto3=={version('boto3')}",
            ),
            check=True,
            capture_output=True,
        )
        subprocess.run(compile_command(str(runtime), python=python), check=True, capture_output=True)
        shutil.copytree(asset, source, ignore=shutil.ignore_patterns("__pycache__"))
        handlers: dict[str, Any] = {}
        for name in HANDLERS:
            module = f"jobsched.handlers.{name}"
            timings = {
                variant: statistics.median(_import_s(python, root, runtime, module) for _ in range(repeats))
                for variant, root in (("bytecode_s", asset), ("source_s", source))
            }
            handlers[name] = {
                **{k: round(v, 3) for k, v in timings.items()},
                "speedup": round(timings["source_s"] / timings["bytecode_s"], 2),
            }
        version_out = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return {
            "python": version_out,
            "repeats": repeats,
            "handlers": handlers,
            "asset_pyc_files": sum(1 for _ in asset.rglob("*.pyc")),
        }
