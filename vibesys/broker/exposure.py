"""Checking, before a run starts, that a confined job can use the operator's `read_only_paths`.

A confined job sees only the workspace, the system directories and the listed paths. A symlink
whose chain leaves them dangles inside the sandbox, and the job fails with 'No such file' far
from the cause (a venv's `bin/python` links into a uv-managed CPython elsewhere in the home
directory). So for every symlink directly inside a `bin` or `sbin` directory of a listed path,
the chain is followed the way the job's kernel would follow it in the sandbox: component by
component, each link's target resolved relative to where the walk stands, `..` applied to the
resolved path, at most 40 links. A listed path (or system directory) that is itself a symlink
is mounted as the directory it points to, so inside it the host's view is the sandbox's; the
directories above a mount point are plain directories bwrap creates.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from vibesys.errors import ConfigError
from vibesys.osutil.sandbox import SYSTEM_DIRS, is_within

__all__ = [
    "MAX_LINKS",
    "check_profilers",
    "check_read_only_paths",
    "link_problem",
    "links_to_check",
]

#: Linux's limit on symlinks followed while resolving one path (ELOOP past it).
MAX_LINKS: Final = 40
#: Visible in the sandbox besides the listed paths (fresh mounts, whose host paths still exist).
_ALSO_VISIBLE: Final = ("/dev", "/proc")
_KEY: Final = "vibesys.agent_gpu.read_only_paths"
_ENTRY_DIRS: Final = ("bin", "sbin")


class _Walk(msgspec.Struct, frozen=True):
    roots: tuple[str, ...]

    def kind(self, path: str) -> str:
        if path in self.roots:
            return "mount"
        if any(is_within(path, root) for root in self.roots):
            return "inside"
        if any(is_within(root, path) for root in self.roots):
            return "above"
        return "hidden"


def link_problem(link: str, visible: Sequence[str]) -> str | None:
    """Why a confined job could not follow `link` (None when it can). `visible` lists the
    roots the sandbox mounts at their own paths."""
    walk = _Walk(tuple(visible))
    target = os.readlink(link)
    pending = _parts(link)
    resolved: list[str] = []
    links = 0
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if resolved:
                resolved.pop()
            continue
        here = "/" + "/".join([*resolved, name])
        kind = walk.kind(here)
        if kind == "hidden":
            reached = posixpath.normpath("/".join([here, *pending]))
            return (
                f"{link} -> {target} reaches {reached}, which the job cannot see; add {reached} "
                "(or the directory that holds it) to read_only_paths"
            )
        if kind == "above" or (kind == "mount" and os.path.exists(here)):
            resolved.append(name)
            continue
        try:
            info = os.lstat(here)
        except OSError:
            return f"{link} -> {target} is broken: {here} does not exist"
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_LINKS:
                return f"{link} -> {target} loops (more than {MAX_LINKS} links)"
            hop = os.readlink(here)
            if hop.startswith("/"):
                resolved = []
            pending = _parts(hop) + pending
            continue
        if pending and not stat.S_ISDIR(info.st_mode):
            return f"{link} -> {target} is broken: {here} is not a directory"
        resolved.append(name)
    return None


def links_to_check(path: str) -> list[str]:
    """Symlinks directly inside the `bin`/`sbin` directories of a listed path: the path itself
    when it is one, `<path>/bin`, and `<path>/*/bin` (a directory of venvs)."""
    candidates = [path] if posixpath.basename(path) in _ENTRY_DIRS else []
    candidates += [posixpath.join(path, d) for d in _ENTRY_DIRS]
    with os.scandir(path) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir():
                candidates += [posixpath.join(path, entry.name, d) for d in _ENTRY_DIRS]
    found: list[str] = []
    for directory in candidates:
        if not os.path.isdir(directory):
            continue
        with os.scandir(directory) as entries:
            found += sorted(posixpath.join(directory, e.name) for e in entries if e.is_symlink())
    return found


def check_read_only_paths(paths: Sequence[str], also_visible: Iterable[str] = ()) -> None:
    """Refuse to start (ConfigError) unless every listed path exists and every symlink in its
    entry-point directories resolves inside what a confined job sees. `also_visible` adds
    the paths the sandbox mounts besides these (the workspace)."""
    missing = [p for p in paths if not os.path.isdir(p)]
    if missing:
        raise ConfigError(f"{_KEY}: {missing[0]} does not exist (or is not a directory) here")
    visible = (*paths, *SYSTEM_DIRS, *_ALSO_VISIBLE, *also_visible)
    problems = [
        f"  {path}: {problem}"
        for path in paths
        for link in links_to_check(path)
        if (problem := link_problem(link, visible)) is not None
    ]
    if problems:
        raise ConfigError(
            f"{_KEY} lists paths holding symlinks that a confined job could not follow, so the "
            "job would fail with 'No such file':\n" + "\n".join(problems)
        )


def check_profilers(programs: Mapping[str, str], read_only_paths: Sequence[str]) -> None:
    """Refuse to start (ConfigError) when a profiler's program, named by an absolute path, is
    missing here or lies outside what a confined job sees: every profile would fail with 'No
    such file'. A bare name is looked up on the job's PATH, on the node."""
    visible = (*read_only_paths, *SYSTEM_DIRS)
    for name, program in sorted(programs.items()):
        if not program.startswith("/"):
            continue
        key = f"vibesys.agent_gpu.profilers.{name}.command"
        if not os.path.isfile(program):
            raise ConfigError(f"{key}: {program} does not exist (or is not a file) here")
        if not any(is_within(posixpath.normpath(program), root) for root in visible):
            raise ConfigError(
                f"{key}: {program} is not visible to a confined job; add its directory to "
                "read_only_paths"
            )


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part]
