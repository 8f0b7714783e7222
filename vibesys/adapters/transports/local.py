"""The `local` transport: Slurm commands run on this host through a configurable shell prefix.

`shell_command` (default `bash -c`) receives the command as ONE argument built by `shlex.join`,
so a site's login-container wrapper can precede the shell and user input is never spliced into
a command line by string concatenation (`shell_join` also keeps a program named like a keyword
or an assignment from being read as one).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

from vibesys.adapters.transports.base import (
    CommandResult,
    Sink,
    check_argv,
    map_transport_errors,
    shell_join,
)
from vibesys.errors import UsageError

__all__ = ["DEFAULT_SHELL_COMMAND", "LocalTransport"]

DEFAULT_SHELL_COMMAND: tuple[str, ...] = ("bash", "-c")
#: Bytes copied per read when streaming a command's output.
CHUNK = 1 << 20

_File = int | IO[Any] | None


class LocalTransport:
    """Runs argv as `[*shell_command, shlex.join(argv)]` in a new session."""

    def __init__(
        self,
        shell_command: Sequence[str] = DEFAULT_SHELL_COMMAND,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(shell_command, str) or not shell_command:
            raise UsageError("shell_command must be a non-empty list of arguments")
        self.shell_command = tuple(shell_command)
        self._env = dict(env) if env is not None else None

    def command_line(self, argv: Sequence[str]) -> list[str]:
        """The argv actually executed for `argv`."""
        return [*self.shell_command, shell_join(argv)]

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        wanted = check_argv(argv)
        what = shlex.join(wanted)
        process = self._start(wanted, with_stdin=input is not None, env=env)
        with map_transport_errors(what, maybe_effect=maybe_effect):
            try:
                out, err = process.communicate(input, timeout=timeout)
            except BaseException:
                _kill_group(process)
                _reap(process)
                raise
        return CommandResult(
            returncode=process.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            argv=wanted,
        )

    def stream(
        self, argv: Sequence[str], sink: Sink, *, timeout: float | None = None
    ) -> CommandResult:
        wanted = check_argv(argv)
        process = self._start(wanted, with_stdin=False)
        assert process.stdout is not None and process.stderr is not None
        errors: list[bytes] = []
        # stderr drains on its own thread so a chatty command cannot block on a full pipe.
        stderr = process.stderr
        drain = threading.Thread(target=lambda: errors.append(stderr.read()))
        drain.start()
        try:
            with map_transport_errors(shlex.join(wanted), maybe_effect=False):
                while chunk := os.read(process.stdout.fileno(), CHUNK):
                    sink.write(chunk)
                process.wait(timeout=timeout)
        except BaseException:
            _kill_group(process)
            process.wait()
            raise
        finally:
            drain.join()
            process.stdout.close()
            process.stderr.close()
        return CommandResult(
            returncode=process.returncode,
            stdout="",
            stderr=b"".join(errors).decode("utf-8", "replace"),
            argv=wanted,
        )

    def _start(
        self, wanted: tuple[str, ...], *, with_stdin: bool, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start `wanted` with piped output. A failure to start proves it did not run."""
        with map_transport_errors(shlex.join(wanted), maybe_effect=False):
            return subprocess.Popen(
                self.command_line(wanted),
                stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else self._env,
                # Its own process group, so a timeout can kill everything the shell started:
                # killing only the shell leaves grandchildren holding our pipes open.
                start_new_session=True,
            )

    def popen(
        self,
        argv: Sequence[str],
        *,
        stdout: _File = None,
        stderr: _File = None,
        stdin: _File = subprocess.DEVNULL,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` (a foreground srun) and return at once, output going to `stdout` and
        `stderr` as it is produced. The child runs in its own session so a Ctrl-C at the
        terminal reaches vibesys only, which then cancels the job by name; srun's own SIGINT
        handling would otherwise race with that."""
        wanted = check_argv(argv)
        with map_transport_errors(shlex.join(wanted), maybe_effect=False):
            return subprocess.Popen(
                self.command_line(wanted),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=dict(env) if env is not None else self._env,
                cwd=cwd,
                start_new_session=True,
            )


def _reap(process: subprocess.Popen[bytes]) -> None:
    try:
        process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        # A process that left the group still holds our pipes: stop reading rather than hang.
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        process.wait()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
