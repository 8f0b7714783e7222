"""What a snapshot leaves out: the default exclusions, the size limit, extra patterns, includes
that override them, and the policy's validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.adapters.snapshot.helpers import paths, reasons, write
from vibesys.snapshot import (
    DEFAULT_EXCLUSIONS,
    EntryKind,
    ExclusionReason,
    SnapshotPolicy,
    build_manifest,
)

DEFAULT_CASES = [
    (".ssh/config", ".ssh", ExclusionReason.CREDENTIALS),
    ("id_rsa", "id_rsa", ExclusionReason.CREDENTIALS),
    ("keys/id_rsa.pub", "keys/id_rsa.pub", ExclusionReason.CREDENTIALS),
    ("id_ed25519", "id_ed25519", ExclusionReason.CREDENTIALS),
    ("id_ecdsa", "id_ecdsa", ExclusionReason.CREDENTIALS),
    ("tls/server.pem", "tls/server.pem", ExclusionReason.CREDENTIALS),
    ("tls/server.key", "tls/server.key", ExclusionReason.CREDENTIALS),
    ("cert.p12", "cert.p12", ExclusionReason.CREDENTIALS),
    (".env", ".env", ExclusionReason.CREDENTIALS),
    ("deploy/.env.production", "deploy/.env.production", ExclusionReason.CREDENTIALS),
    (".netrc", ".netrc", ExclusionReason.CREDENTIALS),
    (".pypirc", ".pypirc", ExclusionReason.CREDENTIALS),
    ("credentials.json", "credentials.json", ExclusionReason.CREDENTIALS),
    (".git/HEAD", ".git", ExclusionReason.VCS),
    ("vendor/lib/.git", "vendor/lib/.git", ExclusionReason.VCS),  # a submodule's .git file
    (".hg/store", ".hg", ExclusionReason.VCS),
    (".svn/entries", ".svn", ExclusionReason.VCS),
    (".vibesys/journal.db", ".vibesys", ExclusionReason.VIBESYS_STATE),
    ("a/b/__pycache__/m.pyc", "a/b/__pycache__", ExclusionReason.CACHE),
    (".pytest_cache/v", ".pytest_cache", ExclusionReason.CACHE),
    (".mypy_cache/x", ".mypy_cache", ExclusionReason.CACHE),
    (".ruff_cache/x", ".ruff_cache", ExclusionReason.CACHE),
    ("web/node_modules/x/y.js", "web/node_modules", ExclusionReason.CACHE),
    (".venv/bin/python", ".venv", ExclusionReason.CACHE),
    ("venv/lib/x.py", "venv", ExclusionReason.CACHE),
    ("old/module.pyc", "old/module.pyc", ExclusionReason.CACHE),
    ("train.log", "train.log", ExclusionReason.LOG),
    ("runs/1/eval.log", "runs/1/eval.log", ExclusionReason.LOG),
]


@pytest.mark.parametrize(("written", "excluded", "reason"), DEFAULT_CASES)
def test_default_exclusions(
    tmp_path: Path, written: str, excluded: str, reason: ExclusionReason
) -> None:
    write(tmp_path, written)
    write(tmp_path, "keep.py")
    manifest = build_manifest(tmp_path)
    assert reasons(tmp_path)[excluded] is reason
    assert "keep.py" in [entry.path for entry in manifest.entries]
    assert not any(entry.path.startswith(excluded) for entry in manifest.entries)


def test_every_default_category_is_documented() -> None:
    assert set(DEFAULT_EXCLUSIONS) == {
        ExclusionReason.CREDENTIALS,
        ExclusionReason.VCS,
        ExclusionReason.VIBESYS_STATE,
        ExclusionReason.CACHE,
        ExclusionReason.LOG,
    }


def test_an_excluded_directory_is_one_line_and_is_not_walked(tmp_path: Path) -> None:
    for index in range(5):
        write(tmp_path, f".git/objects/{index}")
    manifest = build_manifest(tmp_path)
    assert [(item.path, item.kind, item.detail) for item in manifest.excluded] == [
        (".git", EntryKind.DIRECTORY, "matches '.git'")
    ]


def test_directory_only_patterns_leave_files_of_that_name_alone(tmp_path: Path) -> None:
    write(tmp_path, "venv")  # a file, not a directory: `venv/` does not apply
    write(tmp_path, "node_modules")
    assert paths(tmp_path) == ["node_modules", "venv"]


def test_size_limit(tmp_path: Path) -> None:
    write(tmp_path, "small.bin", b"x" * 100)
    write(tmp_path, "weights.bin", b"x" * 101)
    manifest = build_manifest(tmp_path, SnapshotPolicy(max_file_bytes=100))
    assert [entry.path for entry in manifest.entries] == ["small.bin"]
    (item,) = manifest.excluded
    assert (item.path, item.reason) == ("weights.bin", ExclusionReason.TOO_LARGE)
    assert item.detail == "101 B over the 100 B limit"


def test_default_size_limit_is_50_mib(tmp_path: Path) -> None:
    assert SnapshotPolicy().max_file_bytes == 50 * 1024 * 1024
    with open(tmp_path / "model.safetensors", "wb") as handle:
        handle.truncate(50 * 1024 * 1024 + 1)  # sparse: no disk used
    assert reasons(tmp_path) == {"model.safetensors": ExclusionReason.TOO_LARGE}


@pytest.mark.parametrize(
    ("pattern", "excluded", "kept"),
    [
        ("*.ckpt", ["a.ckpt", "deep/er/b.ckpt"], ["a.ckpt.py"]),
        ("/build", ["build"], ["src/build"]),
        ("data/*.csv", ["data/a.csv"], ["data/sub/b.csv", "other/data/a.csv"]),
        ("docs/**/*.pdf", ["docs/a.pdf", "docs/x/y/b.pdf"], ["docs/a.pdfx", "a.pdf"]),
        ("[0-9]*.tmp", ["1.tmp", "d/9x.tmp"], ["x1.tmp"]),
        ("scratch?", ["scratch1", "d/scratchA"], ["scratch", "scratch12"]),
        ("[!a]*.out", ["b.out"], ["a.out"]),
    ],
)
def test_extra_exclude_patterns(
    tmp_path: Path, pattern: str, excluded: list[str], kept: list[str]
) -> None:
    for relative in excluded + kept:
        write(tmp_path, relative)
    found = reasons(tmp_path, SnapshotPolicy(exclude=(pattern,)))
    for relative in excluded:
        assert found.get(relative) is ExclusionReason.PATTERN, (relative, found)
    included = paths(tmp_path, SnapshotPolicy(exclude=(pattern,)))
    for relative in kept:
        assert relative in included, (relative, included)


def test_anchored_directory_pattern(tmp_path: Path) -> None:
    write(tmp_path, "out/a.bin")
    write(tmp_path, "src/out/b.py")
    write(tmp_path, "notes/out")
    policy = SnapshotPolicy(exclude=("/out/",))
    assert reasons(tmp_path, policy) == {"out": ExclusionReason.PATTERN}
    assert "src/out/b.py" in paths(tmp_path, policy) and "notes/out" in paths(tmp_path, policy)


def test_include_overrides_a_default_exclusion_but_not_the_size_limit(tmp_path: Path) -> None:
    write(tmp_path, ".env")
    write(tmp_path, ".env.example")
    write(tmp_path, "big.log", b"x" * 10)
    policy = SnapshotPolicy(include=(".env.example", "*.log"), max_file_bytes=5)
    assert paths(tmp_path, policy) == [".env.example"]
    assert reasons(tmp_path, policy) == {
        ".env": ExclusionReason.CREDENTIALS,
        "big.log": ExclusionReason.TOO_LARGE,
    }


def test_including_an_excluded_directory_walks_it(tmp_path: Path) -> None:
    write(tmp_path, "node_modules/lib/index.js")
    write(tmp_path, "node_modules/lib/.env")
    policy = SnapshotPolicy(include=("node_modules/",))
    assert paths(tmp_path, policy) == [
        "node_modules",
        "node_modules/lib",
        "node_modules/lib/index.js",
    ]


def test_policy_is_strict_frozen_config() -> None:
    assert SnapshotPolicy.model_validate({"exclude": ["*.ckpt"]}).exclude == ("*.ckpt",)
    with pytest.raises(ValidationError):
        SnapshotPolicy.model_validate({"exlude": ["*.ckpt"]})
    with pytest.raises(ValidationError):
        SnapshotPolicy.model_validate({"max_file_bytes": "5"})
    with pytest.raises(ValidationError):
        SnapshotPolicy(max_file_bytes=-1)
    for bad in ["!keep.py", "", "/", "a/../b", "a//b", "x\0y"]:
        with pytest.raises(ValidationError):
            SnapshotPolicy(exclude=(bad,))
    with pytest.raises(ValidationError):
        SnapshotPolicy().max_file_bytes = 1
