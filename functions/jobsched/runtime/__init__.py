"""The runtimes: the composition root (``wiring``) and each Lambda's long-lived part (scheduler, worker, sweeper)."""
