"""`vibesys broker ...`: start the GPU broker of one candidate session.

Only typer is imported here at module level: `vibesys --help` must stay light.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vibesys.errors import UsageError, boundary

if TYPE_CHECKING:
    from vibesys.config import AgentGpuConfig
    from vibesys.config.site import RecordedSite

broker_app = typer.Typer(
    help="The GPU broker: runs an agent's `vibesys-gpu` commands as confined Slurm jobs.",
    no_args_is_help=True,
)

SOCKET_NAME = "gpu.sock"
TOKEN_NAME = "token"
#: The site configuration this broker runs with, rendered once when it starts.
OPERATOR_FILE = "slurm-operator.toml"


@broker_app.command()
def serve(
    workspace: Annotated[
        Path,
        typer.Option(
            help="The candidate's worktree: commands run only inside it.", show_default=False
        ),
    ],
    slurm_config: Annotated[
        Path | None,
        typer.Option(
            help="slurm.toml with a [vibesys.agent_gpu] table (or a deprecated [slurm_gpu] "
            "one) \\[default: ~/.config/vibesys/slurm.toml, else slurm-gpu.toml beside it]",
            show_default=False,
        ),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            help="Private directory for the socket (in socket/) and the token file "
            "\\[default: a new one under the temporary directory]",
            show_default=False,
        ),
    ] = None,
    journal: Annotated[
        Path | None,
        typer.Option(
            envvar="VIBESYS_JOURNAL",
            help="Journal of the GPU jobs \\[default: .vibesys/journal.db]",
            show_default=False,
        ),
    ] = None,
    allow_uid: Annotated[
        list[int] | None,
        typer.Option(help="A uid that may connect (repeatable) \\[default: the broker's own]"),
    ] = None,
    run_id: Annotated[
        str,
        typer.Option(
            envvar="VIBESYS_RUN_ID",
            help="The run this session belongs to: max_concurrent_jobs holds across every "
            "broker started with the same run id on the same journal \\[default: the "
            "journal's brokers without one]",
            show_default=False,
        ),
    ] = "",
) -> None:
    """Serve one session's GPU commands until interrupted. Prints the socket path, the token
    file (readable only by its owner) and the client to give the container."""
    with boundary():
        from vibesys.config.site import slurm_site
        from vibesys.config.slurm_file import load_site_file, site_file_path, warn_once

        config_path = site_file_path(slurm_config)
        loaded = load_site_file(config_path)
        agent = loaded.config.agent_gpu
        if agent is None:
            raise UsageError(f"{config_path}: no [vibesys.agent_gpu] table; GPU commands are off")
        root = _checked_workspace(workspace, agent)
        _check_bwrap()
        state = _private_dir(state_dir)
        warn_once(loaded.warning)
        site = slurm_site(loaded.config)
        # The broker's own rendering, parsed once now: its jobs run with it, whatever
        # becomes of the file it was read from.
        _write_private(state / OPERATOR_FILE, site.text)
        _serve(site, state, agent, root, journal, allow_uid, run_id)


@broker_app.command("client-path")
def client_path() -> None:
    """Print the path of the stdlib-only client file, to mount into a container."""
    from vibesys.broker import client

    typer.echo(Path(client.__file__).resolve())


def _checked_workspace(workspace: Path, agent: AgentGpuConfig) -> str:
    from vibesys.broker.exposure import check_profilers, check_read_only_paths
    from vibesys.osutil.sandbox import Sandbox

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


def _check_bwrap(fix: str = "install bubblewrap (here and on the nodes)") -> None:
    """The submit host must be able to confine a job (nodes find bwrap on their own PATH)."""
    import shutil
    import subprocess

    if shutil.which("bwrap") is None:
        raise UsageError(f"bwrap is not on PATH: {fix}")
    probe = ["bwrap", "--ro-bind", "/", "/", "--cap-drop", "ALL", "--unshare-pid", "true"]
    done = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise UsageError(f"bwrap cannot confine a job here: {' '.join(done.stderr.split())}")


def _private_dir(state_dir: Path | None) -> Path:
    import tempfile

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


def _write_token(path: Path) -> str:
    from vibesys.service.tokens import BROKER_PREFIX, new_token, write_token_file

    token = new_token(BROKER_PREFIX)
    write_token_file(path, token)
    return token


def _write_private(path: Path, text: str) -> None:
    """A new owner-only file at `path` (whatever was there is replaced, never followed)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _serve(
    site: RecordedSite,
    state: Path,
    agent: AgentGpuConfig,
    workspace: str,
    journal: Path | None,
    allow_uid: list[int] | None,
    run_id: str,
) -> None:
    import threading

    from vibesys.broker import client
    from vibesys.broker.admission import Admission
    from vibesys.broker.engine_runner import EngineGpuJobRunner
    from vibesys.broker.run_slots import RunSlots
    from vibesys.broker.server import BrokerServer
    from vibesys.journal_schema import journal_path, open_journal
    from vibesys.osutil.proc import self_identity

    journal_file = journal_path(journal).absolute()
    open_journal(journal_file).close()  # refuse now (NFS, newer schema), not at the first job
    socket_path = state / "socket" / SOCKET_NAME
    if socket_path.exists():
        raise UsageError(f"{socket_path} exists: another broker may be serving from {state}")
    token = _write_token(state / TOKEN_NAME)
    try:
        runner = EngineGpuJobRunner(journal_file, site, state / OPERATOR_FILE)
        cap = agent.max_concurrent_jobs
        server = BrokerServer(
            admission=Admission(token, workspace, agent, dict(os.environ), agent.read_only_paths),
            runner=runner,
            slots=RunSlots(journal_file, run_id, cap, self_identity(), settle=runner.settle),
            socket_path=socket_path,
            allowed_uids=frozenset(allow_uid or [os.getuid()]),
        )
        server.listen()
    except BaseException as exc:
        (state / TOKEN_NAME).unlink(missing_ok=True)  # no live token without a broker
        if isinstance(exc, OSError):  # e.g. a socket path too long for AF_UNIX
            raise UsageError(f"cannot listen on {socket_path}: {exc.strerror or exc}") from None
        raise
    typer.echo(f"socket {socket_path}")
    typer.echo(f"token_file {state / TOKEN_NAME}")
    typer.echo(f"client {Path(client.__file__).resolve()}")
    sys.stdout.flush()
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.serve_forever(stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        (state / TOKEN_NAME).unlink(missing_ok=True)
