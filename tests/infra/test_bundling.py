"""Local bundling of the Lambda asset (no Docker): pip's arguments, what lands in the asset, failures."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.bundling import PLATFORM, PYTHON_VERSION, REQUIREMENTS, BundlingError, LocalBundler, pip_command


class FakePip:
    """Stands in for ``subprocess.run``: records the command, writes a fake wheel install, returns ``rc``."""

    def __init__(self, returncode: int = 0, stderr: str = "") -> None:
        self.returncode = returncode
        self.stderr = stderr
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        target = Path(command[command.index("--target") + 1])
        if self.returncode == 0:
            (target / "pydantic").mkdir(parents=True)
            (target / "pydantic" / "__init__.py").write_text("")
            (target / "bin").mkdir()
            (target / "bin" / "httpx").write_text("#!/bin/sh")
        return subprocess.CompletedProcess(command, self.returncode, stdout="", stderr=self.stderr)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    package = tmp_path / "functions" / "jobsched"
    (package / "handlers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "handlers" / "api.py").write_text("def handler(event, context): ...\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (package / "tests").mkdir()
    (package / "tests" / "test_x.py").write_text("")
    return tmp_path / "functions"


def test_pip_installs_binary_wheels_for_the_lambda_platform() -> None:
    command = pip_command("/out", python="python3")
    assert command[:4] == ["python3", "-m", "pip", "install"]
    assert command[command.index("--platform") + 1] == PLATFORM == "manylinux2014_x86_64"
    assert command[command.index("--python-version") + 1] == PYTHON_VERSION == "3.12"
    assert command[command.index("--implementation") + 1] == "cp"
    assert "--only-binary=:all:" in command
    assert "--no-compile" in command
    assert command[command.index("--target") + 1] == "/out"
    assert command[command.index("-r") + 1] == str(REQUIREMENTS)


def test_bundle_holds_the_package_and_dependencies_only(source: Path, tmp_path: Path) -> None:
    # Given a source tree with byte code and tests lying around,
    out = tmp_path / "asset"
    out.mkdir()
    pip = FakePip()
    bundler = LocalBundler(source=source, requirements=source / "requirements.txt", python="py", run=pip)
    # When CDK asks for the bundle,
    assert bundler.try_bundle(str(out)) is True
    # Then pip ran once into the output dir, the package was copied without byte code or tests,
    assert len(pip.commands) == 1
    assert (out / "jobsched" / "handlers" / "api.py").is_file()
    assert (out / "pydantic" / "__init__.py").is_file()
    assert not list(out.rglob("__pycache__"))
    assert not (out / "jobsched" / "tests").exists()
    # and console scripts were pruned.
    assert not (out / "bin").exists()


def test_pip_failure_raises_instead_of_falling_back_to_docker(source: Path, tmp_path: Path) -> None:
    pip = FakePip(returncode=1, stderr="ERROR: No matching distribution found for pydantic-core==9")
    bundler = LocalBundler(source=source, run=pip)
    with pytest.raises(BundlingError, match="No matching distribution") as raised:
        bundler.try_bundle(str(tmp_path))
    assert "Docker fallback is not used" in str(raised.value)


def test_missing_package_raises(tmp_path: Path) -> None:
    bundler = LocalBundler(source=tmp_path, run=FakePip())
    with pytest.raises(BundlingError, match="no Python package"):
        bundler.try_bundle(str(tmp_path / "out"))


def test_runtime_requirements_are_pinned_and_free_of_dev_tools() -> None:
    lines = [
        line.strip()
        for line in REQUIREMENTS.read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    names = {re.split(r"[=<>!~]", line)[0].lower() for line in lines}
    assert all("==" in line for line in lines), lines
    assert not names & {"aws-cdk-lib", "constructs", "cdk-nag", "moto", "pytest", "boto3", "botocore", "jsii"}
    (dateutil,) = [line for line in lines if line.lower().startswith("python-dateutil")]
    assert int(dateutil.split("==")[1].split(".")[0]) < 3
