"""Local bundling of the Lambda asset (no Docker): pip's arguments, what lands in the asset, failures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra import lock
from infra.bundling import (
    FUNCTIONS_DIR,
    LOCK,
    PACKAGE,
    PLATFORM,
    PYTHON_VERSION,
    REQUIREMENTS,
    RUNTIME_PYTHON_ENV,
    TASK_ROOT,
    BundlingError,
    LocalBundler,
    compile_command,
    pip_command,
    runtime_python,
)
from infra.lock import normalize, parse_lock


class FakePip:
    """Stands in for ``subprocess.run``: records each command; a pip install writes a fake wheel install
    (``dist-info`` metadata included), ``compileall`` writes one ``.pyc``; returns ``rc`` for pip and
    ``compile_rc`` for compileall. ``requires`` are the fake pydantic's ``Requires-Dist`` lines."""

    def __init__(
        self, returncode: int = 0, stderr: str = "", *, compile_rc: int = 0, requires: tuple[str, ...] = ()
    ) -> None:
        self.returncode = returncode
        self.compile_rc = compile_rc
        self.stderr = stderr
        self.requires = requires
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        if "compileall" in command:
            out = Path(command[-1])
            (out / "jobsched" / "__pycache__").mkdir(parents=True, exist_ok=True)
            (out / "jobsched" / "__pycache__" / "__init__.cpython-312.pyc").write_bytes(b"pyc")
            return subprocess.CompletedProcess(command, self.compile_rc, stdout="", stderr="compile error")
        target = Path(command[command.index("--target") + 1])
        if self.returncode == 0:
            (target / "pydantic").mkdir(parents=True)
            (target / "pydantic" / "__init__.py").write_text("")
            info = target / "pydantic-2.0.dist-info"
            info.mkdir()
            requires = "".join(f"Requires-Dist: {r}\n" for r in self.requires)
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pydantic\nVersion: 2.0\n{requires}")
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


def test_pip_installs_exactly_the_locked_wheels_for_the_lambda_platform() -> None:
    command = pip_command("/out", python="python3")
    assert command[:4] == ["python3", "-m", "pip", "install"]
    assert command[command.index("--platform") + 1] == PLATFORM == "manylinux2014_x86_64"
    assert command[command.index("--python-version") + 1] == PYTHON_VERSION == "3.12"
    assert command[command.index("--implementation") + 1] == "cp"
    assert "--only-binary=:all:" in command
    assert "--no-compile" in command  # the local Python's byte code would not match the runtime's
    # Only what the lock names, each wheel checked against its hash
    assert "--require-hashes" in command and "--no-deps" in command
    assert command[command.index("--target") + 1] == "/out"
    assert command[command.index("-r") + 1] == str(LOCK)


def test_byte_code_is_compiled_by_the_runtimes_python_deterministically() -> None:
    command = compile_command("/tmp/asset-x1", python="/py312")
    assert command[:3] == ["/py312", "-m", "compileall"]
    # No timestamps in the .pyc, and the same recorded paths whatever the build directory
    assert command[command.index("--invalidation-mode") + 1] == "unchecked-hash"
    assert command[command.index("-s") + 1] == "/tmp/asset-x1"
    assert command[command.index("-p") + 1] == TASK_ROOT == "/var/task"
    assert command[-1] == "/tmp/asset-x1"


def test_bundle_holds_the_package_and_dependencies_only(source: Path, tmp_path: Path) -> None:
    # Given a source tree with byte code and tests lying around,
    out = tmp_path / "asset"
    out.mkdir()
    pip = FakePip()
    bundler = LocalBundler(
        source=source, requirements=source / "requirements.lock", python="py", compiler="py312", run=pip
    )
    # When CDK asks for the bundle,
    assert bundler.try_bundle(str(out)) is True
    # Then pip ran once into the output dir, the package was copied without the local byte code or tests,
    install, compile_ = pip.commands
    assert install[install.index("--target") + 1] == str(out)
    assert (out / "jobsched" / "handlers" / "api.py").is_file()
    assert (out / "pydantic" / "__init__.py").is_file()
    assert not list(out.rglob("*.cpython-311.pyc"))
    assert not (out / "jobsched" / "tests").exists()
    # console scripts were pruned,
    assert not (out / "bin").exists()
    # and then everything was compiled by the 3.12 (the package and the dependencies).
    assert compile_ == compile_command(str(out), python="py312")
    assert [p.name for p in out.rglob("*.pyc")] == ["__init__.cpython-312.pyc"]


def test_a_lock_missing_a_dependency_fails_the_bundle(source: Path, tmp_path: Path) -> None:
    # Given a lock whose pydantic needs packages the lock does not hold (one only on Windows)
    pip = FakePip(
        requires=(
            "annotated-types>=0.6",
            "tzdata; sys_platform == 'win32'",
            "email-validator; extra == 'email'",
        )
    )
    bundler = LocalBundler(source=source, compiler="py312", run=pip)
    # Then the bundle fails naming what is missing for the Lambda's platform, and only that
    with pytest.raises(BundlingError, match=r"not the whole dependency closure.*needs annotated-types>=0.6$"):
        bundler.try_bundle(str(tmp_path / "out"))
    assert not any("compileall" in c for c in pip.commands)


