#!/usr/bin/env python3
"""CDK entry point (``npx cdk synth`` / ``npx cdk deploy``): the jobsched stack, checked by cdk-nag.

Knobs are CDK context (``-c scheduler_partitions=4``); see ``infra/config.py`` and docs/deploy.md.
"""

from __future__ import annotations

import os
import sys

import aws_cdk as cdk

from infra.config import ConfigError
from infra.stack import build_app

# Account and region from the CLI's credentials when there are any; without credentials the stack is
# environment-agnostic and still synthesizes.
environment = cdk.Environment(
    account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
)
try:
    app, _ = build_app(env=environment)
except ConfigError as error:  # a bad `-c key=value`: one line naming the key, exit status 2 (no traceback)
    print(f"jobsched: {error}", file=sys.stderr)
    sys.exit(2)
app.synth()
