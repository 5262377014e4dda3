"""The one place that creates the Powertools Logger and Metrics (no X-Ray SDK in the asset: no Tracer).

Log with keyword fields (``logger.info("run enqueued", job_id=..., run_id=...)``), not f-strings.
Metrics go out as CloudWatch EMF under the ``jobsched`` namespace.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

SERVICE = "jobsched"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="jobsched", service=SERVICE)
