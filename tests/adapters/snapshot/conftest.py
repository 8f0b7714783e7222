"""The candidate most snapshot tests stage: code, an empty directory, a symlink, and one file
of each default exclusion."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adapters.snapshot.helpers import write


@pytest.fixture
def candidate(tmp_path: Path) -> Path:
    root = tmp_path / "candidate"
    write(root, "train.py", b"print('train')\n")
    write(root, "bin/run.sh", b"#!/bin/sh\necho run\n", 0o755)
    write(root, "pkg/__init__.py", b"")
    write(root, "pkg/model.py", b"W = 1\n")
    (root / "outputs").mkdir()
    (root / "latest").symlink_to("pkg/model.py")
    write(root, ".env", b"TOKEN=secret\n")
    write(root, ".git/HEAD", b"ref: refs/heads/main\n")
    write(root, "pkg/__pycache__/model.cpython-311.pyc", b"\0")
    write(root, "train.log", b"epoch 1\n")
    return root
