"""What every transport offers: run one argv on the Slurm side and return what it printed.

A transport never interprets a command's exit status (sbatch's 1 is a rejection, squeue's 1 may
be a purged job id: only the adapter knows). It only reports failures to run the command at all,
as `BackendUnavailable`.
"""

from __future__ import annotations

import errno
import shlex
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol

from msgspec import Struct

from vibesys.adapters.base import Sink
from vibesys.errors import BackendMisconfigured, BackendUnavailable, UsageError

__all__ = ["CommandResult", "Runner", "Sink", "check_argv", "map_transport_errors", "shell_join"]

#: Words a shell reads as syntax in command position even though shlex leaves them unquoted.
_RESERVED: frozenset[str] = frozenset(
    [
        "case",
        "coproc",
        "do",
        "done",
        "elif",
        "else",
        "esac",
        "fi",
        "for",
        "function",
        "if",
        "in",
        "select",
        "then",
        "time",
        "until",
        "while",
    ]
)


class CommandResult(Struct, frozen=True):
    returncode: int
    stdout: str
    stderr: str
    argv: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def evidence(self) -> str:
        """One line for the journal: what ran, how it ended, and the start of its stderr."""
        line = f"{shlex.join(self.argv)} -> rc={self.returncode}"
        stderr = " ".join(self.stderr.split())
        if stderr:
            line += f" stderr: {stderr[:500]}"
        return line


class Runner(Protocol):
    """Runs one command where Slurm is (this host, or a login node)."""

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run `argv` to completion. `maybe_effect=True` marks a command (sbatch) that may take
        effect even when we never see its answer: a timeout then raises BackendUnavailable with
        `maybe_submitted=True`. `env`, when given, is the environment the command gets (a job's
        recorded one; over SSH only its allowlisted variables travel). Raises
        BackendUnavailable when the command cannot be run."""
        ...

    def stream(
        self, argv: Sequence[str], sink: Sink, *, timeout: float | None = None
    ) -> CommandResult:
        """Run `argv`, copying its stdout into `sink` as it arrives, in bounded chunks (a log
        of gigabytes never sits in memory). The result's `stdout` is empty; its `stderr` is
        kept. A connection lost mid-way raises TransportLost after the bytes already copied."""
        ...


#: exec(2) failures that prove the program never started and will not start if tried again.
_EXEC_REFUSED: frozenset[int] = frozenset(
    {errno.ENOENT, errno.E2BIG, errno.ENOEXEC, errno.EACCES, errno.EPERM, errno.ENOTDIR}
)
_EXEC_FIX: dict[int, str] = {
    errno.ENOENT: "install the program or fix shell_command / PATH",
    errno.E2BIG: "the command line is too long for the system; pass the data in a file instead",
    errno.ENOEXEC: "the file is not an executable program",
    errno.EACCES: "make the program executable, or fix shell_command",
}


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """`argv` as a tuple, refusing what no command line can carry."""
    if isinstance(argv, str):
        raise UsageError("argv must be a sequence of arguments, not one string")
    if not argv:
        raise UsageError("empty command")
    if any("\0" in argument for argument in argv):
        raise UsageError("an argument holds a NUL byte, which no command line can carry")
    return tuple(argv)


def shell_join(argv: Sequence[str]) -> str:
    """`shlex.join`, except that the program name is always read as a program: shlex leaves
    `if` or `A=1` unquoted, and a shell would take them for a keyword or an assignment."""
    words = check_argv(argv)
    first = words[0]
    if first in _RESERVED or "=" in first:
        head = "'" + first.replace("'", "'\"'\"'") + "'"
        return " ".join([head, *(shlex.quote(word) for word in words[1:])])
    return shlex.join(words)


@contextmanager
def map_transport_errors(what: str, *, maybe_effect: bool = False) -> Iterator[None]:
    """Translate the OS's failures to run `what` into BackendUnavailable, or into
    BackendMisconfigured when the system refused to execute the program at all.

    A timeout means the command started and we lost sight of it, so it may have taken effect
    when `maybe_effect` is set. A failure to start (missing shell, permissions) proves it did
    not, whatever `maybe_effect` says: wrap only the start in a `maybe_effect=False` block.
    """
    try:
        yield
    except subprocess.TimeoutExpired as exc:
        raise BackendUnavailable(
            f"{what}: no answer within {exc.timeout:g} s",
            evidence=f"{what}: timed out after {exc.timeout:g} s",
            maybe_submitted=maybe_effect,
        ) from exc
    except OSError as exc:
        if exc.errno in _EXEC_REFUSED:
            # The system refused to start the program: nothing ran, and trying again the same
            # way fails the same way.
            reason = exc.strerror or str(exc)
            raise BackendMisconfigured(
                f"{what}: cannot execute {exc.filename or 'the program'}: {reason}",
                evidence=f"{what}: {exc}",
                fix=_EXEC_FIX.get(exc.errno or 0, "check the command and the transport settings"),
            ) from exc
        raise BackendUnavailable(
            f"{what}: {exc.strerror or exc}",
            evidence=f"{what}: {exc}",
            maybe_submitted=maybe_effect,
        ) from exc
