"""Candidate snapshots: exclusions, the digest, the remote verifier, staging through a real
LocalTransport into a scratch "remote" directory, and the wrapper's copy and verify argv."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from vibesys.adapters.staging import (
    VERIFY_MISMATCH_EXIT,
    SnapshotMismatch,
    StageOutcome,
    StagingFailed,
    copy_command,
    snapshot_path,
    stage,
    verify_command,
    verify_script,
)
from vibesys.adapters.transports import CommandResult, LocalTransport, Runner, shell_join
from vibesys.adapters.transports.base import Sink
from vibesys.errors import BackendUnavailable, UsageError
from vibesys.snapshot import (
    DEFAULT_EXCLUSIONS,
    MARKER,
    CandidateError,
    EntryKind,
    ExclusionReason,
    Manifest,
    ManifestEntry,
    SnapshotPolicy,
    _remote,
    build_manifest,
    compute_digest,
    render_manifest_text,
)

#: A policy that leaves nothing out (but structural rules): the verifier has no exclusions.
EVERYTHING = SnapshotPolicy(include=("*",), allow_external_symlinks=True)
EMPTY_SHA = hashlib.sha256(b"").hexdigest()


def write(root: Path, relative: str, data: bytes = b"x", mode: int = 0o644) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def reasons(root: Path, policy: SnapshotPolicy | None = None) -> dict[str, ExclusionReason]:
    return {item.path: item.reason for item in build_manifest(root, policy).excluded}


def paths(root: Path, policy: SnapshotPolicy | None = None) -> list[str]:
    return [entry.path for entry in build_manifest(root, policy).entries]


def verify(directory: Path | str, digest: str, cwd: Path | None = None) -> CompletedVerify:
    done = subprocess.run(
        verify_command(str(directory), digest, python=sys.executable),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return CompletedVerify(done.returncode, done.stderr)


class CompletedVerify:
    def __init__(self, returncode: int, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr


def remote_digest(directory: Path) -> str:
    return _remote.digest_of(_remote.tree_records(os.fsencode(directory)))


def runner() -> LocalTransport:
    return LocalTransport()


def stage_into(manifest: Manifest, root: Path, remote: Path, **options: Any) -> Any:
    return stage(manifest, root, runner(), PurePosixPath(remote), python=sys.executable, **options)


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


# -- exclusions ------------------------------------------------------------------------------

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
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
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


# -- the digest -------------------------------------------------------------------------------


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


# -- the remote verifier ----------------------------------------------------------------------


def test_the_verifier_is_python_3_6_syntax_and_stdlib_only() -> None:
    source = verify_script()
    tree = ast.parse(source, feature_version=(3, 6))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.module != "__future__", "annotations would not run on 3.6"
            imported.add((node.module or "").split(".")[0])
    assert imported <= sys.stdlib_module_names, imported - sys.stdlib_module_names
    # Annotations Python evaluates at definition time must be strings (no `list[str]` on 3.6).
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for annotation in [node.returns, *(a.annotation for a in node.args.args)]:
                if isinstance(annotation, ast.Subscript | ast.BinOp):
                    raise AssertionError(f"{node.name}: unquoted generic annotation")


def test_verifier_agrees_and_exits_zero(tmp_path: Path, candidate: Path) -> None:
    remote = tmp_path / "remote"
    manifest = build_manifest(candidate)
    result = stage_into(manifest, candidate, remote)
    done = verify(result.snapshot_dir, manifest.digest)
    assert (done.returncode, done.stderr) == (0, "")
    assert remote_digest(Path(result.snapshot_dir)) == manifest.digest


def test_verifier_runs_from_a_file_too(tmp_path: Path, candidate: Path) -> None:
    manifest = build_manifest(candidate)
    result = stage_into(manifest, candidate, tmp_path / "remote")
    script = tmp_path / "verify.py"
    script.write_text(verify_script(), encoding="utf-8")
    argv = [sys.executable, "-I", str(script), str(result.snapshot_dir), manifest.digest]
    assert subprocess.run(argv, check=False, timeout=60).returncode == 0


def _tampers() -> dict[str, Any]:
    def changed_byte(root: Path) -> None:
        path = root / "pkg/model.py"
        data = bytearray(path.read_bytes())
        data[0] ^= 1
        path.write_bytes(bytes(data))

    def extra_file(root: Path) -> None:
        write(root, "pkg/injected.py")

    def extra_empty_dir(root: Path) -> None:
        (root / "pkg/extra").mkdir()

    def missing_file(root: Path) -> None:
        (root / "train.py").unlink()

    def missing_dir(root: Path) -> None:
        (root / "outputs").rmdir()

    def mode_change(root: Path) -> None:
        (root / "bin/run.sh").chmod(0o644)

    def file_became_link(root: Path) -> None:
        (root / "train.py").unlink()
        (root / "train.py").symlink_to("pkg/model.py")

    def link_retargeted(root: Path) -> None:
        (root / "latest").unlink()
        (root / "latest").symlink_to("train.py")

    def marker_below_top(root: Path) -> None:
        write(root, f"pkg/{MARKER}")

    def fifo(root: Path) -> None:
        os.mkfifo(root / "pkg/pipe")

    tampers = [changed_byte, extra_file, extra_empty_dir, missing_file, missing_dir, mode_change]
    tampers += [file_became_link, link_retargeted, marker_below_top, fifo]
    return {f.__name__: f for f in tampers}


@pytest.mark.parametrize("tamper", sorted(_tampers()))
def test_verifier_detects_tampering(tmp_path: Path, candidate: Path, tamper: str) -> None:
    manifest = build_manifest(candidate)
    snapshot = Path(stage_into(manifest, candidate, tmp_path / "remote").snapshot_dir)
    _tampers()[tamper](snapshot)
    done = verify(snapshot, manifest.digest)
    assert done.returncode == VERIFY_MISMATCH_EXIT == 86
    assert done.stderr.startswith("vibesys-snapshot: digest mismatch: ")
    assert done.stderr.count("\n") == 1


def test_verifier_ignores_only_the_top_level_marker_and_mtimes(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    snapshot = Path(stage_into(manifest, candidate, tmp_path / "remote").snapshot_dir)
    (snapshot / MARKER).write_text("anything\n")
    os.utime(snapshot / "train.py", (0, 0))
    assert verify(snapshot, manifest.digest).returncode == 0


def test_verifier_on_a_missing_directory_and_bad_arguments(tmp_path: Path) -> None:
    assert verify(tmp_path / "missing", "0" * 64).returncode == 86
    write(tmp_path, "file")
    assert verify(tmp_path / "file", "0" * 64).returncode == 86
    bad = [sys.executable, "-I", "-c", verify_script(), str(tmp_path), "NOTHEX"]
    assert subprocess.run(bad, capture_output=True, check=False).returncode == 2
    with pytest.raises(UsageError):
        verify_command("/x", "NOTHEX")
    with pytest.raises(UsageError):
        verify_command("relative/dir", "0" * 64)


def test_verifier_cannot_be_fooled_by_the_candidates_own_modules(
    tmp_path: Path, candidate: Path
) -> None:
    """`-I`: a `hashlib.py` in the working directory (the job runs in the candidate) or on
    PYTHONPATH is not imported by the verifier."""
    manifest = build_manifest(candidate)
    snapshot = Path(stage_into(manifest, candidate, tmp_path / "remote").snapshot_dir)
    (snapshot / "train.py").write_bytes(b"import os; os.system('evil')\n")
    fake = "import sys\nsys.stdout.write('fake')\nsys.exit(0)\n"
    (snapshot / "hashlib.py").write_text(fake)
    (snapshot / "re.py").write_text(fake)
    done = subprocess.run(
        verify_command(str(snapshot), manifest.digest, python=sys.executable),
        cwd=snapshot,
        env={**os.environ, "PYTHONPATH": str(snapshot)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 86 and "fake" not in done.stdout


NAME = st.text(
    st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1, max_size=10
).filter(lambda name: name not in (".", "..", MARKER))
MODE = st.sampled_from([0o644, 0o600, 0o640, 0o755, 0o700, 0o750])
LEAF = st.one_of(
    st.tuples(st.just("file"), st.binary(max_size=300), MODE),
    st.tuples(st.just("link"), st.one_of(NAME, st.just("../sibling"), st.just("."))),
)
TREE = st.dictionaries(
    NAME,
    st.recursive(
        LEAF, lambda children: st.dictionaries(NAME, children, max_size=4).map(lambda d: ("dir", d))
    ),
    max_size=6,
)


def materialize(root: Path, tree: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, node in tree.items():
        path = root / name
        if node[0] == "dir":
            materialize(path, node[1])
        elif node[0] == "file":
            path.write_bytes(node[1])
            path.chmod(node[2])
        else:
            path.symlink_to(node[1])


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREE)
def test_local_digest_equals_the_verifiers_on_random_trees(tree: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "c"
        materialize(root, tree)
        manifest = build_manifest(root, EVERYTHING)
        # nothing was left out, so the verifier's walk of the same directory must agree
        assert manifest.excluded == ()
        assert remote_digest(root) == manifest.digest


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREE)
def test_staged_random_trees_verify_remotely(tree: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "c"
        materialize(root, tree)
        manifest = build_manifest(root)
        result = stage_into(manifest, root, Path(scratch) / "remote")
        assert verify(result.snapshot_dir, manifest.digest).returncode == 0
        staged = build_manifest(Path(result.snapshot_dir), EVERYTHING)
        assert staged.entries == manifest.entries


# -- staging ----------------------------------------------------------------------------------


def test_first_stage_uploads_and_an_unchanged_restage_uploads_nothing(
    tmp_path: Path, candidate: Path
) -> None:
    remote = tmp_path / "remote"
    manifest = build_manifest(candidate)
    first = stage_into(manifest, candidate, remote)
    assert first.outcome is StageOutcome.UPLOADED and not first.reused
    assert first.uploaded_bytes > 0 and first.commands == 2
    assert first.snapshot_dir == PurePosixPath(remote / "snapshots" / manifest.digest)
    assert first.snapshot_dir == snapshot_path(PurePosixPath(remote), manifest.digest)
    snapshot = Path(first.snapshot_dir)
    assert (snapshot / MARKER).read_text() == manifest.digest + "\n"
    assert (snapshot / "bin/run.sh").stat().st_mode & 0o777 == 0o755
    assert (snapshot / "train.py").stat().st_mode & 0o777 == 0o644
    assert os.readlink(snapshot / "latest") == "pkg/model.py"
    assert (snapshot / "outputs").is_dir()
    assert not (snapshot / ".env").exists() and not (snapshot / ".git").exists()
    assert sorted(p.name for p in (remote / "snapshots").iterdir()) == [manifest.digest]

    second = stage_into(build_manifest(candidate), candidate, remote)
    assert second.outcome is StageOutcome.REUSED and second.reused
    assert (second.uploaded_bytes, second.commands) == (0, 1)
    assert "reused" in second.evidence


def test_a_changed_candidate_gets_its_own_snapshot(tmp_path: Path, candidate: Path) -> None:
    remote = tmp_path / "remote"
    old = stage_into(build_manifest(candidate), candidate, remote)
    (candidate / "train.py").write_bytes(b"print('v2')\n")
    new = stage_into(build_manifest(candidate), candidate, remote)
    assert new.outcome is StageOutcome.UPLOADED and new.digest != old.digest
    assert verify(old.snapshot_dir, old.digest).returncode == 0  # immutable: still there


def test_large_candidates_go_up_in_bounded_pieces(tmp_path: Path) -> None:
    root = tmp_path / "c"
    for index in range(20):
        write(root, f"f{index}.bin", os.urandom(10_000))
    manifest = build_manifest(root)
    result = stage_into(manifest, root, tmp_path / "remote", chunk_bytes=64 * 1024)
    assert result.commands == 1 + -(-result.uploaded_bytes // (64 * 1024))
    assert verify(result.snapshot_dir, manifest.digest).returncode == 0
    assert not list((tmp_path / "remote" / "snapshots").glob(".incoming-*"))


def test_a_tampered_snapshot_is_quarantined_and_staged_again(
    tmp_path: Path, candidate: Path
) -> None:
    remote = tmp_path / "remote"
    manifest = build_manifest(candidate)
    snapshot = Path(stage_into(manifest, candidate, remote).snapshot_dir)
    (snapshot / "train.py").write_bytes(b"print('tampered')\n")
    again = stage_into(manifest, candidate, remote)
    assert again.outcome is StageOutcome.REPLACED and again.uploaded_bytes > 0
    assert again.quarantined is not None
    assert Path(again.quarantined, "train.py").read_bytes() == b"print('tampered')\n"
    assert "did not verify" in again.evidence and str(again.quarantined) in again.evidence
    assert (snapshot / "train.py").read_bytes() == b"print('train')\n"
    assert verify(snapshot, manifest.digest).returncode == 0


def test_something_else_in_the_snapshots_place_is_quarantined(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    snapshots = tmp_path / "remote" / "snapshots"
    write(snapshots, manifest.digest, b"not a directory")
    result = stage_into(manifest, candidate, tmp_path / "remote")
    assert result.outcome is StageOutcome.REPLACED
    assert verify(result.snapshot_dir, manifest.digest).returncode == 0


class GatedRunner:
    """LocalTransport, except each thread waits at a barrier before its first upload: both
    stagers have probed (and found nothing) before either installs."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.inner = LocalTransport()
        self.barrier = barrier
        self.local = threading.local()

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
    ) -> CommandResult:
        if argv[4] in ("--append", "--install") and not getattr(self.local, "passed", False):
            self.local.passed = True
            self.barrier.wait(timeout=60)
        return self.inner.run(argv, input=input, timeout=timeout, maybe_effect=maybe_effect)

    def stream(
        self, argv: Sequence[str], sink: Sink, *, timeout: float | None = None
    ) -> CommandResult:
        return self.inner.stream(argv, sink, timeout=timeout)


