"""``app.py``, the entry point ``cdk synth`` / ``cdk deploy`` runs: a bad ``-c`` value stops it with one line
naming the context key (exit status 2), not a Python traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.infra.support import ROOT


def test_a_bad_context_value_stops_the_app_with_one_line_naming_it(tmp_path: Path) -> None:
    # The CDK CLI hands `-c scheduler_partitions=0` to the app as CDK_CONTEXT_JSON.
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"scheduler_partitions": "0"}),
        "CDK_OUTDIR": str(tmp_path),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "scheduler_partitions" in lines[0], result.stderr
