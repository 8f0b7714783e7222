from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vibesys.adapters.fake import FAKE_ENTRY
from vibesys.adapters.registry import register
from vibesys.journal_schema import Journal, open_journal

# The scripted fake adapter is an adapter like the others for the tests: one registry line.
register(FAKE_ENTRY)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    store = open_journal(tmp_path / "journal.db")
    yield store
    store.close()


def vibesys_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    """Run the real `vibesys` command in a subprocess, as a user would."""
    full_env = {**os.environ, **(env or {})}
    if "VIBESYS_FAILPOINTS" not in (env or {}):
        full_env.pop("VIBESYS_FAILPOINTS", None)
    return subprocess.run(
        [sys.executable, "-m", "vibesys", *args],
        cwd=cwd,
        env=full_env,
        text=True,
        capture_output=True,
        timeout=timeout,
        stdin=stdin,
    )