@pytest.mark.parametrize("gated", [True, False])
def test_concurrent_stagers_of_one_digest_end_with_one_good_snapshot(
    tmp_path: Path, candidate: Path, gated: bool
) -> None:
    remote = PurePosixPath(tmp_path / "remote")
    manifest = build_manifest(candidate)
    barrier = threading.Barrier(2)
    results: list[Any] = []
    errors: list[BaseException] = []

    def one() -> None:
        transport: Runner = LocalTransport()
        if gated:
            transport = GatedRunner(barrier)
        try:
            results.append(stage(manifest, candidate, transport, remote, python=sys.executable))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    outcomes = sorted(result.outcome.value for result in results)
    if gated:
        assert outcomes == ["raced", "uploaded"]
    else:
        assert outcomes in (["raced", "uploaded"], ["reused", "uploaded"])
    snapshots = Path(remote, "snapshots")
    assert [p.name for p in snapshots.iterdir()] == [manifest.digest]
    assert verify(snapshots / manifest.digest, manifest.digest).returncode == 0


def test_a_candidate_changed_after_its_manifest_is_refused_and_nothing_is_left(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    (candidate / "pkg/model.py").write_bytes(b"W = 2\n")
    with pytest.raises(CandidateError, match=r"pkg/model\.py"):
        stage_into(manifest, candidate, tmp_path / "remote")
    assert leftovers(tmp_path / "remote") == []


def leftovers(remote: Path) -> list[str]:
    snapshots = remote / "snapshots"
    return sorted(p.name for p in snapshots.iterdir()) if snapshots.exists() else []


class FailingRunner(LocalTransport):
    """Loses the connection on the second upload command."""

    def __init__(self) -> None:
        super().__init__()
        self.uploads = 0

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
    ) -> CommandResult:
        if argv[4] in ("--append", "--install"):
            self.uploads += 1
            if self.uploads == 2:
                raise BackendUnavailable("connection lost")
        return super().run(argv, input=input, timeout=timeout, maybe_effect=maybe_effect)


