"""The remote verifier: Python 3.6 and stdlib only, agreeing with the local digest (also on
random trees), and detecting every kind of tampering."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.adapters.snapshot.helpers import EVERYTHING, remote_digest, stage_into, verify, write
from vibesys.adapters.staging import VERIFY_MISMATCH_EXIT, verify_command, verify_script
from vibesys.errors import UsageError
from vibesys.snapshot import MARKER, build_manifest


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
