"""``Job``: a jobsched job as a resource of a team's own CDK stack, made, updated and deleted with the stack.

Each ``Job`` is a CloudFormation custom resource (``Custom::JobschedJob``) served by one provider per stack
(:class:`JobProvider`): the CDK's provider framework in front of a Python function that runs
:mod:`jobsched.cdk.provider` and calls the jobsched API signed with SigV4 with its own role. So the jobs' owner
is that role (or, with the API's ``owner_from = "tag:<key>"``, the role's tag: tag the provider's role, e.g.
``Tags.of(JobProvider.of(stack).role).add("team", "billing")``). The role may call nothing but the job routes of
the APIs its jobs name (``execute-api:Invoke`` on ``POST /jobs``, ``PATCH /jobs/*``, ``DELETE /jobs/*``).

The function's code asset holds only what the handler imports: ``jobsched/__init__.py``, ``jobsched/client.py`` (with ``jobsched/archived_rows.py``),
``jobsched/cdk/__init__.py``, ``jobsched/cdk/provider.py``, and the httpx version installed here with its
dependencies as wheels for the Lambda runtime (:class:`ProviderBundler`, pip, no Docker).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    AssetHashType,
    BundlingOptions,
    CustomResource,
    DockerImage,
    Duration,
    ILocalBundling,
    RemovalPolicy,
    Stack,
    Token,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from jobsched.cdk.provider import API_URL_PROPERTY, NAME_PROPERTY, SPEC_PROPERTY
from jobsched.cdk.spec import complete_spec
from jobsched.lambda_wheels import pip_install_for_lambda
from jobsched.models import JobSettings

__all__ = ["RESOURCE_TYPE", "Job", "JobProvider", "ProviderBundler", "execute_api_arn_of"]

RESOURCE_TYPE = "Custom::JobschedJob"
PACKAGE_DIR = Path(__file__).resolve().parent.parent
ASSET_MODULES = ("__init__.py", "client.py", "archived_rows.py", "cdk/__init__.py", "cdk/provider.py")
"""The files of the ``jobsched`` package the provider function imports (relative to the package)."""
HANDLER = "jobsched.cdk.provider.on_event"
INVOKED = (("POST", "jobs"), ("PATCH", "jobs/*"), ("DELETE", "jobs/*"))
"""The API routes the provider calls: ``(method, path)`` of an ``execute-api`` ARN."""
_API_GATEWAY_URL = re.compile(
    r"^https://(?P<api>[a-z0-9]+)\.execute-api\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<stage>[^/?#]+)/?$"
)

Runner = Callable[..., subprocess.CompletedProcess[str]]


class BundlingError(RuntimeError):
    """Building the provider's asset failed; the message carries pip's output."""


@jsii.implements(ILocalBundling)
class ProviderBundler:
    """Builds the provider function's asset on this machine (CDK calls ``try_bundle`` during synth): the
    ``ASSET_MODULES`` of the installed ``jobsched`` package (``package``) and the installed httpx version with
    its dependencies, as wheels for the Lambda runtime (``pip``, run with ``python`` through ``run``)."""

    def __init__(
        self, *, package: Path = PACKAGE_DIR, python: str = sys.executable, run: Runner = subprocess.run
    ) -> None:
        self._package = package
        self._python = python
        self._run = run

    def pip_command(self, output_dir: str) -> list[str]:
        """The pip invocation installing httpx, pinned to the version installed here, into ``output_dir``."""
        return pip_install_for_lambda(
            self._python,
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            output_dir,
            f"httpx=={metadata.version('httpx')}",
        )

    def try_bundle(self, output_dir: str, options: Any = None, **_: Any) -> bool:
        """Install httpx and copy the modules into ``output_dir``; always True. Raises ``BundlingError`` when
        pip fails (returning False would make CDK try Docker, which is never used)."""
        command = self.pip_command(output_dir)
        result = self._run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BundlingError(
                f"building the jobsched job provider's asset failed (pip exit status {result.returncode}).\n"
                f"command: {' '.join(command)}\n{result.stdout}{result.stderr}"
            )
        out = Path(output_dir)
        shutil.rmtree(out / "bin", ignore_errors=True)
        for module in ASSET_MODULES:
            target = out / "jobsched" / module
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self._package / module, target)
        return True


def provider_code(bundler: ProviderBundler | None = None) -> lambda_.Code:
    """The provider function's code asset (:class:`ProviderBundler`), hashed by its output, so synths with
    bundling skipped never fingerprint the package directory."""
    return lambda_.Code.from_asset(
        str(PACKAGE_DIR),
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Required by the API but never used: ProviderBundler either succeeds or raises.
            image=DockerImage.from_registry("unused"),
            local=bundler or ProviderBundler(),
        ),
    )


def execute_api_arn_of(scope: Construct, api_url: str) -> str:
    """``arn:<partition>:execute-api:<region>:<account>:<api id>/<stage>`` of an API Gateway URL
    (``https://<api id>.execute-api.<region>.amazonaws.com/<stage>``), in ``scope``'s stack's partition and
    account. Raises ``ValueError`` for any other URL (a custom domain, a value known only at deploy time):
    pass ``execute_api_arn`` to ``Job`` then."""
    match = None if Token.is_unresolved(api_url) else _API_GATEWAY_URL.match(api_url)
    if match is None:
        raise ValueError(
            f"api_url {api_url!r} is not an API Gateway URL (https://<id>.execute-api.<region>.amazonaws.com"
            "/<stage>): pass execute_api_arn='arn:aws:execute-api:<region>:<account>:<id>/<stage>' too"
        )
    stack = Stack.of(scope)
    return (
        f"arn:{stack.partition}:execute-api:{match['region']}:{stack.account}:{match['api']}/{match['stage']}"
    )


class JobProvider(Construct):
    """The stack's one provider of ``Custom::JobschedJob`` resources (:meth:`of`): ``function`` (the handler,
    Python 3.12, x86_64), its ``role`` and ``log_group``, and ``provider`` (the CDK's provider framework)."""

    ID = "JobschedJobProvider"

    def __init__(self, scope: Construct, id: str, *, code: lambda_.Code | None = None) -> None:
        super().__init__(scope, id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="jobsched job provider: calls the jobsched API's job routes",
        )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Handler",
            description="jobsched job provider: creates, updates and deletes jobs through the API",
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.X86_64,
            handler=HANDLER,
            code=code or provider_code(),
            role=self.role,
            timeout=Duration.minutes(2),
            memory_size=256,
            log_group=self.log_group,
        )
        self.provider = cr.Provider(self, "Provider", on_event_handler=self.function)
        self._apis: set[str] = set()

    @classmethod
    def of(cls, scope: Construct) -> JobProvider:
        """The provider of ``scope``'s stack, made on first use."""
        stack = Stack.of(scope)
        existing = stack.node.try_find_child(cls.ID)
        return existing if isinstance(existing, JobProvider) else cls(stack, cls.ID)

    def allow(self, execute_api_arn: str) -> None:
        """Let the function call the job routes (``INVOKED``) of the API ``execute_api_arn``
        (``arn:...:execute-api:<region>:<account>:<api id>/<stage>``); once per API."""
        if execute_api_arn in self._apis:
            return
        self._apis.add(execute_api_arn)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["execute-api:Invoke"],
                resources=[f"{execute_api_arn}/{method}/{path}" for method, path in INVOKED],
            )
        )


