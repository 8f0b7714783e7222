"""The snapshot digest: its documented encoding and a known answer, what changes it and what
does not, and the dry-run listing of a manifest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.snapshot.helpers import EMPTY_SHA, write
from vibesys.snapshot import (
    EntryKind,
    Manifest,
    ManifestEntry,
    build_manifest,
    compute_digest,
    render_manifest_text,
)


def test_digest_encoding_is_the_documented_bytes() -> None:
    entries = (
        ManifestEntry("b/run sh\n", EntryKind.FILE, 0o755, 2, hashlib.sha256(b"hi").hexdigest()),
        ManifestEntry("b", EntryKind.DIRECTORY, 0o755, 0, EMPTY_SHA),
        ManifestEntry("a", EntryKind.SYMLINK, 0o777, 1, hashlib.sha256(b"b").hexdigest(), "b"),
        ManifestEntry("é", EntryKind.FILE, 0o644, 0, EMPTY_SHA),
    )
    expected = hashlib.sha256(
        b"vibesys-snapshot-v1\0"
        + b"a\x00120777\x00" + hashlib.sha256(b"b").hexdigest().encode() + b"\0"
        + b"b\x00040755\x00" + EMPTY_SHA.encode() + b"\0"
        + b"b/run sh\n\x00100755\x00" + hashlib.sha256(b"hi").hexdigest().encode() + b"\0"
        + "é".encode() + b"\x00100644\x00" + EMPTY_SHA.encode() + b"\0"
    ).hexdigest()  # fmt: skip
    assert compute_digest(entries) == expected
    assert Manifest(entries).digest == expected
    assert [entry.path for entry in Manifest(entries).entries] == ["a", "b", "b/run sh\n", "é"]


def test_digest_known_answer(tmp_path: Path) -> None:
    """Pins format v1 (changing the encoding must change this test on purpose). The expected
    value was computed independently of vibesys with coreutils:
        printf '%s\\0' vibesys-snapshot-v1 a.py 100644 "$(printf 'print(1)\\n' | sha256sum)" ...
    with each HASH cut to its 64 hex digits, piped into sha256sum."""
    write(tmp_path, "a.py", b"print(1)\n")
    write(tmp_path, "bin/go", b"#!/bin/sh\n", 0o755)
    (tmp_path / "link").symlink_to("a.py")
    assert build_manifest(tmp_path).digest == (
        "66643eebfbbfdc6ccf3df36567b0fda48fb7b71ea3129b301a746d918fac79b6"
    )


def test_same_tree_same_digest_whatever_the_order_times_and_other_permission_bits(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    files = [("z.py", b"z", 0o644), ("a/b.py", b"b", 0o755), ("a/c/d.txt", b"", 0o644)]
    for relative, data, mode in files:
        write(first, relative, data, mode)
    for relative, data, mode in reversed(files):
        # group/other bits differ: only the owner-execute bit is part of a snapshot
        write(second, relative, data, 0o700 if mode == 0o755 else 0o600)
    os.utime(second / "z.py", (0, 0))

    # The digest both trees must have, from the documented encoding (sorted paths; directories
    # 040755, files 100644 or 100755 by the owner-execute bit; a directory's hash is empty).
    def record(path: str, mode: str, data: bytes) -> bytes:
        return f"{path}\0{mode}\0{hashlib.sha256(data).hexdigest()}\0".encode()

    expected = hashlib.sha256(
        b"vibesys-snapshot-v1\0"
        + record("a", "040755", b"")
        + record("a/b.py", "100755", b"b")
        + record("a/c", "040755", b"")
        + record("a/c/d.txt", "100644", b"")
        + record("z.py", "100644", b"z")
    ).hexdigest()
    assert build_manifest(first).digest == expected
    assert build_manifest(second).digest == expected


def _mutations() -> dict[str, Any]:
    def content(root: Path) -> None:
        (root / "train.py").write_bytes(b"print('train!')\n")

    def mode(root: Path) -> None:
        (root / "train.py").chmod(0o755)

    def rename(root: Path) -> None:
        (root / "train.py").rename(root / "train2.py")

    def add_file(root: Path) -> None:
        write(root, "pkg/new.py", b"")

    def add_dir(root: Path) -> None:
        (root / "pkg" / "empty").mkdir()

    def retarget(root: Path) -> None:
        (root / "latest").unlink()
        (root / "latest").symlink_to("train.py")

    def remove(root: Path) -> None:
        (root / "pkg/__init__.py").unlink()

    return {f.__name__: f for f in (content, mode, rename, add_file, add_dir, retarget, remove)}


@pytest.mark.parametrize("change", sorted(_mutations()))
def test_every_change_to_an_included_entry_changes_the_digest(candidate: Path, change: str) -> None:
    before = build_manifest(candidate).digest
    _mutations()[change](candidate)
    assert build_manifest(candidate).digest != before


def test_changes_to_excluded_entries_do_not(candidate: Path) -> None:
    before = build_manifest(candidate)
    (candidate / ".env").write_bytes(b"TOKEN=other\n")
    write(candidate, ".git/objects/ab", b"blob")
    (candidate / "train.log").write_bytes(b"epoch 2\n")
    write(candidate, "pkg/__pycache__/x.pyc", b"\1")
    after = build_manifest(candidate)
    assert after.digest == before.digest
    assert after == before


def test_dry_run_listing(candidate: Path) -> None:
    write(candidate, "odd\nname.py")
    manifest = build_manifest(candidate)
    text = render_manifest_text(manifest)
    assert text.startswith(f"snapshot {manifest.digest}\n")
    assert "5 files, 3 directories, 1 symlink, 41 B of content" in text
    assert "100755" in text and "bin/run.sh" in text
    assert "latest -> pkg/model.py" in text
    assert "'odd\\nname.py'" in text  # one entry, one line
    for reason, name in [
        ("credentials", ".env"),
        ("vcs", ".git/"),
        ("cache", "pkg/__pycache__/"),
        ("log", "train.log"),
    ]:
        line = next(line for line in text.splitlines() if line.strip().startswith(reason))
        assert name in line and "matches" in line, line
    summary = render_manifest_text(manifest, entries=False)
    assert "included" not in summary and "excluded (4)" in summary
