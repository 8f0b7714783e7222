"""The GPU broker's start: the checks a broker makes before it serves (the workspace, the
read-only paths and profilers a job may see, a bubblewrap that confines here), its private
state directory, and the server itself, the same for `vibesys broker serve` and the broker
of a candidate session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from vibesys.broker import client
from vibesys.broker.admission import Admission
from vibesys.broker.engine_runner import EngineGpuJobRunner
from vibesys.broker.exposure import check_profilers, check_read_only_paths
from vibesys.broker.run_slots import RunSlots
from vibesys.broker.server import BrokerServer
from vibesys.config.site import RecordedSite, slurm_site
from vibesys.config.slurm import AgentGpuConfig
from vibesys.config.slurm_file import load_site_file, site_file_path, warn_once
from vibesys.errors import UsageError
from vibesys.journal_schema import journal_path, open_journal
from vibesys.osutil.proc import self_identity
from vibesys.osutil.sandbox import Sandbox
from vibesys.service.tokens import BROKER_PREFIX, new_token, write_private, write_token_file

__all__ = [
    "OPERATOR_FILE",
    "broker_server",
    "check_bwrap",
    "checked_gpu_workspace",
    "client_path",
    "serve_broker",
]

SOCKET_NAME: Final = "gpu.sock"
TOKEN_NAME: Final = "token"
#: The site configuration this broker runs with, rendered once when it starts.
OPERATOR_FILE: Final = "slurm-operator.toml"


def client_path() -> Path:
    """The stdlib-only `vibesys-gpu` file, to mount into a container."""
    return Path(client.__file__).resolve()


def serve_broker(
    workspace: Path,
    slurm_config: Path | None,
    state_dir: Path | None,
    journal: Path | None,
    allow_uid: list[int] | None,
    run_id: str,
    out: Callable[[str], None],
) -> None:
    """`vibesys broker serve`: check, start, print where the broker is, serve until
    SIGINT or SIGTERM."""
    config_path = site_file_path(slurm_config)
    loaded = load_site_file(config_path)
    agent = loaded.config.agent_gpu
    if agent is None:
        raise UsageError(f"{config_path}: no [vibesys.agent_gpu] table; GPU commands are off")
    root = checked_gpu_workspace(workspace, agent)
    check_bwrap()
    state = _private_dir(state_dir)
    warn_once(loaded.warning)
    site = slurm_site(loaded.config)
    # The broker's own rendering, parsed once now: its jobs run with it, whatever
    # becomes of the file it was read from.
    write_private(state / OPERATOR_FILE, site.text)
    _serve(site, state, agent, root, journal, allow_uid, run_id, out)


def checked_gpu_workspace(workspace: Path, agent: AgentGpuConfig) -> str:
    """The workspace with its symlinks resolved, once the paths a job would see are checked."""
    try:
        root = os.path.realpath(workspace, strict=True)
    except OSError:
        raise UsageError(f"--workspace {workspace}: no such directory") from None
    if not os.path.isdir(root):
        raise UsageError(f"--workspace {workspace}: not a directory")
    check_read_only_paths(agent.read_only_paths, also_visible=(root,))
    programs = {name: profiler.command[0] for name, profiler in agent.profilers.items()}
    check_profilers(programs, agent.read_only_paths)
    try:
        Sandbox(workspace=root, cwd=root, read_only_paths=agent.read_only_paths)
    except ValueError as exc:
        raise UsageError(f"--workspace {workspace}: {exc}") from None
    return root


def check_bwrap(fix: str = "install bubblewrap (here and on the nodes)") -> None:
    """The submit host must be able to confine a job (nodes find bwrap on their own PATH)."""
    if shutil.which("bwrap") is None:
        raise UsageError(f"bwrap is not on PATH: {fix}")
    probe = ["bwrap", "--ro-bind", "/", "/", "--cap-drop", "ALL", "--unshare-pid", "true"]
    done = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise UsageError(f"bwrap cannot confine a job here: {' '.join(done.stderr.split())}")


def broker_server(
    site: RecordedSite,
    agent: AgentGpuConfig,
    workspace: str,
    journal: Path,
    operator_file: Path,
    token: str,
    socket_path: Path,
    allowed_uids: frozenset[int],
    run_id: str,
) -> BrokerServer:
    """A broker (not yet listening) whose `max_concurrent_jobs` holds across every broker of
    the run on the same journal."""
    runner = EngineGpuJobRunner(journal, site, operator_file)
    return BrokerServer(
        admission=Admission(token, workspace, agent, dict(os.environ), agent.read_only_paths),
        runner=runner,
        slots=RunSlots(
            journal, run_id, agent.max_concurrent_jobs, self_identity(), settle=runner.settle
        ),
        socket_path=socket_path,
        allowed_uids=allowed_uids,
    )


def _private_dir(state_dir: Path | None) -> Path:
    if state_dir is None:
        state = Path(tempfile.mkdtemp(prefix="vibesys-broker-"))
    else:
        state = state_dir.expanduser().absolute()
    try:
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
        (state / "socket").mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--state-dir {state}: {exc.strerror or exc}") from None
    for directory in (state, state / "socket"):
        info = directory.lstat()
        if info.st_uid != os.getuid() or directory.is_symlink():
            raise UsageError(f"{directory}: not a directory owned by this user")
        os.chmod(directory, 0o700)
    return state


def _serve(
    site: RecordedSite,
    state: Path,
    agent: AgentGpuConfig,
    workspace: str,
    journal: Path | None,
    allow_uid: list[int] | None,
    run_id: str,
    out: Callable[[str], None],
) -> None:
    journal_file = journal_path(journal).absolute()
    open_journal(journal_file).close()  # refuse now (NFS, newer schema), not at the first job
    socket_path = state / "socket" / SOCKET_NAME
    if socket_path.exists():
        raise UsageError(f"{socket_path} exists: another broker may be serving from {state}")
    token_file = state / TOKEN_NAME
    token = new_token(BROKER_PREFIX)
    write_token_file(token_file, token)
    try:
        server = broker_server(
            site,
            agent,
            workspace,
            journal_file,
            state / OPERATOR_FILE,
            token,
            socket_path,
            frozenset(allow_uid or [os.getuid()]),
            run_id,
        )
        server.listen()
    except BaseException as exc:
        token_file.unlink(missing_ok=True)  # no live token without a broker
        if isinstance(exc, OSError):  # e.g. a socket path too long for AF_UNIX
            raise UsageError(f"cannot listen on {socket_path}: {exc.strerror or exc}") from None
        raise
    out(f"socket {socket_path}")
    out(f"token_file {token_file}")
    out(f"client {client_path()}")
    sys.stdout.flush()
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.serve_forever(stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        token_file.unlink(missing_ok=True)
