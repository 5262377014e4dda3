"""The demo jobs of ``jobsched local --demo``: ``events/demo/*.json``, each a ``POST /jobs`` body.

The files live at the repository root (``events/demo``), found relative to this file. ``${API_URL}`` in
a file is replaced by the local API's URL (the health-check job calls the API itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEMO_DIR = Path(__file__).resolve().parents[3] / "events" / "demo"


def demo_jobs(api_url: str, folder: Path = DEMO_DIR) -> list[dict[str, Any]]:
    """The demo job bodies, by file name, with ``${API_URL}`` replaced. Empty when the folder is absent
    (an installed package without the repository). Raises ValueError for a file that is not a JSON object."""
    if not folder.is_dir():
        return []
    jobs: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        text = path.read_text(encoding="utf-8").replace("${API_URL}", api_url)
        body = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError(f"{path}: a demo job must be a JSON object")
        jobs.append(body)
    return jobs
