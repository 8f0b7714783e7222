"""Checks and files a session makes before it serves: the workspace, the variables an
operator lets requests pass, the private state directory, and the GPU broker of the session."""

from __future__ import annotations

import os
import re
import socket
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from vibesys.errors import UsageError
from vibesys.service.tokens import new_token, write_token_file

if TYPE_CHECKING:
    from vibesys.bridge.session import SessionOptions
    from vibesys.config.slurm_file import SlurmSiteFile

__all__ = [
    "check_confinement",
    "check_options",
    "checked_workspace",
    "claim_socket",
    "private_dir",
    "session_token",
    "start_broker",
    "subdir",
    "write_private",
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
        from vibesys.adapters.skypilot.request import client_variable

        for name in options.allow_env:
            reason = client_variable(name)
            if reason is not None:
                raise UsageError(f"--allow-env {reason}")
    if options.allow_env and options.site.slurm_file is not None:
        from vibesys.config import SshTransportConfig

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
    from vibesys.broker.cli import _check_bwrap
    from vibesys.osutil.sandbox import Sandbox

    _check_bwrap(
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


def write_private(path: Path, text: str) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def start_broker(
    state: Path,
    loaded: SlurmSiteFile,
    workspace: str,
    journal: Path,
    uids: frozenset[int],
    secrets: list[Path],
    run_id: str,
) -> tuple[Any, dict[str, str]]:
    """The session's GPU broker, listening (its own socket and token): the server, and what
    the session's document says of it (with the token, for the container's environment).
    Like `vibesys broker serve`, it keeps its own rendering of the site file (as the session
    read it when it started), and shares the run's `max_concurrent_jobs` with every broker of
    the run."""
    from vibesys.broker import client
    from vibesys.broker.admission import Admission
    from vibesys.broker.cli import OPERATOR_FILE, _check_bwrap, _checked_workspace
    from vibesys.broker.engine_runner import EngineGpuJobRunner
    from vibesys.broker.run_slots import RunSlots
    from vibesys.broker.server import BrokerServer
    from vibesys.config.site import slurm_site
    from vibesys.osutil.proc import self_identity
    from vibesys.service.tokens import BROKER_PREFIX

    agent = loaded.config.agent_gpu
    assert agent is not None
    _checked_workspace(Path(workspace), agent)
    _check_bwrap()
    site = slurm_site(loaded.config)
    socket_dir = subdir(state, "gpu")
    operator_file = state / OPERATOR_FILE
    write_private(operator_file, site.text)
    runner = EngineGpuJobRunner(journal, site, operator_file)
    server = BrokerServer(
        admission=Admission("", workspace, agent, dict(os.environ), agent.read_only_paths),
        runner=runner,
        slots=RunSlots(
            journal, run_id, agent.max_concurrent_jobs, self_identity(), settle=runner.settle
        ),
        socket_path=socket_dir / GPU_SOCKET,
        allowed_uids=uids,
    )
    claim_socket(server.socket_path)
    token_file = state / "gpu-token"
    token = session_token(token_file, BROKER_PREFIX, secrets)
    server.admission = replace(server.admission, token=token)
    server.listen()
    info = {
        "socket": str(server.socket_path),
        "token_file": str(token_file),
        "client": str(Path(client.__file__).resolve()),
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
