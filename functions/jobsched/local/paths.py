"""Where local mode keeps its files, shared by ``jobsched local`` (the writer) and the CLI (the reader).

Kept apart from ``local.runtime`` so the CLI finds the dev token without importing the local runtime
(boto3, the embedded moto wiring).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_DATA_DIR", "DEV_TOKEN_FILE"]

DEFAULT_DATA_DIR = Path(".jobsched")
"""``jobsched local --data-dir`` default, relative to the working directory: state, tokens, logs."""

DEV_TOKEN_FILE = "dev-token"
"""File name, in the data dir, of the generated dev token (owner ``local``); the CLI's default token."""
