"""Pure rendering of the bubblewrap sandbox a confined command runs in: an agent's GPU command on
the compute node (the broker), and a local evaluation of a sandboxed session on this host (the
local adapter, from its request's confinement).

The job sees: the workspace (writable), the host's system directories and the operator's
`read_only_paths` (read-only; the host's password hashes and SSH host keys in them read as
empty), a fresh /proc, a minimal /dev plus the GPU device nodes that exist on the node, and an
empty private /tmp. Nothing else: the operator's home directory, other
candidates' worktrees and the invocation and attempt directories are not mounted at all (but
for a profile's capture directory: the job's own working directory, `capture_dir`).

Every capability is dropped (a job running as root could otherwise remount its way out), the
command gets its own pid, ipc and uts namespaces and session, and it dies with its parent, so
`scancel` of the Slurm step ends the sandbox. The environment is cleared and set to exactly the
filtered variables, plus the device variables Slurm set for the allocation (CUDA_VISIBLE_DEVICES
and the like), which only the node knows.

`bwrap` is named by program, so the node's own PATH finds it. The node-side part (GPU device
nodes, the credential files that exist there, Slurm's device variables) is a small bash
prelude; the options vibesys decides are rendered here and passed to it as arguments, counted,
so no value is ever re-parsed by a shell.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

import msgspec

__all__ = [
    "BWRAP_PRELUDE",
    "DEVICE_NODES",
    "DEVICE_VARIABLES",
    "HIDDEN_FILES",
    "PRIVATE_DIRS",
    "SYSTEM_DIRS",
    "Sandbox",
    "bwrap_options",
    "confined_command",
    "env_file_bytes",
    "is_within",
]

#: Host directories every job sees read-only (those missing on a node are skipped).
SYSTEM_DIRS: Final = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/sys",
)
#: Mounted fresh in the sandbox: visible, but none of the host's content.
PRIVATE_DIRS: Final = ("/proc", "/dev", "/tmp")
#: GPU device nodes bound into the sandbox when the node has them (globbed on the node).
DEVICE_NODES: Final = (
    "/dev/nvidia[0-9]*",
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
    "/dev/nvidia-caps",
    "/dev/dri",
    "/dev/kfd",
)
#: Host credentials inside the system directories, read as empty in the sandbox (those that
#: exist where it runs): without capabilities a job running as root still owns them.
HIDDEN_FILES: Final = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh/ssh_host_*_key",
)
#: Variables Slurm sets for the allocation's GPUs; copied into the sandbox when set.
DEVICE_VARIABLES: Final = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
)

#: `bash -c BWRAP_PRELUDE vibesys-bwrap ENV_FILE CAPTURE N OPTION_1 .. OPTION_N COMMAND...`.
#: ENV_FILE (or "-" for none) holds the command's variables as NUL-separated NAME=VALUE records:
#: read on the node, so the values never appear in a command line, the journal or the process
#: list. CAPTURE (or "-") is where the sandbox sees the directory the prelude starts in (the
#: job's own working directory, known only there) writable: a profiler's capture goes there.
BWRAP_PRELUDE: Final = (
    "env_file=$1; capture=$2; shift 2\n"
    'options=("${@:2:$1}")\n'
    'shift "$(($1 + 1))"\n'
    'if [ "$env_file" != - ]; then\n'
    "  while IFS= read -r -d '' pair; do\n"
    '    options+=(--setenv "${pair%%=*}" "${pair#*=}")\n'
    '  done < "$env_file" || exit 125\n'
    "fi\n"
    f"for node in {' '.join(DEVICE_NODES)}; do\n"
    '  if [ -e "$node" ]; then options+=(--dev-bind "$node" "$node"); fi\n'
    "done\n"
    f"for file in {' '.join(HIDDEN_FILES)}; do\n"
    '  if [ -e "$file" ]; then options+=(--ro-bind /dev/null "$file"); fi\n'
    "done\n"
    f"for name in {' '.join(DEVICE_VARIABLES)}; do\n"
    '  if [ -n "${!name+set}" ]; then options+=(--setenv "$name" "${!name}"); fi\n'
    "done\n"
    'if [ "$capture" != - ]; then options+=(--bind "$PWD" "$capture"); fi\n'
    'exec bwrap "${options[@]}" -- "$@"\n'
)

_NAMESPACES: Final = (
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
)


def is_within(path: str, root: str) -> bool:
    """`path` is `root` or below it (both absolute and normalized)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _check_path(what: str, path: str) -> None:
    if not path.startswith("/") or path == "/" or posixpath.normpath(path) != path:
        raise ValueError(f"{what} {path!r}: must be an absolute, normalized path other than /")
    if "\0" in path or path.startswith("//"):
        raise ValueError(f"{what} {path!r}: not a usable path")