def test_a_dependency_the_runtime_provides_need_not_be_bundled(source: Path, tmp_path: Path) -> None:
    pip = FakePip(requires=("boto3>=1.30",))
    assert LocalBundler(source=source, compiler="py312", run=pip).try_bundle(str(tmp_path / "out"))


def test_a_compile_failure_fails_the_bundle(source: Path, tmp_path: Path) -> None:
    bundler = LocalBundler(source=source, compiler="py312", run=FakePip(compile_rc=1))
    with pytest.raises(
        BundlingError, match=r"(?s)compiling the Lambda asset with py312 failed.*compile error"
    ):
        bundler.try_bundle(str(tmp_path / "out"))


class FakeInterpreters:
    """``subprocess.run`` for version probes: ``versions`` maps an interpreter path to what it reports."""

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = versions

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if command[0] not in self.versions:
            raise FileNotFoundError(command[0])
        return subprocess.CompletedProcess(command, 0, stdout=self.versions[command[0]] + "\n", stderr="")


def test_the_first_candidate_that_runs_as_312_compiles() -> None:
    run = FakeInterpreters({"/usr/bin/python3.12": "3.11", "/pyenv/3.12.1/bin/python3.12": "3.12"})
    candidates = ["/missing", "/usr/bin/python3.12", "/pyenv/3.12.1/bin/python3.12"]
    assert runtime_python(candidates=candidates, run=run) == "/pyenv/3.12.1/bin/python3.12"


def test_the_environment_variable_comes_first(tmp_path: Path) -> None:
    run = FakeInterpreters({"/opt/py312": "3.12"})
    assert (
        runtime_python(environ={RUNTIME_PYTHON_ENV: "/opt/py312", "PYENV_ROOT": str(tmp_path)}, run=run)
        == "/opt/py312"
    )


def test_without_a_312_the_bundle_fails_saying_how_to_get_one(source: Path, tmp_path: Path) -> None:
    with pytest.raises(BundlingError, match=f"pyenv install 3.12.*{RUNTIME_PYTHON_ENV}"):
        runtime_python(candidates=["/missing"], run=FakeInterpreters({}))


def test_the_lock_pins_the_requirements_and_their_whole_closure_by_hash() -> None:
    pins = {pin.name: pin for pin in parse_lock(LOCK.read_text())}
    # Every top-level requirement, at its version
    for line in REQUIREMENTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            assert pins[normalize(name)].version == version.strip(), name
    # Transitive packages too (pydantic's core, httpx's transport, ...), one sha256 each, sorted
    assert {"pydantic-core", "httpcore", "anyio", "typing-extensions"} <= set(pins)
    assert list(pins) == sorted(pins)
    assert not set(pins) & {"boto3", "botocore", "s3transfer"}


def test_a_lock_line_without_its_hash_is_refused() -> None:
    with pytest.raises(ValueError, match="line 2"):
        parse_lock("# header\npydantic==2.14.3\n")


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


def test_the_runtimes_byte_code_is_the_same_wherever_and_whenever_it_is_built(tmp_path: Path) -> None:
    # Given the package copied into two different build directories at different times
    python = runtime_python()
    builds = []
    for index, mtime in enumerate((1_000_000_000, 1_700_000_000)):
        out = tmp_path / f"build-{index}"
        shutil.copytree(FUNCTIONS_DIR / PACKAGE, out / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
        for path in out.rglob("*.py"):
            os.utime(path, (mtime, mtime))
        # When the real CPython 3.12 compiles each
        subprocess.run(compile_command(str(out), python=python), check=True, capture_output=True)
        builds.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.cpython-312.pyc"))})
    # Then every module has byte code for 3.12, byte for byte the same in both builds
    modules = {p.relative_to(tmp_path / "build-0") for p in (tmp_path / "build-0").rglob("*.py")}
    assert len(builds[0]) == len(modules) and builds[0] == builds[1]
    handler = builds[0][Path(PACKAGE, "handlers", "__pycache__", "api.cpython-312.pyc")]
    # hash-based and never checked against the source (flags 0b01), no timestamp; paths under /var/task
    assert int.from_bytes(handler[4:8], "little") == 0b01
    assert b"/var/task/jobsched/handlers/api.py" in handler and str(tmp_path).encode() not in handler


def test_the_lock_is_resolved_for_the_same_target_the_bundle_installs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given pip, asked for its --report, answering with one wheel
    seen: list[list[str]] = []

    def dry_run(command: list[str], check: bool) -> None:
        seen.append(command)
        report = {"metadata": {"name": "Boto3", "version": "1.0"}, "download_info": {}}
        report["download_info"] = {"archive_info": {"hashes": {"sha256": "ab" * 32}}}
        Path(command[command.index("--report") + 1]).write_text(json.dumps({"install": [report]}))

    monkeypatch.setattr(lock.subprocess, "run", dry_run)

    pins = lock.resolve(Path("requirements.txt"), python="python3")

    # Then it resolved a dry run for the bundle's platform, Python and implementation, binary wheels only
    (command,) = seen
    bundle = pip_command("/out", python="python3")
    for option in ("--platform", "--python-version", "--implementation"):
        assert command[command.index(option) + 1] == bundle[bundle.index(option) + 1]
    assert command[:4] == bundle[:4] and "--only-binary=:all:" in command and "--dry-run" in command
    assert [(p.name, p.version) for p in pins] == [("boto3", "1.0")]
