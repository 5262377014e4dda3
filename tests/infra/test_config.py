"""Deployment configuration from CDK context: defaults from Settings, coercion, validation errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

import jobsched
from infra import config as config_module
from infra.config import (
    RESOURCE_ENV_VARS,
    RUNTIME_KNOBS,
    WORKER_BOOKKEEPING_S,
    ConfigError,
    DeploymentConfig,
    InfraOptions,
    context_values,
)
from jobsched import resources
from jobsched.domain.worker import CLAIM_MARGIN_S
from jobsched.settings import Settings
from tests.infra.support import synthesize


def test_runtime_knobs_are_the_settings_fields_that_are_not_resource_names() -> None:
    assert "scheduler_partitions" in RUNTIME_KNOBS
    assert "allow_shell_targets" in RUNTIME_KNOBS
    assert "jobs_table" not in RUNTIME_KNOBS
    assert "local_tokens_file" not in RUNTIME_KNOBS
    assert "target_role_arn" not in RUNTIME_KNOBS  # set by the stack from the role it creates
    assert set(RUNTIME_KNOBS) | {n.lower() for n in RESOURCE_ENV_VARS} >= set(Settings.model_fields) - {
        "local_tokens_file",
        "allow_loopback_http_targets",
        "target_role_arn",
        "archive_workgroup",  # set by the stack from the archive it creates
        "archive_database",
    }


def test_defaults_are_the_settings_defaults() -> None:
    config = DeploymentConfig.from_context({})
    for name in RUNTIME_KNOBS:
        assert getattr(config.settings, name) == Settings.model_fields[name].default, name
    assert config.settings.allow_shell_targets is False
    assert config.settings.allow_private_http_targets is False
    assert config.infra == InfraOptions()


def test_command_line_strings_are_coerced() -> None:
    # Given values as `cdk deploy -c key=value` passes them (strings),
    config = DeploymentConfig.from_context(
        {
            "scheduler_partitions": "4",
            "allow_shell_targets": "true",
            "min_interval_s": "0.5",
            "worker_batch_size": "5",
            "log_retention_days": "90",
            "target_function_arns": "arn:aws:lambda:eu-west-1:1:function:a, arn:aws:lambda:eu-west-1:1:function:b",
            "target_queue_arns": '["arn:aws:sqs:eu-west-1:1:q"]',
            "quotas": '{"default": {"jobs": 100}, "owners": {"billing": {"jobs": null}}}',
        }
    )
    # Then they arrive typed,
    assert config.settings.scheduler_partitions == 4
    assert config.settings.allow_shell_targets is True
    assert config.infra.worker_batch_size == 5
    assert config.infra.log_retention_name == "THREE_MONTHS"
    assert config.infra.target_function_arns == (
        "arn:aws:lambda:eu-west-1:1:function:a",
        "arn:aws:lambda:eu-west-1:1:function:b",
    )
    assert config.infra.target_queue_arns == ("arn:aws:sqs:eu-west-1:1:q",)
    assert config.settings.quotas.for_owner("team").jobs == 100
    assert config.settings.quotas.for_owner("billing").jobs is None
    # and become the functions' environment, named after the Settings fields.
    env = config.runtime_environment()
    assert env["SCHEDULER_PARTITIONS"] == "4"
    assert env["ALLOW_SHELL_TARGETS"] == "true"
    assert env["MIN_INTERVAL_S"] == "0.5"
    assert not set(env) & set(RESOURCE_ENV_VARS)


def test_the_environment_round_trips_through_settings() -> None:
    config = DeploymentConfig.from_context(
        {
            "due_shards": "8",
            "retention_days": "30",
            "quotas": {"owners": {"billing": {"fires_per_minute": 1.5}}},
        }
    )
    names = {n.lower(): "x" for n in RESOURCE_ENV_VARS}
    settings = Settings.model_validate(
        {**names, **{k.lower(): v for k, v in config.runtime_environment().items()}}
    )
    for name in RUNTIME_KNOBS:
        assert getattr(settings, name) == getattr(config.settings, name)


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"scheduler_partitions": "0"}, "scheduler_partitions"),
        ({"due_shards": "many"}, "due_shards"),
        ({"quotas": '{"default": {"jobs": -1}}'}, "quotas.default.jobs"),
        ({"quotas": '{"owners": {"billing": {"runs": 1}}}'}, "quotas.owners.billing.runs"),
        ({"worker_batch_size": "101"}, "worker_batch_size"),
        ({"worker_batch_size": "11"}, "worker_batching_window_s"),
        ({"worker_batch_size": "20", "worker_batching_window_s": "0"}, "worker_batching_window_s"),
        ({"worker_batching_window_s": "301"}, "worker_batching_window_s"),
        ({"worker_max_concurrency": "1"}, "worker_max_concurrency"),
        ({"log_retention_days": "31"}, "log_retention_days"),
        ({"reserve_scheduler_concurrency": "perhaps"}, "reserve_scheduler_concurrency"),
        ({"owner_from": "team"}, "owner_from"),
        ({"owner_from": "tag:"}, "owner_from"),
        ({"owner_from": "tag:aws:team"}, "owner_from"),
        ({"owner_from": "tag:team*"}, "owner_from"),
    ],
)
def test_invalid_values_fail_naming_the_key(context: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        DeploymentConfig.from_context(context)


def test_job_timeout_cap_must_leave_the_worker_time_to_record_the_try() -> None:
    with pytest.raises(ConfigError, match="worker_timeout_cap_s"):
        DeploymentConfig.from_context({"worker_timeout_cap_s": str(resources.WORKER_FUNCTION_TIMEOUT_S)})
    # The largest cap accepted still lets a fresh worker invocation claim a job with that timeout (the
    # worker claims only with timeout_s + CLAIM_MARGIN_S left), with seconds to spare for the start-up.
    largest = resources.WORKER_FUNCTION_TIMEOUT_S - WORKER_BOOKKEEPING_S
    assert (
        DeploymentConfig.from_context({"worker_timeout_cap_s": str(largest)}).settings.worker_timeout_cap_s
        == largest
    )
    assert largest + CLAIM_MARGIN_S <= resources.WORKER_FUNCTION_TIMEOUT_S - 5


def test_the_synth_machines_environment_does_not_leak_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a developer shell exporting local-mode settings,
    monkeypatch.setenv("SCHEDULER_PARTITIONS", "7")
    monkeypatch.setenv("ALLOW_SHELL_TARGETS", "true")
    # When the deployment config is built from an empty context, then only the defaults apply.
    config = DeploymentConfig.from_context({})
    assert config.settings.scheduler_partitions == 1
    assert config.settings.allow_shell_targets is False


def test_context_values_reads_only_known_keys_that_are_set() -> None:
    app = cdk.App(context={"due_shards": "2", "worker_max_concurrency": 10, "unrelated": "x"})
    assert context_values(app.node) == {"due_shards": "2", "worker_max_concurrency": 10}


# -- every setting is read somewhere ---------------------------------------------------------------


def test_every_infrastructure_knob_is_read_by_the_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given InfraOptions that record which of their fields are read
    read: set[str] = set()

    class RecordingOptions(InfraOptions):
        def __getattribute__(self, name: str) -> Any:
            if name in InfraOptions.model_fields:
                read.add(name)
            return super().__getattribute__(name)

    monkeypatch.setattr(config_module, "InfraOptions", RecordingOptions)
    # When the stack is synthesized (in provisioned capacity mode: the only one that reads the capacity_*
    # bounds; every other knob is read in either mode)
    synthesize(tmp_path, {"capacity": "provisioned"})
    # Then it read every one of them: none is accepted, validated and then ignored
    assert set(InfraOptions.model_fields) - read == set()


@pytest.mark.parametrize("name", RUNTIME_KNOBS)
def test_every_runtime_knob_is_read_by_the_functions(name: str) -> None:
    # The stack passes every runtime knob to the functions (test_stack checks the environment); some
    # module of the package must then read it from its Settings.
    package = Path(jobsched.__file__).parent
    sources = [p.read_text() for p in package.rglob("*.py") if p.name != "settings.py"]
    assert any(re.search(rf"\.{name}\b", text) for text in sources), f"Settings.{name} is never read"
