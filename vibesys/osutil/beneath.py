"""Paths checked and used in one step, for trees that someone else owns (a sandbox's workspace,
a job's working directory): every directory is opened relative to its parent's descriptor and
never through a symbolic link, and every file is opened once, from its directory's descriptor,
and read from that descriptor only. A name swapped for a link, or for something of another
kind, between a listing and its use fails the open (`Changed`) instead of reaching outside.

Standalone on purpose (standard library only, Python 3.6+, annotations as strings): the remote
scripts that read a job's directory on a cluster send this module's text along, so the rules
are the same on both sides.
"""

import errno
import os
import stat

#: flags of every open below: no link followed at the last component (the components before
#: it are descriptors already), the descriptor closed across exec
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
#: O_NONBLOCK so that a FIFO swapped in for a file never blocks the open
_FILE = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW


class Changed(OSError):
    """A name is not (any more) what the caller was told it is: a link, another kind of file,
    or gone. Its `relative` names it."""

    def __init__(self, relative: str, why: str) -> None:
        super().__init__(errno.ESTALE, why)
        self.relative = relative
        self.why = why

    def __str__(self) -> str:
        return f"{self.relative!r} {self.why}"


def _name(name: "str | bytes") -> None:
    text = os.fsdecode(name)
    if not text or "/" in text or text in (".", ".."):
        raise ValueError(f"not one path component: {name!r}")


def open_root(path: "str | bytes", follow: bool = True) -> int:
    """A descriptor of the directory `path` itself (which may be reached through a link when
    `follow`: the top is the caller's to name); raises Changed when it is not a directory."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags if follow else _DIRECTORY)
    except OSError as exc:
        raise _changed(os.fsdecode(path), exc) from None


def open_dir(parent: int, name: "str | bytes", relative: "str | None" = None) -> int:
    """A descriptor of the directory `name` in the directory `parent`, never through a link."""
    _name(name)
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError as exc:
        raise _changed(relative or os.fsdecode(name), exc) from None


def open_file(
    parent: int, name: "str | bytes", relative: "str | None" = None
) -> "tuple[int, os.stat_result]":
    """A descriptor of the regular file `name` in the directory `parent`, never through a link,
    and its status read from that descriptor (so size and mode are the opened file's)."""
    _name(name)
    shown = relative or os.fsdecode(name)
    try:
        fd = os.open(name, _FILE, dir_fd=parent)
    except OSError as exc:
        raise _changed(shown, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Changed(shown, "is no longer a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def open_beneath(root: int, relative: str) -> int:
    """A descriptor of the directory `relative` ("a/b", "" for `root` itself) below `root`,
    each component opened from the one before, none through a link."""
    current = os.dup(root)
    done = []  # type: list[str]
    try:
        for part in [p for p in relative.split("/") if p]:
            done.append(part)
            following = open_dir(current, part, "/".join(done))
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def _changed(relative: str, exc: OSError) -> OSError:
    """The error an open met, as Changed when it proves the name is a link or not a
    directory (an unreadable name stays the OSError it is)."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return Changed(relative, "is a symbolic link or not a directory")
    if exc.errno == errno.ENOENT:
        return Changed(relative, "vanished")
    return exc
