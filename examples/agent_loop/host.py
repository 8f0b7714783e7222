"""The host side of an agent loop: open a candidate session, run the agent in a sandbox with
only what the session lists, report the evaluations' overhead, tear the session down.

The agent (agent.py, scripted: no model) stands for a coding agent in a container; bubblewrap
stands for the container runtime. It gets no network, no credentials and no view of this host:
its workspace (writable), the session's socket directories, the results directory and the
`vibesys-eval` helper (read-only), the system directories for python3 (read-only), and the
session's environment block as its whole environment. README.md says what Docker or podman
would mount instead.

The evaluations run on the Slurm cluster of the slurm.toml given as the first argument, else
$VIBESYS_SLURM_CONFIG; with neither, on this host (`--local`: each evaluation confined by
bubblewrap to a copy of the candidate), which needs no Slurm. The journal goes to
./.vibesys/journal.db unless VIBESYS_JOURNAL says otherwise; the workspace and the session's
state go under ./agent-loop:

    python examples/agent_loop/host.py [SLURM_TOML]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from vibesys.session import Mount, Session

AGENT = Path(__file__).resolve().parent / "agent.py"
#: Where agent.py appears in the sandbox (outside the workspace: the agent is not the candidate).
AGENT_IN_SANDBOX = "/agent/agent.py"
#: What python3 needs from the host, read-only; a link (merged /usr) is recreated as one.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
#: Seconds the agent may take in all (two evaluations of well under a minute each).
AGENT_TIMEOUT = 600.0
#: The agent's PATH: the system directories' programs only.
SANDBOX_PATH = "/usr/bin:/bin"


def site(argv: list[str]) -> dict[str, Any]:
    """The Session's site: the slurm.toml from argv or the environment, else this host."""
    given = argv[0] if argv else os.environ.get("VIBESYS_SLURM_CONFIG")
    if given:
        path = Path(given).expanduser().resolve()
        print(f"site: the Slurm cluster of {path}")
        return {"slurm_config": path}
    print("site: this host (--local): no slurm.toml given as an argument or $VIBESYS_SLURM_CONFIG")
    return {"local": True}


def sandbox_argv(mounts: tuple[Mount, ...], environment: dict[str, str], cwd: Path) -> list[str]:
    """bwrap's options: the system directories, then each of the session's mounts (after the
    private /tmp, which would hide a mount under /tmp), and exactly the session's variables."""
    argv = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    # No capabilities (a sandbox running as root could otherwise remount its way out); it dies
    # with this process, and gets no terminal to inject keystrokes into.
    argv += ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            argv += ["--ro-bind", name, name]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for mount in mounts:
        flag = "--ro-bind" if mount.read_only else "--bind"
        argv += [flag, str(mount.source), str(mount.target)]
    argv += ["--ro-bind", str(AGENT), AGENT_IN_SANDBOX]
    argv += ["--clearenv", "--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", "/tmp"]
    for name, value in sorted(environment.items()):
        argv += ["--setenv", name, value]
    return [*argv, "--chdir", str(cwd)]


def run_agent(argv: list[str]) -> dict[str, Any]:
    """Run the sandboxed agent, printing its output as it comes; its summary (its last line,
    one JSON object), with its exit status."""
    summary: dict[str, Any] = {"rounds": []}
    with subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as agent:
        assert agent.stdout is not None
        # A hung agent must not hold the session forever: its helper's own timeout aside.
        watchdog = threading.Timer(AGENT_TIMEOUT, agent.kill)
        watchdog.start()
        try:
            for line in agent.stdout:
                if line.startswith('{"rounds"'):
                    summary = json.loads(line)
                else:
                    print(f"agent | {line}", end="", flush=True)
        finally:
            watchdog.cancel()
    print(f"agent exit {agent.returncode}")
    return summary | {"exit": agent.returncode}


def bare_seconds(workspace: Path) -> float:
    """The command's run time with nothing around it: `python3 solve.py` here, with the
    sandbox's PATH, in a scratch copy of the candidate the agent left (the best of three)."""
    env = {"PATH": SANDBOX_PATH, "HOME": "/tmp"}
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copy(workspace / "solve.py", scratch)
        for _ in range(3):
            began = time.monotonic()
            subprocess.run(["python3", "solve.py"], cwd=scratch, env=env, capture_output=True)
            runs.append(time.monotonic() - began)
    return min(runs)


def report(summary: dict[str, Any], bare: float) -> None:
    """Each round's time against the bare command's: what the session adds per evaluation."""
    print(f"bare command (python3 solve.py here, no vibesys): {bare:.3f} s")
    for r in summary["rounds"]:
        if r["status"] != "COMPLETED":
            print(f"round {r['round']}: {r['status']} after {r['seconds']:.2f} s")
            continue
        print(
            f"round {r['round']}: evaluation {r['seconds']:.2f} s, the command's own run "
            f"{r['command_seconds']:.3f} s (as it measured itself): "
            f"overhead {r['seconds'] - bare:.2f} s over the bare command"
        )
    profiled = summary.get("profile")
    if profiled is not None:
        print(
            f"profile ({profiled['profiler']}): {profiled['status']}, its capture read back "
            f"as recorded: {profiled['captures_ok']}"
        )


def main(argv: list[str]) -> int:
    if shutil.which("bwrap") is None:
        print("bwrap is not on PATH: install bubblewrap (it is the agent's sandbox here)")
        return 1
    where = site(argv)
    root = Path("agent-loop").absolute()
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    # The Slurm job's --time is the evaluation timeout rounded up to minutes: keep it short.
    options: dict[str, Any] = {"state_dir": root / "session", "default_timeout": 300, **where}
    began = time.monotonic()
    with Session("agent-loop-example", workspace, **options) as session:
        backend = session.capabilities.backend
        print(f"session up in {time.monotonic() - began:.2f} s: backend {backend}")
        for mount in session.mounts:
            print(f"mount {mount.volume}")
        token_file = session.document["bridge"]["token_file"]
        command = sandbox_argv(session.mounts, session.environment, workspace)
        summary = run_agent([*command, "python3", AGENT_IN_SANDBOX, "--token-file", token_file])
        if summary["rounds"]:
            report(summary, bare_seconds(workspace))
        pid = session.pid
    status = session.close()  # idempotent: the `with` block closed it already
    sockets = [p for p in (root / "session").rglob("*") if p.is_socket()]
    alive = Path(f"/proc/{pid}").exists()
    print(f"session closed: exit status {status}, {len(sockets)} sockets left, serve alive {alive}")
    return 0 if summary["exit"] == 0 and status == 0 and not sockets and not alive else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
