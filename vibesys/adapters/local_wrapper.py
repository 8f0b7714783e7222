"""Runs one command as a local "job" and leaves a completion marker. Stdlib only: it is started
by path (`python -I -S local_wrapper.py ATTEMPT_DIR JOB_NAME -- CMD...`), never imported by vibesys.
`--notify=FD` names a pipe it writes one line to once the claim is in place (its end, EOF).

Contract (the same as the Slurm wrappers, see `vibesys.adapters.rundir.claim`):
- `claim` is linked into place atomically BEFORE the command starts (pid, process start time,
  host). If a claim exists already (the engine's fence, or another wrapper), nothing runs: the
  wrapper leaves `refused` and exits 85;
- a cancel requested before the command starts (`cancel_requested`, or a signal) stops it from
  starting;
- `group` records the command's process group (its leader's pid and start time) and this
  wrapper's session as soon as it starts, so a cancel can reach the command even if this
  wrapper is killed;
- the wrapper is a child subreaper: every process the command starts, however it detaches
  (`setsid`, a double fork), is reparented to it when its parent ends. Once the command's
  leader has ended, every process left under the wrapper is killed (SIGKILL, stopped ones
  too) and reaped;
- `exit_code` is written atomically (temporary file, fsync, rename) only after that, so a
  marker means nothing of the job runs: the command's own status, or 128+N when signal N
  killed it (137 for SIGKILL). Processes still there after `REAP_SECONDS` of killing (stuck
  in the kernel, or not ours to kill: setuid) are listed in `survivors` (pid and start time)
  instead, and no marker is written;
- SIGTERM/SIGINT/SIGHUP to the wrapper are passed to the command's process group, and after a
  grace period the group is killed, so a cancel ends with a marker. Those of them that
  vibesys's caller ignores (`--ignore=N,...`) the command starts with ignored, as it would
  have had it run directly; every other signal disposition, limit, namespace, cgroup,
  capability and affinity it inherits unchanged.

It imports only the standard library (`ctypes` for prctl).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

GRACE_SECONDS = 5.0
#: How long the processes left behind are killed and reaped before the wrapper gives up on
#: them: a fork bomb or a process stuck in the kernel must not hold the job's end for ever.
REAP_SECONDS = 30.0
PR_SET_CHILD_SUBREAPER = 36
REFUSED_EXIT = 85
#: Test hook: `VIBESYS_STALL=first_wrapper_before_claim` stops the first attempt's wrapper
#: (SIGSTOP) just before it claims, the way a frozen node or an overloaded host would; later
#: attempts, which inherit the same recorded environment, run normally.
STALL_ENV = "VIBESYS_STALL"
#: The dispositions a command gets back by default, as `subprocess` restores them.
RESTORED = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


def _write_atomic(path: str, text: str) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    _write_synced(temporary, text)
    os.replace(temporary, path)
    _fsync_dir(os.path.dirname(path))


def _write_synced(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _claim(directory: str, text: str) -> bool:
    """Link a complete claim into place; False when the attempt is claimed already."""
    temporary = os.path.join(directory, f"claim.{os.getpid()}.tmp")
    _write_synced(temporary, text)
    try:
        os.link(temporary, os.path.join(directory, "claim"))
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)
    _fsync_dir(directory)
    return True


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read().decode("ascii", "replace")
    return stat[stat.rindex(")") + 2 :].split()[19]


def _now_iso() -> str:
    """Now in UTC as `datetime.isoformat()` writes it, to the microsecond."""
    now = time.time_ns()
    seconds, nanos = divmod(now, 1_000_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{nanos // 1000:06d}+00:00"


def _stall_if_asked(point: str, directory: str) -> None:
    if point in os.environ.get(STALL_ENV, "").split(",") and os.path.basename(directory) == "1":
        os.kill(os.getpid(), signal.SIGSTOP)


def _refuse(directory: str) -> int:
    try:
        with open(os.path.join(directory, "claim"), encoding="utf-8", errors="replace") as held:
            holder = held.read()
    except OSError:
        holder = "(unreadable)\n"
    _write_atomic(
        os.path.join(directory, "refused"),
        "vibesys: this attempt is claimed by someone else; nothing was run\n" + holder,
    )
    return REFUSED_EXIT


def main(argv: list[str]) -> int:
    attempt_dir, job_name, separator, *command = argv[1:]
    ignored: list[int] = []
    notify: int | None = None
    while separator.startswith(("--ignore=", "--notify=")) and command:
        option, _, value = separator.partition("=")
        if option == "--ignore":
            ignored = [int(s) for s in value.split(",")]
        else:
            notify = int(value)
        separator, *command = command
    if separator != "--" or not command:
        print(
            "usage: local_wrapper.py ATTEMPT_DIR JOB_NAME [--ignore=N,...] [--notify=FD] -- CMD...",
            file=sys.stderr,
        )
        return 2
    directory = attempt_dir
    stopped: list[bool] = []
    child: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        # Before the command starts, a signal only marks it as cancelled: it never starts.
        if stopped:
            return
        stopped.append(True)
        if child:
            _signal_group(child[0], signal.SIGTERM)
            signal.setitimer(signal.ITIMER_REAL, GRACE_SECONDS)

    def escalate(_signum: int, _frame: object) -> None:
        if child:
            _signal_group(child[0], signal.SIGKILL)

    # Handlers first: a cancel that arrives while the claim is being written is not lost.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    # The grace timer is this wrapper's; the command gets its caller's SIGALRM disposition.
    alarm_ignored = signal.signal(signal.SIGALRM, escalate) == signal.SIG_IGN
    _stall_if_asked("first_wrapper_before_claim", directory)
    pid = os.getpid()
    record = {
        "kind": "job",
        "job_name": job_name,
        "pid": pid,
        "start_time": _start_time(pid),
        "host": os.uname().nodename,
        # As precise as the journal's own times, so the attempt's start never reads as before
        # the invocation was recorded.
        "started_at": _now_iso(),
    }
    if not _claim(directory, "".join(f"{k}={v}\n" for k, v in record.items())):
        os._exit(_refuse(directory))
    if notify is not None:  # the adapter waits on this instead of polling for the claim
        try:
            os.write(notify, b"claimed\n")
            os.close(notify)
        except OSError:
            pass
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    out = os.open(os.path.join(directory, "stdout"), flags, 0o666)
    err = os.open(os.path.join(directory, "stderr"), flags, 0o666)
    _become_subreaper(err)
    if stopped or os.path.exists(os.path.join(directory, "cancel_requested")):
        os.write(err, b"vibesys: cancelled before the command started\n")
        code = 128 + signal.SIGTERM
    else:
        try:
            leader = _spawn(command, out, err, ignored, alarm_ignored)
        except OSError as exc:
            os.write(err, f"vibesys: cannot start {command[0]!r}: {exc.strerror}\n".encode())
            code = 127 if isinstance(exc, FileNotFoundError) else 126
        else:
            child.append(leader)
            # The wrapper leads its own session (the adapter starts it so): what has not left
            # that session is found through it even after this wrapper is killed.
            group = (
                f'{{"pgid": {leader}, "start_time": "{_start_time(leader)}", '
                f'"sid": {os.getsid(0)}}}\n'
            )
            _write_atomic(os.path.join(directory, "group"), group)
            if stopped:  # the signal came between the check and the start
                _signal_group(leader, signal.SIGTERM)
                signal.setitimer(signal.ITIMER_REAL, GRACE_SECONDS)
            code = _wait(leader)
    # Whatever the command left behind goes with it, in its group or reparented here.
    if child:
        _signal_group(child[0], signal.SIGKILL)
    survivors = _end_descendants(time.monotonic() + REAP_SECONDS)
    if survivors:
        listed = "".join(f"{pid} {started}\n" for pid, started in survivors.items())
        _write_atomic(os.path.join(directory, "survivors"), listed)
        os.write(err, f"vibesys: {len(survivors)} processes outlived the job\n".encode())
        os._exit(0)
    _write_atomic(os.path.join(directory, "exit_code"), f"{code}\n")
    os._exit(0)


def _become_subreaper(err: int) -> None:
    """Make the command's orphans this process's children, so they can all be ended."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        reason = os.strerror(ctypes.get_errno())
        os.write(err, f"vibesys: cannot reap what the job leaves behind: {reason}\n".encode())


