"""Synth helpers for the infrastructure tests: bundling skipped, context from the project's cdk.json.

Synthesizing takes several seconds, so each test module synthesizes once (module-scoped fixtures).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from infra.stack import JobschedStack, build_app

ROOT = Path(__file__).resolve().parents[2]

SKIP_BUNDLING: dict[str, Any] = {"aws:cdk:bundling-stacks": []}


def project_context() -> dict[str, Any]:
    """The ``context`` block of the project's cdk.json (feature flags), as ``cdk synth`` sees it."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context


@dataclass
class Synth:
    """One synthesized app: the stack object, its template (dict and assertions view), the assembly dir."""

    stack: JobschedStack
    raw: dict[str, Any]
    template: Template
    outdir: Path

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        """Logical id -> resource of every resource of CloudFormation type ``type_``."""
        return {k: v for k, v in self.raw["Resources"].items() if v["Type"] == type_}

    def logical_id_of_output(self, name: str) -> str:
        """The logical id an output (``JobsTable``, ``RunQueueUrl``, ...) refers to with ``Ref``."""
        ref: str = self.raw["Outputs"][name]["Value"]["Ref"]
        return ref


def synthesize(outdir: Path, context: dict[str, Any], env: cdk.Environment | None = None) -> Synth:
    """Synthesize the app (cdk-nag included: an unacknowledged error raises here) into ``outdir``."""
    app, stack = build_app({**project_context(), **SKIP_BUNDLING, **context}, env=env, outdir=str(outdir))
    app.synth()
    raw = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    return Synth(stack=stack, raw=raw, template=Template.from_json(raw), outdir=outdir)


def nag_violations(scope: Any) -> list[dict[str, Any]]:
    """cdk-nag's AwsSolutions findings on ``scope``, acknowledged ones excluded: rule, severity, where."""
    report = AwsSolutionsChecks(verbose=False).validate_scope(scope)
    return [
        {
            "rule": v.rule_name,
            "severity": v.severity,
            "where": [r.construct_path for r in v.violating_resources],
        }
        for v in report.violations
    ]