def test_a_lost_connection_mid_upload_cleans_up_and_a_later_stage_succeeds(
    tmp_path: Path, candidate: Path
) -> None:
    write(candidate, "data.bin", os.urandom(50_000))
    manifest = build_manifest(candidate)
    remote = PurePosixPath(tmp_path / "remote")
    with pytest.raises(BackendUnavailable):
        stage(
            manifest, candidate, FailingRunner(), remote, python=sys.executable, chunk_bytes=20_000
        )
    assert leftovers(Path(remote)) == []
    assert stage_into(manifest, candidate, Path(remote)).outcome is StageOutcome.UPLOADED


class CorruptingRunner(LocalTransport):
    """Flips one bit of a file's content on its way up: damage in transit."""

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
    ) -> CommandResult:
        if input and b"W = 1" in input:
            at = input.index(b"W = 1")
            input = input[:at] + b"V" + input[at + 1 :]
        return super().run(argv, input=input, timeout=timeout, maybe_effect=maybe_effect)


def test_damage_in_transit_is_a_retryable_mismatch_and_nothing_is_installed(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    remote = PurePosixPath(tmp_path / "remote")
    with pytest.raises(SnapshotMismatch) as caught:
        stage(manifest, candidate, CorruptingRunner(), remote, python=sys.executable)
    assert caught.value.retryable is True and "rc=86" in caught.value.evidence
    assert leftovers(Path(remote)) == []
    assert stage_into(manifest, candidate, Path(remote)).outcome is StageOutcome.UPLOADED


def test_a_manifest_lists_each_path_once() -> None:
    entry = ManifestEntry("a", EntryKind.FILE, 0o644, 0, EMPTY_SHA)
    with pytest.raises(ValueError, match="once"):
        Manifest((entry, entry))


def test_no_python_on_the_remote_side_is_a_staging_failure(tmp_path: Path, candidate: Path) -> None:
    manifest = build_manifest(candidate)
    remote = PurePosixPath(tmp_path / "remote")
    with pytest.raises(StagingFailed) as caught:
        stage(manifest, candidate, LocalTransport(), remote, python="no-such-python3")
    assert "rc=127" in caught.value.evidence and "no-such-python3" in caught.value.evidence
    assert len(caught.value.evidence) < 1000  # the helper script is not in the evidence
    assert caught.value.retryable is False


def test_stage_refuses_odd_remote_roots(candidate: Path) -> None:
    manifest = build_manifest(candidate)
    for bad in ["relative/root", "/", "/a/../b"]:
        with pytest.raises(UsageError):
            stage(manifest, candidate, LocalTransport(), bad)


def test_an_empty_candidate_stages(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    manifest = build_manifest(tmp_path / "c")
    result = stage_into(manifest, tmp_path / "c", tmp_path / "remote")
    assert verify(result.snapshot_dir, manifest.digest).returncode == 0
    assert manifest.digest == hashlib.sha256(b"vibesys-snapshot-v1\0").hexdigest()


# -- the wrapper's copy and verify ----------------------------------------------------------


def run_argv(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def test_copy_makes_a_fresh_verified_copy_and_is_idempotent(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    snapshot = stage_into(manifest, candidate, tmp_path / "remote").snapshot_dir
    work = tmp_path / "runs" / "inv 1; $(touch pwned)\n" / "work\ndir"
    assert run_argv(copy_command(snapshot, str(work))).returncode == 0
    assert verify(work, manifest.digest).returncode == 0
    write(work, "result.json", b"{}")  # an earlier attempt's leftovers
    (work / "train.py").write_bytes(b"edited on the cluster\n")
    assert verify(work, manifest.digest).returncode == 86
    assert run_argv(copy_command(snapshot, str(work))).returncode == 0
    assert verify(work, manifest.digest).returncode == 0
    assert not (work / "result.json").exists()
    assert sorted(p.name for p in work.parent.iterdir()) == ["work\ndir"]
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_copy_refuses_a_source_that_is_not_a_snapshot(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = run_argv(copy_command(str(tmp_path / "empty"), str(tmp_path / "work")))
    assert done.returncode == 86 and "not a snapshot" in done.stderr
    assert not (tmp_path / "work").exists()


def test_copy_refuses_overlapping_or_relative_paths() -> None:
    with pytest.raises(UsageError):
        copy_command("/r/snapshots/x", "/r/snapshots/x/work")
    with pytest.raises(UsageError):
        copy_command("/r/snapshots/x", "/r")
    with pytest.raises(UsageError):
        copy_command("/r/snapshots/x", "work")


def test_a_wrapper_does_not_run_the_command_on_a_mismatch(tmp_path: Path, candidate: Path) -> None:
    """copy, verify, then the command, as a batch script would chain them."""
    manifest = build_manifest(candidate)
    snapshot = Path(stage_into(manifest, candidate, tmp_path / "remote").snapshot_dir)
    work, ran = tmp_path / "work", tmp_path / "command-ran"

    def wrapper() -> int:
        script = " && ".join(
            [
                shell_join(copy_command(str(snapshot), str(work))),
                shell_join(verify_command(str(work), manifest.digest, python=sys.executable)),
                shell_join(["touch", str(ran)]),
            ]
        )
        return subprocess.run(["bash", "-c", script], check=False, timeout=60).returncode

    assert wrapper() == 0 and ran.exists()
    ran.unlink()
    (snapshot / "pkg/model.py").write_bytes(b"W = 666\n")
    assert wrapper() == 86 and not ran.exists()
    shutil.rmtree(snapshot)
    assert wrapper() == 86 and not ran.exists()


def test_verify_command_shape() -> None:
    argv = verify_command(PurePosixPath("/w/inv"), "a" * 64)
    assert argv[:3] == ["python3", "-I", "-c"] and argv[4:] == ["/w/inv", "a" * 64]
    assert argv[3] == verify_script()