class Sandbox(msgspec.Struct, frozen=True):
    """What one confined command may see. Paths are absolute and already resolved (the
    broker resolves symlinks once, checks, and passes only the resolved paths here)."""

    workspace: str
    cwd: str
    read_only_paths: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=lambda: MappingProxyType({}))
    #: where the command sees the job's own working directory, writable (None: not at all)
    capture_dir: str | None = None

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "env", MappingProxyType(dict(self.env)))
        _check_path("workspace", self.workspace)
        _check_path("cwd", self.cwd)
        if self.capture_dir is not None:
            _check_path("capture directory", self.capture_dir)
            # Its own mount point: nothing else may be seen under it, nor it under another.
            for other in (self.workspace, *self.read_only_paths, *SYSTEM_DIRS, *PRIVATE_DIRS):
                if is_within(self.capture_dir, other) or is_within(other, self.capture_dir):
                    raise ValueError(f"the capture directory {self.capture_dir!r} meets {other!r}")
        if not is_within(self.cwd, self.workspace):
            raise ValueError(f"cwd {self.cwd!r} is not inside the workspace {self.workspace!r}")
        for path in self.read_only_paths:
            _check_path("read-only path", path)
            if is_within(self.workspace, path):
                raise ValueError(
                    f"the workspace {self.workspace!r} lies inside the read-only path {path!r}"
                )
            if is_within(path, self.workspace):
                # bwrap resolves a bind's source on the host: the agent could swap a path
                # inside its workspace for a symlink to anything and have it mounted.
                raise ValueError(
                    f"the read-only path {path!r} lies inside the workspace {self.workspace!r}"
                )
        for root in SYSTEM_DIRS + PRIVATE_DIRS:
            if is_within(self.workspace, root) and root != "/tmp":
                raise ValueError(f"the workspace {self.workspace!r} lies inside {root}")
        for name in self.env:
            if not name or "=" in name or "\0" in name or "\0" in self.env[name]:
                raise ValueError(f"environment variable {name!r}: not a usable name or value")


def bwrap_options(sandbox: Sandbox, *, with_env: bool = True) -> tuple[str, ...]:
    """The bwrap options for `sandbox`, up to (not including) the node's device additions;
    without `with_env` the variables are left to the prelude's environment file."""
    # (depth, order, option...): a deeper mount is applied later, so it wins where paths nest
    # (a workspace or a read-only path under /tmp).
    mounts: list[tuple[int, int, tuple[str, ...]]] = []
    for path in SYSTEM_DIRS:
        mounts.append((_depth(path), 0, ("--ro-bind-try", path, path)))
    mounts.append((1, 1, ("--proc", "/proc")))
    mounts.append((1, 1, ("--dev", "/dev")))
    mounts.append((1, 1, ("--tmpfs", "/tmp")))
    mounts.append((_depth(sandbox.workspace), 2, ("--bind", sandbox.workspace, sandbox.workspace)))
    for path in sandbox.read_only_paths:
        mounts.append((_depth(path), 3, ("--ro-bind", path, path)))
    options: list[str] = [*_NAMESPACES]
    for _, _, mount in sorted(mounts, key=lambda m: (m[0], m[1])):
        options += mount
    options.append("--clearenv")
    for name in sorted(sandbox.env) if with_env else ():
        options += ("--setenv", name, sandbox.env[name])
    options += ("--chdir", sandbox.cwd)
    return tuple(options)


def confined_command(
    sandbox: Sandbox, argv: Sequence[str], env_file: str | None = None
) -> tuple[str, ...]:
    """`argv` run under bwrap as `sandbox` describes; itself an argv for the node. With
    `env_file` (see `env_file_bytes`), the sandbox's variables are read from that file on the
    node instead of being written into the command line."""
    if not argv or not argv[0]:
        raise ValueError("empty command")
    options = bwrap_options(sandbox, with_env=env_file is None)
    capture = sandbox.capture_dir or "-"
    count = str(len(options))
    head = ("bash", "-c", BWRAP_PRELUDE, "vibesys-bwrap", env_file or "-", capture, count)
    return (*head, *options, *argv)


def env_file_bytes(sandbox: Sandbox) -> bytes:
    """The content of the environment file `confined_command` reads on the node."""
    return b"".join(f"{k}={sandbox.env[k]}".encode() + b"\0" for k in sorted(sandbox.env))


def _depth(path: str) -> int:
    return path.count("/")
