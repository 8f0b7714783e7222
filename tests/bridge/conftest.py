"""Fixtures of the bridge tests: a bridge served in the test's process (tests/bridge/helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.helpers import Bridge, make_bridge


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "eval.py").write_text("print('accuracy 0.93')\n")
    return root


@pytest.fixture
def bridge(tmp_path: Path, workspace: Path) -> Iterator[Bridge]:
    served, stop = make_bridge(tmp_path, workspace)
    yield served
    stop.set()
    served.runner.close("the test is over", 30)
    served.server.close()
