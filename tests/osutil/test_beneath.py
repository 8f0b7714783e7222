"""The descriptor-relative primitives: a name swapped for a link or for another kind of file is
refused at the open, never followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vibesys.osutil import beneath


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "top" / "a" / "b").mkdir(parents=True)
    (tmp_path / "top" / "a" / "b" / "f").write_bytes(b"inside")
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "f").write_bytes(b"host secret")
    return tmp_path


def test_a_directory_beneath_is_opened_component_by_component(tree: Path) -> None:
    root = beneath.open_root(tree / "top")
    directory = beneath.open_beneath(root, "a/b")
    fd, info = beneath.open_file(directory, "f")
    assert os.read(fd, 100) == b"inside"
    assert info.st_size == 6
    for descriptor in (root, directory, fd):
        os.close(descriptor)


def test_a_directory_swapped_for_a_link_is_refused_not_followed(tree: Path) -> None:
    root = beneath.open_root(tree / "top")
    os.rename(tree / "top" / "a", tree / "top" / "gone")
    os.symlink(tree / "host", tree / "top" / "a")
    with pytest.raises(beneath.Changed) as refused:
        beneath.open_dir(root, "a")
    assert refused.value.relative == "a"
    os.symlink("../host/f", tree / "top" / "f")
    with pytest.raises(beneath.Changed):
        beneath.open_file(root, "f")
    os.close(root)


def test_a_file_swapped_for_a_fifo_or_a_directory_is_refused_without_blocking(
    tree: Path,
) -> None:
    root = beneath.open_root(tree / "top")
    os.mkfifo(tree / "top" / "pipe")
    with pytest.raises(beneath.Changed, match="regular file"):
        beneath.open_file(root, "pipe")
    with pytest.raises(beneath.Changed, match="regular file"):
        beneath.open_file(root, "a")
    with pytest.raises(beneath.Changed, match="vanished"):
        beneath.open_file(root, "nothing")
    os.close(root)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", b"a/b"])
def test_only_one_component_is_opened_at_a_time(tree: Path, name: str | bytes) -> None:
    root = beneath.open_root(tree / "top")
    with pytest.raises(ValueError, match="one path component"):
        beneath.open_dir(root, name)
    os.close(root)
