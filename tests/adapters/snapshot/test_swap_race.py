"""A sandbox swapping a directory of its workspace for a link to a host folder while the
snapshot is read never gets a host byte into the manifest, the tar stream, the stage or the
job's copy: on the local stage, the sbatch stage's reader and the SkyPilot stage. The swap is
the kernel's atomic exchange (renameat2 RENAME_EXCHANGE), from inotify at the very moment the
walk opens the directory, and from a process that swaps as fast as it can."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

from tests.adapters.snapshot.helpers import runner, stage_into
from vibesys.adapters.candidate import digest_candidate
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.adapters.skypilot.run_dirs import RunDirs
from vibesys.adapters.skypilot.staged import stage_candidate
from vibesys.adapters.staging.upload import Helper, Upload, write_tar
from vibesys.bridge.files import stage_local_candidate
from vibesys.errors import BackendMisconfigured
from vibesys.snapshot import CandidateError, EntryKind, SnapshotPolicy, build_manifest
from vibesys.snapshot.reader import Content, read_tree

HOST_SECRET = b"HOST-SECRET-0600 never leaves the host\n"
OWN = b"the workspace's own file\n"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_IN_OPEN = 0x20

_LIBC = ctypes.CDLL(None, use_errno=True)

#: `python -c SWAPPER A B`: exchange A and B until killed.
SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
sys.stdout.write("ready\\n"); sys.stdout.flush()
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
"""


def exchange(a: Path, b: Path) -> None:
    if _LIBC.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE):
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


class Scene:
    """A workspace with a real `sub/secret.txt`, a host folder with its own `secret.txt`
    (0600), and, outside the workspace, the link to the host folder that is swapped in."""

    def __init__(self, tmp: Path) -> None:
        self.host = tmp / "host"
        self.host.mkdir()
        secret = self.host / "secret.txt"
        secret.write_bytes(HOST_SECRET)
        secret.chmod(0o600)
        self.workspace = tmp / "ws"
        (self.workspace / "sub").mkdir(parents=True)
        (self.workspace / "sub" / "secret.txt").write_bytes(OWN)
        (self.workspace / "main.py").write_text("print(open('sub/secret.txt').read())\n")
        self.parked = tmp / "parked"
        self.parked.symlink_to(self.host)
        self.sub = self.workspace / "sub"

    def restore(self) -> None:
        if self.sub.is_symlink():
            exchange(self.sub, self.parked)
        assert self.sub.is_dir() and not self.sub.is_symlink()

    @property
    def own_sha(self) -> str:
        return hashlib.sha256(OWN).hexdigest()


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


@pytest.fixture
def swapping(scene: Scene) -> Iterator[Scene]:
    """A process exchanging `sub` and the link as fast as it can, for the test's length."""
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(scene.sub), str(scene.parked)],
        stdout=subprocess.PIPE,
    )
    assert swapper.stdout is not None
    assert swapper.stdout.readline() == b"ready\n"
    try:
        yield scene
    finally:
        swapper.kill()
        swapper.wait(timeout=10)
        swapper.stdout.close()
        scene.restore()


def host_bytes_under(*roots: Path) -> list[str]:
    """Every file under `roots` (links never followed) that holds the host's secret."""
    found = []
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                if os.path.islink(path):
                    continue
                with open(path, "rb") as handle:
                    if HOST_SECRET.strip() in handle.read():
                        found.append(path)
    return found


@contextlib.contextmanager
def swapped_when_opened(scene: Scene) -> Iterator[None]:
    """The issue's attack: inotify sees `sub` opened and swaps it for the link at once (a walk
    that then read `sub/secret.txt` by its path would read the host's file)."""
    inotify = _LIBC.inotify_init1(os.O_CLOEXEC)
    assert inotify >= 0
    try:
        assert _LIBC.inotify_add_watch(inotify, os.fsencode(scene.sub), _IN_OPEN) >= 0

        def swap_on_open() -> None:
            os.read(inotify, 4096)
            exchange(scene.sub, scene.parked)

        swapper = threading.Thread(target=swap_on_open)
        swapper.start()
        yield
        swapper.join(timeout=10)
        assert not swapper.is_alive()
    finally:
        os.close(inotify)
    assert scene.sub.is_symlink()  # the swap happened, during the walk


def test_a_swap_the_moment_the_walk_opens_the_directory_reaches_nothing_of_the_host(
    scene: Scene, tmp_path: Path
) -> None:
    with swapped_when_opened(scene):
        manifest = build_manifest(scene.workspace)
    files = {e.path: e.sha256 for e in manifest.entries if e.kind is EntryKind.FILE}
    assert files["sub/secret.txt"] == scene.own_sha  # read from the directory the walk opened
    assert hashlib.sha256(HOST_SECRET).hexdigest() not in files.values()
    # Staging reads the tree again, through descriptors: `sub` is a link now (left out, as a
    # link leaving the candidate), so what it read is not the manifest: refused in one line,
    # and nothing is installed.
    remote = tmp_path / "remote"
    with pytest.raises(CandidateError) as refused:
        stage_into(manifest, scene.workspace, remote)
    assert str(refused.value) == (
        "'sub' changed after the manifest was built; build the manifest again"
    )
    assert host_bytes_under(remote) == []
    assert not (remote / "snapshots" / manifest.digest).exists()