def _end_descendants(deadline: float) -> dict[int, str]:
    """SIGKILL every process under this one and reap them until none is left: {} then. Past
    `deadline`, those still alive (pid: start time), which the caller gives up on."""
    while True:
        while True:  # reap first: with no child left there is no descendant either
            try:
                reaped, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return {}
            if reaped == 0:
                break
        found = _descendants(os.getpid())
        if time.monotonic() > deadline:
            return found
        for pid in found:
            _kill(pid, signal.SIGKILL)  # a stopped process is killed too
        time.sleep(0.005)  # a killed process takes a moment to exit


def _descendants(root: int) -> dict[int, str]:
    """The live processes under `root` (zombies left out): pid -> start time."""
    parents: dict[int, int] = {}
    started: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            parents[int(name)] = int(fields[1])
            started[int(name)] = fields[19]
    below: dict[int, str] = {}
    for pid in parents:
        ancestor = parents[pid]
        seen = 0
        while ancestor in parents and ancestor != root and seen < len(parents):
            ancestor, seen = parents[ancestor], seen + 1
        if ancestor == root:
            below[pid] = started[pid]
    return below


def _spawn(command: list[str], out: int, err: int, ignored: list[int], alarm_ignored: bool) -> int:
    """Start the command in its own process group, as `subprocess` would (stdin from
    /dev/null, the given output files, SIGPIPE and SIGXFSZ back to default, the caller's
    ignored signals ignored) without importing it; an exec failure is raised here."""
    errors_read, errors_write = os.pipe2(os.O_CLOEXEC)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    leader = os.fork()
    if leader == 0:  # the child: only what must happen before exec, then exec
        try:
            os.close(errors_read)
            os.setpgid(0, 0)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, *RESTORED):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGALRM, signal.SIG_IGN if alarm_ignored else signal.SIG_DFL)
            for signum in ignored:
                signal.signal(signum, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.closerange(3, errors_write)
            os.closerange(errors_write + 1, os.sysconf("SC_OPEN_MAX"))
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(errors_write, f"{exc.errno}".encode())
        finally:
            os._exit(127)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(errors_write)
    failed = os.read(errors_read, 64)
    os.close(errors_read)
    if failed:
        os.waitpid(leader, 0)
        errno = int(failed)
        raise (FileNotFoundError if errno == 2 else OSError)(errno, os.strerror(errno))
    return leader


def _wait(leader: int) -> int:
    """The command's status as the shell reports it: its code, or 128+N for signal N. The
    orphans reparented here meanwhile are reaped as they end, so none lingers as a zombie."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        if pid != leader:
            continue
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)


def _kill(pid: int, signum: int) -> None:
    try:  # noqa: SIM105 (contextlib is one more import on every run)
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):  # a setuid descendant: left to the bound
        pass


def _signal_group(pgid: int, signum: int) -> None:
    try:  # noqa: SIM105 (contextlib is one more import on every run)
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
