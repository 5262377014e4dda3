"""The metric namespace comes from the deployment (the CDK stack names it after itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PRINT = (
    "import json; from jobsched import observability as o; "
    "print(json.dumps([o.NAMESPACE, o.metrics.namespace, o.metrics.provider.namespace]))"
)


def _namespaces(**env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k != "POWERTOOLS_METRICS_NAMESPACE"}
    out = subprocess.run(
        [sys.executable, "-c", _PRINT], env={**clean, **env}, capture_output=True, text=True, check=True
    ).stdout
    result: list[str] = json.loads(out)
    return result


def test_the_deployments_namespace_is_used() -> None:
    assert _namespaces(POWERTOOLS_METRICS_NAMESPACE="jobsched-staging") == ["jobsched-staging"] * 3


def test_without_one_the_namespace_is_jobsched() -> None:
    assert _namespaces() == ["jobsched"] * 3
