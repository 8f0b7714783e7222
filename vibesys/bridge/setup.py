"""Checks and files a session makes before it serves: the workspace, the variables an
operator lets requests pass, the private state directory, and the GPU broker of the session."""

from __future__ import annotations

import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Final

from vibesys.adapters.skypilot.request import client_variable
from vibesys.bridge.options import SessionOptions
from vibesys.broker.server import BrokerServer
from vibesys.broker.startup import (
    OPERATOR_FILE,
    broker_server,
    check_bwrap,
    checked_gpu_workspace,
    client_path,
)
from vibesys.config.site import slurm_site
from vibesys.config.slurm_file import SlurmSiteFile
from vibesys.config.transport import SshTransportConfig
from vibesys.errors import UsageError
from vibesys.osutil.sandbox import Sandbox
from vibesys.service.tokens import BROKER_PREFIX, new_token, write_private, write_token_file

__all__ = [
    "check_confinement",
    "check_options",
    "checked_workspace",
    "claim_socket",
    "private_dir",
    "session_token",
    "start_broker",
    "subdir",
]

GPU_SOCKET: Final = "gpu.sock"
#: The variable names an operator may not let a request set: they steer the submission.
_RESERVED_PREFIXES: Final = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "VIBESYS_", "SKYPILOT_")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def checked_workspace(options: SessionOptions) -> tuple[str, str]:
    given = os.path.normpath(options.workspace.expanduser().absolute())
    try:
        real = os.path.realpath(given, strict=True)
    except OSError:
        raise UsageError(f"--workspace {options.workspace}: no such directory") from None
    if not os.path.isdir(real):
        raise UsageError(f"--workspace {options.workspace}: not a directory")
    return given, real


def check_options(options: SessionOptions) -> None:
    if not _RUN_ID.fullmatch(options.run_id):
        raise UsageError(f"--run-id {options.run_id!r}: use letters, digits, . _ - (at most 200)")
    for name in options.allow_env:
        if not _VARIABLE.fullmatch(name):
            raise UsageError(f"--allow-env {name!r}: not a variable name")
        if name.startswith(_RESERVED_PREFIXES):
            raise UsageError(
                f"--allow-env {name}: a {name.split('_')[0]}_ variable steers the submission"
            )
    if options.site.backend == "skypilot":
        for name in options.allow_env:
            reason = client_variable(name)
            if reason is not None:
                raise UsageError(f"--allow-env {reason}")
    if options.allow_env and options.site.slurm_file is not None:
        transport = options.site.slurm_file.config.slurm.transport
        if isinstance(transport, SshTransportConfig):
            for name in options.allow_env:
                if name not in transport.env_allowlist:
                    raise UsageError(
                        f"--allow-env {name}: over SSH only [slurm.transport] env_allowlist "
                        "variables reach the job; add it there"
                    )


def check_confinement(options: SessionOptions) -> None:
    """A confined local session needs a bwrap that confines here, and a runs directory that a
    sandbox can mount writable (checked now, not at the first evaluation)."""
    confinement = options.site.confinement
    if options.site.backend != "local" or confinement is None:
        return
    check_bwrap(
        fix="install bubblewrap, or serve with --unconfined to give local evaluations this "
        "host's full view"
    )
    runs = os.path.realpath(options.journal.absolute().parent / "runs")
    try:
        Sandbox(workspace=runs, cwd=runs, read_only_paths=confinement.read_only_paths)
    except ValueError as exc:
        message = f"--journal {options.journal}: evaluations cannot be confined: {exc}"
        raise UsageError(message) from None


def private_dir(state_dir: Path | None) -> Path:
    if state_dir is None:
        state = Path(tempfile.mkdtemp(prefix="vibesys-session-"))
    else:
        state = state_dir.expanduser().absolute()
    try:
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--state-dir {state}: {exc.strerror or exc}") from None
    own(state)
    return state


def subdir(state: Path, name: str) -> Path:
    directory = state / name
    directory.mkdir(mode=0o700, exist_ok=True)
    own(directory)
    return directory


def own(directory: Path) -> None:
    info = directory.lstat()
    if info.st_uid != os.getuid() or directory.is_symlink():
        raise UsageError(f"{directory}: not a directory owned by this user")
    os.chmod(directory, 0o700)


def start_broker(
    state: Path,
    loaded: SlurmSiteFile,
    workspace: str,
    journal: Path,
    uids: frozenset[int],
    secrets: list[Path],
    run_id: str,
) -> tuple[BrokerServer, dict[str, str]]:
    """The session's GPU broker, listening (its own socket and token): the server, and what
    the session's document says of it (with the token, for the container's environment).
    Like `vibesys broker serve`, it keeps its own rendering of the site file (as the session
    read it when it started), and shares the run's `max_concurrent_jobs` with every broker of
    the run."""
    agent = loaded.config.agent_gpu
    assert agent is not None
    checked_gpu_workspace(Path(workspace), agent)
    check_bwrap()
    site = slurm_site(loaded.config)
    socket_path = subdir(state, "gpu") / GPU_SOCKET
    operator_file = state / OPERATOR_FILE
    write_private(operator_file, site.text)
    claim_socket(socket_path)
    token_file = state / "gpu-token"
    token = session_token(token_file, BROKER_PREFIX, secrets)
    server = broker_server(
        site, agent, workspace, journal, operator_file, token, socket_path, uids, run_id
    )
    server.listen()
    info = {
        "socket": str(socket_path),
        "token_file": str(token_file),
        "client": str(client_path()),
        "token": token,
    }
    return server, info


def claim_socket(path: Path) -> None:
    """Make `path` free for this session's socket: a socket a dead session left is removed;
    one that answers belongs to a live session, which is refused (nothing is touched)."""
    if not os.path.lexists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # nobody listens: a session that died left it
        return
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    finally:
        probe.close()
    raise UsageError(f"{path}: another session serves from this state directory")


def session_token(path: Path, prefix: str, secrets: list[Path]) -> str:
    """The session's token: the one a session that died left in `path` (a restart of the same
    session keeps its token, so its helpers reattach), else a new one. Teardown removes it."""
    secrets.append(path)
    try:
        info = path.lstat()
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        text, info = "", None
    mine = info is not None and info.st_uid == os.getuid() and not info.st_mode & 0o077
    if mine and text.startswith(prefix) and len(text) > len(prefix) + 30:
        return text
    token = new_token(prefix)
    write_token_file(path, token)
    return token
