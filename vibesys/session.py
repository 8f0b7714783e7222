"""`vibesys.Session`: a candidate session's host side, opened from Python.

A Session runs `vibesys session serve` as its child process (same interpreter, same vibesys),
reads the JSON document it prints, asks its bridge for the capabilities and runtime notes, and
on `close()` (or the end of its `with` block) sends it SIGTERM and waits for its teardown,
bounded by the teardown budget (then SIGKILL). Why a child process rather than the bridge's
threads in the framework's own process: the session then tears itself down when the framework
dies in any way (its parent watch also covers SIGKILL and the OOM killer, which no handler in
the framework sees); the evaluations' wrappers are the child's children, never reaped by (or
lost to) a framework's own SIGCHLD handling; and a crash on either side is isolated. Session
installs nothing process-wide: no signal handler, no atexit hook.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

from msgspec import Struct

from vibesys.bridge import client as eval_client
from vibesys.bridge.capabilities import SessionCapabilities
from vibesys.errors import ERROR_LINE, UsageError, VibesysError
from vibesys.osutil.threads import await_in_thread

__all__ = ["Mount", "Session"]

#: Beyond the teardown budget, how long `close()` waits for the serve process to exit (after the
#: evaluations settle it gives connected helpers 5 s, then cuts their sockets).
EXIT_GRACE_SECONDS: Final = 15.0
#: How long the log forwarder may drain what the serve process wrote once it has exited.
LOG_DRAIN_SECONDS: Final = 2.0
#: The serve process's last lines kept to say why a start failed.
_KEPT_LINES: Final = 40

PathArg = str | os.PathLike[str]


class Mount(Struct, frozen=True):
    """A host path the container must see, at `target`, writable or not."""

    source: Path
    target: Path
    read_only: bool

    @property
    def volume(self) -> str:
        """As `docker run -v` (and podman) take it."""
        return f"{self.source}:{self.target}{':ro' if self.read_only else ''}"


def _word(value: object) -> str:
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _log_to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class Session:
    """One candidate session: the evaluation bridge, and the GPU broker when the Slurm site has
    `[vibesys.agent_gpu]`. The parameters are `vibesys session serve`'s options (exactly one
    site: `local=True`, `slurm_config=`, or `profile=`). `start()` (or `with`) starts it and
    returns once it serves; a failed start raises UsageError with the serve's reason, and
    leaves nothing. `close()` is idempotent and returns the serve's exit status (0; 4 when an
    evaluation was left UNRESOLVED)."""

    def __init__(
        self,
        run_id: str,
        workspace: PathArg,
        *,
        local: bool = False,
        unconfined: bool = False,
        slurm_config: PathArg | None = None,
        profile: str | None = None,
        clusters_config: PathArg | None = None,
        resources: PathArg | None = None,
        journal: PathArg | None = None,
        state_dir: PathArg | None = None,
        results_dir: PathArg | None = None,
        allow_env: Sequence[str] = (),
        allow_uids: Sequence[int] = (),
        default_timeout: int = 3600,
        max_timeout: int = 86400,
        max_retries: int = 2,
        teardown_seconds: float = 120.0,
        artifact_max: int | None = None,
        artifact_sum_max: int | None = None,
        down: bool = False,
        check: bool = True,
        start_timeout: float = 600.0,
        log: Callable[[str], None] = _log_to_stderr,
    ) -> None:
        given: dict[str, object] = {
            "--run-id": run_id,
            "--workspace": workspace,
            "--slurm-config": slurm_config,
            "--profile": profile,
            "--clusters-config": clusters_config,
            "--resources": resources,
            "--journal": journal,
            "--state-dir": state_dir,
            "--results-dir": results_dir,
            "--default-timeout": default_timeout,
            "--max-timeout": max_timeout,
            "--max-retries": max_retries,
            "--teardown-seconds": teardown_seconds,
            "--artifact-max": artifact_max,
            "--artifact-sum-max": artifact_sum_max,
        }
        options = [w for flag, v in given.items() if v is not None for w in (flag, _word(v))]
        switches = {"--local": local, "--unconfined": unconfined, "--down": down}
        options += [flag for flag, on in switches.items() if on]
        options += [word for name in allow_env for word in ("--allow-env", name)]
        options += [word for uid in allow_uids for word in ("--allow-uid", str(uid))]
        options += ["--check" if check else "--no-check"]
        self._options = options
        self._teardown_seconds = teardown_seconds
        self._start_timeout = start_timeout
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None
        self._forwarder: threading.Thread | None = None
        self._log_file: IO[bytes] | None = None
        self._forwarding = threading.Event()
        self._last_lines: collections.deque[str] = collections.deque(maxlen=_KEPT_LINES)
        self._document: dict[str, Any] | None = None
        self._capabilities: SessionCapabilities | None = None
        self._notes: str | None = None
        self._status: int | None = None
        #: set when an asyncio start was cancelled: the start stops waiting and closes
        self._abandoned = threading.Event()

    # -- start and close ------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the session and return once it serves (its document read, its capabilities
        asked). Whatever happens meanwhile (a refusal, a timeout, KeyboardInterrupt), what was
        started is closed before the exception leaves."""
        if self._process is not None:
            raise UsageError("this Session was started already; open a new one")
        argv = [sys.executable, "-m", "vibesys", "session", "serve", *self._options]
        # Its log goes to an unlinked file this process tails, not a pipe: a pipe would break
        # under the serve when the framework dies, and its teardown would fail on its first log
        # line. Its own process group: a Ctrl-C at the terminal reaches the framework, which
        # closes the session; the serve's parent watch (this process) covers its death.
        self._log_file = tempfile.TemporaryFile()  # noqa: SIM115  # closed with the serve
        try:
            self._process = subprocess.Popen(
                [*argv, "--parent-pid", str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._log_file,
                start_new_session=True,
            )
            self._forwarder = threading.Thread(
                target=self._forward_log, name="vibesys-session-log", daemon=True
            )
            self._forwarder.start()
            self._document = self._read_document()
            self._capabilities, self._notes = self._ask_capabilities()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> int:
        """Tear the session down: SIGTERM, then wait for its teardown (bounded by the
        teardown budget and a grace; past it, SIGKILL). Idempotent: the serve's exit status
        (0 clean, 4 an evaluation left UNRESOLVED, negative: the signal that ended it). An
        interrupted close may be called again; the serve goes on tearing down meanwhile."""
        process = self._process
        if process is None:  # never started, or its start failed to spawn it
            if self._log_file is not None:
                self._log_file.close()
            return 0
        if self._status is not None:
            return self._status
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        try:
            status = process.wait(self._teardown_seconds + EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._log(f"vibesys session: pid {process.pid} outlived its teardown; killed")
            process.kill()
            status = process.wait()
        self._stop_forwarding()
        self._status = status
        return status

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        """`start()` on a thread of its own. Cancelled meanwhile, the start stops waiting for
        the serve and closes what it started before the cancel goes on."""
        try:
            return await await_in_thread(self.start, on_cancel=self._abandoned.set)
        except asyncio.CancelledError:
            await await_in_thread(self.close)  # the start may have finished before the cancel
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        """`close()` on a thread of its own; a cancel meanwhile waits for the teardown."""
        await await_in_thread(self.close)

    def __repr__(self) -> str:  # never the document: it holds the tokens
        pid = self._process.pid if self._process is not None else None
        return f"<vibesys.Session pid={pid} status={self._status}>"

    # -- what to give the container ---------------------------------------------------------

    @property
    def document(self) -> dict[str, Any]:
        """The serve's JSON document, as `vibesys session serve` prints it (a secret: it holds
        the tokens)."""
        return copy.deepcopy(self._started())

    @property
    def environment(self) -> dict[str, str]:
        """The variables to give the container (the tokens among them)."""
        return dict(self._started()["environment"])

    @property
    def env_file(self) -> Path:
        """The environment as a `0600` Docker `--env-file`, removed at teardown."""
        return Path(self._started()["env_file"])

    @property
    def state_dir(self) -> Path:
        return Path(self._started()["state_dir"])

    @property
    def results_dir(self) -> Path:
        return Path(self._started()["results_dir"])

    @property
    def pid(self) -> int:
        """The serve process."""
        return int(self._started()["pid"])

    @property
    def clients(self) -> dict[str, Path]:
        """The stdlib-only helpers to put in the container: vibesys-eval, and vibesys-gpu when
        the site has GPU commands."""
        document = self._started()
        found = {"vibesys-eval": Path(document["bridge"]["client"])}
        if document["gpu"] is not None:
            found["vibesys-gpu"] = Path(document["gpu"]["client"])
        return found

    @property
    def mounts(self) -> tuple[Mount, ...]:
        """What the container must mount, each at its host path (so that the environment's
        paths mean the same inside): the workspace, each socket's directory, the results
        (read-only) and the helpers (read-only). The token files are not among them."""
        document = self._started()
        workspace = Path(document["workspace"])
        sockets = [Path(document["bridge"]["socket"]).parent]
        if document["gpu"] is not None:
            sockets.append(Path(document["gpu"]["socket"]).parent)
        found = [Mount(workspace, workspace, False)]
        found += [Mount(path, path, False) for path in sockets]
        found.append(Mount(self.results_dir, self.results_dir, True))
        found += [Mount(path, path, True) for path in self.clients.values()]
        return tuple(found)

    @property
    def capabilities(self) -> SessionCapabilities:
        """What the session offers its agent, as its bridge answers `vibesys-eval
        capabilities`."""
        self._started()
        assert self._capabilities is not None
        return self._capabilities

    def notes(self) -> str:
        """The agent's runtime notes (Markdown), as `vibesys-eval capabilities --notes` prints
        them."""
        self._started()
        assert self._notes is not None
        return self._notes

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- the serve process ------------------------------------------------------------------

    def _started(self) -> dict[str, Any]:
        if self._document is None or self._status is not None:
            raise UsageError("the session is not serving (start() it, or it was closed)")
        return self._document

    def _read_document(self) -> dict[str, Any]:
        """The JSON document the serve prints once it listens; else why it did not start."""
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout.fileno()
        deadline = time.monotonic() + self._start_timeout
        text = b""
        while True:
            left = deadline - time.monotonic()
            if self._abandoned.is_set():
                raise asyncio.CancelledError  # the asyncio caller was cancelled while we waited
            if left <= 0:
                raise VibesysError(f"the session did not start within {self._start_timeout} s")
            ready, _, _ = select.select([stdout], [], [], min(left, 0.1))
            if not ready:
                continue
            chunk = os.read(stdout, 65536)
            if not chunk:
                raise self._start_failure()
            text += chunk
            if text.endswith(b"}\n"):
                with contextlib.suppress(ValueError):
                    parsed = json.loads(text)
                    if isinstance(parsed, dict) and parsed.get("version") == 1:
                        return parsed

    def _start_failure(self) -> UsageError:
        """The serve ended without serving: its own one-line reason (it tore down what it
        had started before it exited)."""
        assert self._process is not None
        status = self._process.wait(self._teardown_seconds + EXIT_GRACE_SECONDS)
        self._stop_forwarding()
        self._status = status
        errors = [line for line in self._last_lines if line.startswith(ERROR_LINE)]
        reason = errors[-1].removeprefix(ERROR_LINE) if errors else f"exit {status}"
        return UsageError(f"the session did not start: {reason}")

    def _ask_capabilities(self) -> tuple[SessionCapabilities, str]:
        """The capabilities and notes, from the bridge itself (what its helpers are told)."""
        environment = self.environment
        body = {"version": eval_client.PROTOCOL_VERSION, "op": "capabilities"}
        line = eval_client.line_of(body | {"token": environment["VIBESYS_EVAL_TOKEN"]})
        try:
            with eval_client.connect(environment["VIBESYS_EVAL_SOCKET"]) as conn:
                for reply in eval_client.replies(conn, line):
                    if reply.get("type") == "capabilities":
                        # As JSON: the strict model takes arrays only from JSON.
                        found = json.dumps(reply["capabilities"])
                        return SessionCapabilities.model_validate_json(found), str(reply["notes"])
                    raise VibesysError(f"the bridge answered {reply.get('type')}, not capabilities")
        except (OSError, ValueError) as exc:
            raise VibesysError(f"the session's bridge did not answer: {exc}") from None
        raise VibesysError("the session's bridge closed without its capabilities")

    def _forward_log(self) -> None:
        """Pass the serve's log lines on, and keep the last ones (a failed start's reason),
        until the serve has exited and all it wrote is read (or `_stop_forwarding`)."""
        assert self._process is not None and self._log_file is not None
        log, offset, pending = self._log_file.fileno(), 0, b""
        while True:
            ended = self._process.poll() is not None  # before the read: nothing comes after
            chunk = os.pread(log, 65536, offset)
            offset += len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for raw in filter(None, lines):
                line = raw.decode("utf-8", "replace")
                self._last_lines.append(line)
                with contextlib.suppress(Exception):  # a failing log never stops the drain
                    self._log(line)
            if not chunk and (ended or self._forwarding.wait(0.1)):
                return

    def _stop_forwarding(self) -> None:
        forwarder = self._forwarder
        if forwarder is not None:
            forwarder.join(LOG_DRAIN_SECONDS)
            self._forwarding.set()
            forwarder.join()
        assert self._process is not None and self._process.stdout is not None
        self._process.stdout.close()
        if self._log_file is not None:
            self._log_file.close()
