"""Copies that do not double the disk: a hard link where the file is never written again,
a clone (reflink: the file system shares the blocks until one side writes) where the file
system can make one, else the bytes."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from pathlib import Path
from typing import Final

__all__ = ["clone", "copy", "link"]

#: Linux's FICLONE ioctl, _IOW(0x94, 9, int): btrfs, XFS with reflink, bcachefs, overlayfs
#: over one of them
FICLONE: Final = 0x40049409
#: what a file system or a pair of files that cannot be cloned answers
_NO_CLONE: Final = frozenset(
    {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EPERM}
)


def clone(source: int, target: int) -> bool:
    """Make the empty file `target` share `source`'s blocks; False where that cannot be."""
    try:
        fcntl.ioctl(target, FICLONE, source)
    except OSError as exc:
        if exc.errno in _NO_CLONE:
            return False
        raise
    return True


def copy(source: str | Path, target: Path) -> None:
    """`target`: a clone of `source` where the file system can make one, else its bytes."""
    with open(source, "rb") as reader, open(target, "wb") as writer:
        if not clone(reader.fileno(), writer.fileno()):
            shutil.copyfileobj(reader, writer, 1 << 20)


def link(source: str | Path, target: Path) -> None:
    """`target`: a hard link to `source` (one file, two names), else a copy (another file
    system, or one without hard links)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        copy(source, target)
