"""Infrastructure tests: make the repository root importable (``infra`` sits next to app.py, outside the
installed package) and silence jsii's Node 20 banner, before any test module imports aws_cdk.

Synth helpers live in ``tests/infra/support.py``; each test module synthesizes once (module-scoped), and the
stack with the default settings once per process (:func:`default_synth`; tests only read a synth).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# jsii prints a banner on every start under Node 20; the Makefile silences it the same way.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The stack synthesized with the project's context and no settings (read only: shared by the modules)."""
    from tests.infra.support import synthesize

    return synthesize(tmp_path_factory.mktemp("cdk-out-default"), {})
