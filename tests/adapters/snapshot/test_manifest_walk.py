"""What building a manifest records from the file system: symlinks (never followed, external
ones left out), special files and odd names, and candidates or files it cannot read."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.snapshot.helpers import paths, reasons, write
from tests.helpers.paths import ROOT
from vibesys.snapshot import (
    MARKER,
    CandidateError,
    EntryKind,
    ExclusionReason,
    SnapshotPolicy,
    build_manifest,
)


def test_symlinks_are_recorded_not_followed(tmp_path: Path) -> None:
    write(tmp_path, "pkg/model.py", b"W = 1\n")
    (tmp_path / "alias").symlink_to("pkg")  # a link to a directory: never walked
    (tmp_path / "dangling").symlink_to("missing/file")
    manifest = build_manifest(tmp_path)
    links = {e.path: e for e in manifest.entries if e.kind is EntryKind.SYMLINK}
    assert set(links) == {"alias", "dangling"}
    assert links["alias"].target == "pkg"
    assert links["alias"].sha256 == hashlib.sha256(b"pkg").hexdigest()
    assert links["alias"].mode_text == "120777"
    assert "alias/model.py" not in [e.path for e in manifest.entries]


def test_links_leaving_the_candidate_are_left_out_unless_allowed(tmp_path: Path) -> None:
    root = tmp_path / "c"
    write(root, "sub/x.py")
    (root / "abs").symlink_to("/etc/hostname")
    (root / "up").symlink_to("../outside")
    (root / "sub/hop").symlink_to("..")  # `sub/hop` is the root: inside
    # lexically inside (`sub/hop/..` is `sub`), but the file system resolves it to the parent
    (root / "sub/sneaky").symlink_to("hop/..")
    found = reasons(root)
    assert found == {
        "abs": ExclusionReason.EXTERNAL_SYMLINK,
        "up": ExclusionReason.EXTERNAL_SYMLINK,
        "sub/sneaky": ExclusionReason.EXTERNAL_SYMLINK,
    }
    allowed = paths(root, SnapshotPolicy(allow_external_symlinks=True))
    assert {"abs", "up", "sub/sneaky", "sub/hop"} <= set(allowed)


def test_special_files_odd_names_and_the_marker(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    write(tmp_path, MARKER)
    write(tmp_path, f"sub/{MARKER}")  # only the top-level name is reserved
    (tmp_path / os.fsdecode(b"latin1-\xe9.txt")).write_bytes(b"x")
    manifest = build_manifest(tmp_path)
    assert {item.path: item.reason for item in manifest.excluded} == {
        "pipe": ExclusionReason.SPECIAL_FILE,
        MARKER: ExclusionReason.RESERVED,
        os.fsdecode(b"latin1-\xe9.txt"): ExclusionReason.BAD_NAME,
    }
    assert [entry.path for entry in manifest.entries] == ["sub", f"sub/{MARKER}"]


def test_a_candidate_must_be_a_readable_directory(tmp_path: Path) -> None:
    with pytest.raises(CandidateError, match="No such file"):
        build_manifest(tmp_path / "missing")
    write(tmp_path, "file")
    with pytest.raises(CandidateError, match="not a directory"):
        build_manifest(tmp_path / "file")


#: Builds a manifest in a fresh interpreter and prints what happened as JSON. The modules come
#: as arguments so that this follows the code wherever it lives.
MANIFEST_AS_ANOTHER_USER = """
import importlib, json, os, sys
build_manifest = getattr(importlib.import_module(sys.argv[1]), "build_manifest")
CandidateError = getattr(importlib.import_module(sys.argv[2]), "CandidateError")
try:
    result = {"paths": [entry.path for entry in build_manifest(sys.argv[3]).entries]}
except CandidateError as error:
    result = {"error": str(error)}
print(json.dumps({"euid": os.geteuid(), **result}))
"""


def throwaway_id() -> int:
    """A uid (and the same gid) that names no user or group on this machine."""
    import grp
    import pwd

    taken = {user.pw_uid for user in pwd.getpwall()} | {group.gr_gid for group in grp.getgrall()}
    return next(n for n in range(61000, 65000) if n not in taken)


def manifest_as_unprivileged_user(root: Path) -> dict[str, Any]:
    """build_manifest(root) run as a user who is not root: as ourselves when we are not root,
    else (CI runs as root, who reads every file) as a throwaway uid with no groups."""
    argv = [
        sys.executable,
        "-c",
        MANIFEST_AS_ANOTHER_USER,
        build_manifest.__module__,
        CandidateError.__module__,
        str(root),
    ]
    if os.geteuid() == 0:
        ident = throwaway_id()
        argv = ["setpriv", f"--reuid={ident}", f"--regid={ident}", "--clear-groups", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, cwd=root, env=env
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result.pop("euid") != 0
    return result


@pytest.fixture
def world_readable_tmp() -> Iterator[Path]:
    # pytest's tmp_path lies under a 0700 directory of root's that another user cannot enter.
    directory = Path(tempfile.mkdtemp(prefix="vibesys-unreadable-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


def test_an_unreadable_file_fails_loudly(world_readable_tmp: Path) -> None:
    root = world_readable_tmp / "candidate"
    for directory in (root, root / "pkg"):
        directory.mkdir()
        directory.chmod(0o755)
    write(root, "ok.py")
    secret = write(root, "pkg/secret.py", mode=0o644)
    # The same user reads the whole tree while every file is readable...
    assert manifest_as_unprivileged_user(root) == {"paths": ["ok.py", "pkg", "pkg/secret.py"]}
    # ... and is told which file it cannot read, instead of a snapshot without it.
    secret.chmod(0o000)
    result = manifest_as_unprivileged_user(root)
    assert set(result) == {"error"}, result
    assert "pkg/secret.py" in result["error"]


def test_the_top_directory_may_be_a_symlink(tmp_path: Path, candidate: Path) -> None:
    (tmp_path / "via-link").symlink_to(candidate)
    assert build_manifest(tmp_path / "via-link") == build_manifest(candidate)