def test_the_tar_reader_never_streams_a_host_byte_however_often_it_is_raced(
    swapping: Scene,
) -> None:
    # The sbatch and srun stages (and every other) send what `write_tar` reads: here at the
    # reader, 200 times, into an upload buffer that no remote command ever drains.
    outcomes: dict[str, int] = {}
    for _ in range(200):
        upload = Upload(
            Helper(runner(), sys.executable, 10), PurePosixPath("/x"), "0" * 16, 1 << 40
        )
        try:
            manifest = build_manifest(swapping.workspace)
            write_tar(manifest, swapping.workspace, upload)
        except CandidateError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] = outcomes.get("refused", 0) + 1
        else:
            paths = {e.path: e for e in manifest.entries}
            seen = "directory" if "sub" in paths else "linked"  # a link out is left out
            if seen == "directory":
                assert paths["sub/secret.txt"].sha256 == swapping.own_sha
            outcomes[seen] = outcomes.get(seen, 0) + 1
        assert HOST_SECRET.strip() not in upload.buffer
        assert upload.sent == 0
    # The swaps did land in the walks (else this test proves nothing).
    assert outcomes.get("refused", 0) + outcomes.get("linked", 0) > 0, outcomes


def test_the_local_stage_never_copies_a_host_byte(swapping: Scene, tmp_path: Path) -> None:
    stage_root = tmp_path / "stage"
    for attempt in range(15):
        run = tmp_path / f"run-{attempt}"
        try:
            work = stage_local_candidate(str(swapping.workspace), stage_root, run)
        except CandidateError as exc:
            assert "\n" not in str(exc)
        else:
            copied = work / "sub" / "secret.txt"
            assert not copied.exists() or copied.read_bytes() == OWN
        assert host_bytes_under(stage_root, run) == []


def stage_for_skypilot(scene: Scene, tmp_path: Path) -> None:
    """Record the candidate (PREPARED), then stage it as the SkyPilot adapter does, through
    the login node's runner (here this host)."""
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[profiles.p]\nrunner = "skypilot"\ninfra = "slurm/site-a"\n'
        'allocation_time = "01:00:00"\nremote_artifact_root = "/scratch/v"\n'
    )
    candidate = digest_candidate(scene.workspace, ())
    request = SkyPilotRequest(
        clusters_config=str(clusters), profile="p", run_id="r", candidate=candidate
    )
    remote = tmp_path / "login-node"
    stage_candidate(request, RunDirs(runner(), str(remote)), PurePosixPath(remote, "work"))


def test_the_skypilot_stage_refuses_a_directory_swapped_after_it_was_recorded(
    scene: Scene, tmp_path: Path
) -> None:
    # Whichever read sees the swap refuses: the recorded digest's check (before staging), or
    # the staging's own read (the tree it archives is not the manifest).
    with (
        swapped_when_opened(scene),
        pytest.raises((BackendMisconfigured, CandidateError)) as refused,
    ):
        stage_for_skypilot(scene, tmp_path)
    said = str(refused.value)
    assert "\n" not in said
    assert "the candidate " in said or said.endswith(
        "changed after the manifest was built; build the manifest again"
    ), said
    assert host_bytes_under(tmp_path / "login-node") == []


def test_the_skypilot_stage_never_sends_a_host_byte(swapping: Scene, tmp_path: Path) -> None:
    for _ in range(15):
        try:
            stage_for_skypilot(swapping, tmp_path)
        except (CandidateError, BackendMisconfigured) as exc:
            assert "\n" not in str(exc)
        assert host_bytes_under(tmp_path / "login-node") == []


def test_a_staged_copy_is_never_more_readable_than_its_source(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    modes = {"private.txt": 0o600, "group.txt": 0o640, "public.txt": 0o644, "tool.sh": 0o700}
    for name, mode in modes.items():
        (workspace / name).write_text(name)
        (workspace / name).chmod(mode)
    (workspace / "closed").mkdir(mode=0o700)
    (workspace / "closed" / "inside.txt").write_text("x")
    (workspace / "closed").chmod(0o700)
    work = stage_local_candidate(str(workspace), tmp_path / "stage", tmp_path / "run")
    (snapshot,) = (tmp_path / "stage" / "snapshots").iterdir()
    for copy in (snapshot, work):
        found = {name: stat.S_IMODE((copy / name).stat().st_mode) for name in modes}
        assert found == {
            "private.txt": 0o600,
            "group.txt": 0o640,
            "public.txt": 0o644,
            "tool.sh": 0o700,
        }
        assert stat.S_IMODE((copy / "closed").stat().st_mode) == 0o700
        assert stat.S_IMODE(copy.stat().st_mode) & 0o077 == 0


class SwapsWhileReading:
    """A sink that, while the walk reads `sub/a.txt`, swaps `sub/zdir` (already listed as a
    directory, not yet entered) for the link to the host folder."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.archived: list[str] = []

    def directory(self, relative: str, mode: int) -> None:
        self.archived.append(relative)

    def file(self, relative: str, mode: int, content: Content) -> None:
        if relative == "sub/a.txt":
            exchange(self.scene.sub / "zdir", self.scene.parked)
        content.read()
        self.archived.append(relative)

    def symlink(self, relative: str, target: str) -> None:
        self.archived.append(relative)


def test_a_directory_that_becomes_a_link_between_its_listing_and_its_open_refuses_the_read(
    scene: Scene,
) -> None:
    (scene.sub / "a.txt").write_bytes(OWN)
    (scene.sub / "zdir").mkdir()
    (scene.sub / "zdir" / "secret.txt").write_bytes(OWN)
    sink = SwapsWhileReading(scene)
    with pytest.raises(CandidateError) as refused:
        read_tree(scene.workspace, SnapshotPolicy(), sink)
    assert str(refused.value) == (
        "the candidate changed while it was read: 'sub/zdir' is a symbolic link or not a directory"
    )
    assert "sub/zdir/secret.txt" not in sink.archived
