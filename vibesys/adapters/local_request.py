"""The local adapter's request, and the confinement it may carry.

A request with a `confine` table runs its command under bubblewrap (`osutil.sandbox`, the
broker's renderer): its working directory writable, the system directories and the listed
`read_only_paths` read-only, a private /tmp and /dev, its own pid namespace, dying with the
wrapper; nothing else of the host (no home, no state directory, no journal, no token). The
wrapper itself runs outside, so the logs and the markers in the attempt directory are written
as for any local job, the command's output byte for byte.

The confinement is part of the recorded request, never re-derived: whichever process submits
an attempt (the bridge, a restarted one, `vibesys reconcile`) confines it the same way. A
request without it records the JSON it always did.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Final

from msgspec import Struct

from vibesys.adapters.requests import AdapterRequest
from vibesys.errors import BackendMisconfigured
from vibesys.osutil.sandbox import Sandbox, confined_command, env_file_bytes

__all__ = ["SANDBOX_ENV_FILE", "Confinement", "LocalRequest", "confined_argv"]

#: In the attempt directory (owner-only, outside the sandbox): the command's variables, read by
#: the sandbox's prelude, so no value appears in a command line.
SANDBOX_ENV_FILE: Final = "sandbox.env"


def _is_absolute(path: str) -> bool:
    return path.startswith("/") and path != "/" and posixpath.normpath(path) == path


class Confinement(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a confined local command sees besides its working directory and the system
    directories, and its HOME (harmless: the host's home is not there)."""

    read_only_paths: tuple[str, ...] = ()
    home: str = "/tmp"

    def __post_init__(self) -> None:
        if not all(_is_absolute(path) for path in self.read_only_paths):
            raise ValueError("read_only_paths: must be absolute, normalized paths")
        if not _is_absolute(self.home):
            raise ValueError("home: must be an absolute, normalized path")


class LocalRequest(AdapterRequest, frozen=True, kw_only=True):
    """The local adapter needs nothing beyond the command and its recorded context (the
    command's files are where it runs, so it takes no artifacts), and, for a sandboxed
    session's evaluation, its confinement."""

    #: an unconfined request records the JSON it always did
    left_out_when_none: ClassVar[tuple[str, ...]] = ("artifact_limits", "confine")

    #: run the command in this sandbox (a session's evaluation)
    confine: Confinement | None = None


def confined_argv(
    confine: Confinement,
    command: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    attempt_dir: Path,
) -> list[str]:
    """`command` as the wrapper starts it under `confine`: bwrap's prelude, which reads the
    variables (`env`, HOME moved) from an owner-only file it writes in `attempt_dir` now."""
    root = os.path.realpath(cwd)  # bwrap mounts what a path resolves to: name that
    try:
        sandbox = Sandbox(
            workspace=root,
            cwd=root,
            read_only_paths=confine.read_only_paths,
            env={**env, "HOME": confine.home},
        )
    except ValueError as exc:
        raise BackendMisconfigured(
            f"the evaluation cannot be confined: {exc}",
            fix="keep the journal's runs directory and read_only_paths apart, outside the "
            "system directories",
        ) from None
    env_file = attempt_dir / SANDBOX_ENV_FILE
    env_file.unlink(missing_ok=True)  # a resubmission of the attempt writes it afresh
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(env_file_bytes(sandbox))
    return list(confined_command(sandbox, command, str(env_file)))