class Job(Construct):
    """One jobsched job, made, updated and deleted with the stack.

    ``Job(self, "NightlyInvoices", api_url=..., schedule="0 2 * * *", timezone="Europe/Berlin",
    target={"type": "lambda", "function": fn.function_arn}, retry={"max_attempts": 3})``

    ``api_url`` is the jobsched API (its ``ApiUrl`` output); ``name`` the job's name (default: the construct's
    id); ``schedule``, ``timezone``, ``target`` and ``fields`` the job's other fields as the API takes them
    (``input``, ``retry``, ``alerts``, ``timeout_s``, ``missed``, ``catch_up_window_s``, ``misfire_grace_s``,
    ``overlap``, ``jitter_s``, ``start_at``, ``end_at``, ``paused``; a string may hold a token, such as a
    function's ARN, resolved at deploy time into the JSON text of the ``Spec`` property); a field not given
    is written with the API's default, so deleting a line of code sets the field back to its default.
    ``execute_api_arn`` is needed when ``api_url`` is not an API Gateway URL (see :func:`execute_api_arn_of`).

    A spec the API refuses fails the deployment with the API's error (code, message, field). A changed
    ``name`` or ``api_url`` replaces the job (a new job; the old one is deleted); other changes update it in
    place. ``job_id`` is the job's id (``j_...``). Raises ``TypeError`` naming a field the API does not take.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        api_url: str,
        schedule: str,
        target: Mapping[str, Any],
        name: str | None = None,
        timezone: str = "UTC",
        execute_api_arn: str | None = None,
        **fields: Any,
    ) -> None:
        unknown = sorted(fields.keys() - JobSettings.model_fields.keys())
        if unknown:
            raise TypeError(
                f"Job {id!r}: unknown job field(s) {', '.join(unknown)}; the fields are "
                + ", ".join(sorted(JobSettings.model_fields))
            )
        api_arn = execute_api_arn or execute_api_arn_of(scope, api_url)
        super().__init__(scope, id)
        given = {"schedule": schedule, "timezone": timezone, "target": target, **fields}
        self.provider = JobProvider.of(self)
        self.provider.allow(api_arn)
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.provider.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                API_URL_PROPERTY: api_url,
                NAME_PROPERTY: name or id,
                SPEC_PROPERTY: json.dumps(complete_spec(given), separators=(",", ":")),
            },
        )
        self.job_id: str = self.resource.ref
