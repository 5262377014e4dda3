"""cdk-nag (v3) acknowledgments: each one scoped to the construct it concerns, with its reason.

cdk-nag 3 runs as a CDK policy-validation plugin (``Validations.of(app).add_plugins``); a finding is
acknowledged with ``Validations.of(construct).acknowledge`` (the v3 form of v2's
``NagSuppressions.add_resource_suppressions``), which covers that construct and its children only.
Granular findings are acknowledged one by one: ``AwsSolutions-IAM5[Resource::<arn>]``.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Accept cdk-nag finding ``rule`` (e.g. ``AwsSolutions-L1``) on ``construct`` for ``reason``."""
    if not reason.strip():
        raise ValueError(f"a suppression of {rule} needs a reason")
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))
