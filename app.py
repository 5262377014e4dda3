#!/usr/bin/env python3
"""CDK entry point (``npx cdk synth`` / ``npx cdk deploy``): the jobsched stack, checked by cdk-nag.

Knobs are CDK context (``-c scheduler_partitions=4``); see ``infra/config.py`` and docs/deploy.md.
"""

from __future__ import annotations

import os

import aws_cdk as cdk

from infra.stack import build_app

# Account and region from the CLI's credentials when there are any; without credentials the stack is
# environment-agnostic and still synthesizes.
environment = cdk.Environment(
    account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
)
app, _ = build_app(env=environment)
app.synth()
