"""jobsched jobs as resources of a team's own CDK stack: ``from jobsched.cdk import Job``.

``Job`` needs the package's ``cdk`` extra (``pip install 'jobsched[cdk]'``: aws-cdk-lib and constructs) and is
imported on first use, so the provider's handler (:mod:`jobsched.cdk.provider`, which runs in a Lambda
function without the CDK) imports this package without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobsched.cdk.construct import Job

__all__ = ["Job"]


def __getattr__(name: str) -> Any:
    if name == "Job":
        from jobsched.cdk.construct import Job

        return Job
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
