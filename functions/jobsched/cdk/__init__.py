"""jobsched jobs as resources of a team's own CDK stack: ``from jobsched.cdk import Job`` (and ``JobProvider``,
the stack's provider, to tag its role).

Both need the package's ``cdk`` extra (``pip install 'jobsched[cdk]'``: aws-cdk-lib and constructs) and are
imported on first use, so the provider's handler (:mod:`jobsched.cdk.provider`, which runs in a Lambda
function without the CDK) imports this package without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobsched.cdk.construct import Job, JobProvider

__all__ = ["Job", "JobProvider"]


def __getattr__(name: str) -> Any:
    if name == "Job":
        from jobsched.cdk.construct import Job

        return Job
    if name == "JobProvider":
        from jobsched.cdk.construct import JobProvider

        return JobProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
