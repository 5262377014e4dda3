"""jobsched: serverless distributed job scheduler."""
