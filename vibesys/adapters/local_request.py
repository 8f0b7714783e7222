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
from typing import Any, Final

from vibesys.adapters.plain_request import PlainRequest, RequestInvalid
from vibesys.errors import BackendMisconfigured
from vibesys.osutil.sandbox import Sandbox, confined_command, env_file_bytes

__all__ = ["SANDBOX_ENV_FILE", "Confinement", "LocalRequest", "confined_argv"]

#: In the attempt directory (owner-only, outside the sandbox): the command's variables, read by
#: the sandbox's prelude, so no value appears in a command line.
SANDBOX_ENV_FILE: Final = "sandbox.env"
_CONFINE_FIELDS: Final = frozenset({"read_only_paths", "home"})


class Confinement:
    """What a confined local command sees besides its working directory and the system
    directories, and its HOME (harmless: the host's home is not there)."""

    __slots__ = ("home", "read_only_paths")

    read_only_paths: tuple[str, ...]
    home: str

    def __init__(self, read_only_paths: Sequence[str] = (), home: str = "/tmp") -> None:
        if isinstance(read_only_paths, str) or not all(
            isinstance(p, str) and _absolute(p) for p in read_only_paths
        ):
            raise RequestInvalid("confine.read_only_paths", "must be absolute, normalized paths")
        if not isinstance(home, str) or not _absolute(home):
            raise RequestInvalid("confine.home", "must be an absolute, normalized path")
        object.__setattr__(self, "read_only_paths", tuple(read_only_paths))
        object.__setattr__(self, "home", home)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Confinement is frozen")

    @classmethod
    def from_json(cls, data: object) -> Confinement:
        if not isinstance(data, Mapping):
            raise RequestInvalid("confine", "must be a table")
        unknown = sorted(set(data) - _CONFINE_FIELDS)
        if unknown:
            raise RequestInvalid(f"confine.{unknown[0]}", "extra inputs are not permitted")
        paths = data.get("read_only_paths", [])
        if not isinstance(paths, list | tuple):
            raise RequestInvalid("confine.read_only_paths", "must be a list of strings")
        return cls(paths, data.get("home", "/tmp"))

    def to_json(self) -> dict[str, Any]:
        return {"read_only_paths": list(self.read_only_paths), "home": self.home}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Confinement):
            return NotImplemented
        return (self.read_only_paths, self.home) == (other.read_only_paths, other.home)

    def __hash__(self) -> int:
        return hash((self.read_only_paths, self.home))

    def __repr__(self) -> str:
        return f"Confinement(read_only_paths={self.read_only_paths!r}, home={self.home!r})"


class LocalRequest(PlainRequest):
    """The local adapter needs nothing beyond the command and its recorded context (the
    command's files are where it runs, so it takes no artifacts), and, for a sandboxed
    session's evaluation, its confinement. Plain, not pydantic: a local run imports only what
    it uses."""

    __slots__ = ("confine",)

    confine: Confinement | None

    def __init__(
        self,
        *,
        artifacts: tuple[str, ...] | list[str] = (),
        job_name_prefix: str = "vibesys",
        confine: Confinement | None = None,
    ) -> None:
        super().__init__(artifacts=artifacts, job_name_prefix=job_name_prefix)
        if confine is not None and not isinstance(confine, Confinement):
            raise RequestInvalid("confine", "must be a table")
        object.__setattr__(self, "confine", confine)

    @classmethod
    def model_validate(cls, data: Mapping[str, Any]) -> LocalRequest:
        common = PlainRequest.model_validate({k: v for k, v in data.items() if k != "confine"})
        found = data.get("confine")
        return cls(
            artifacts=common.artifacts,
            job_name_prefix=common.job_name_prefix,
            confine=None if found is None else Confinement.from_json(found),
        )

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        found = super().model_dump(mode=mode)
        if self.confine is not None:
            found["confine"] = self.confine.to_json()
        return found

    def __hash__(self) -> int:
        return hash((type(self), self.artifacts, self.job_name_prefix, self.confine))


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


def _absolute(path: str) -> bool:
    return path.startswith("/") and path != "/" and posixpath.normpath(path) == path
