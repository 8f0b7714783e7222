"""The one place vibesys starts SkyPilot: argv sequences run by an injectable function.

vibesys never imports `sky`. It runs `<venv>/bin/sky ...` or `<venv>/bin/python sdk_helper.py
...` (SkyPilot's own virtual environment, created by scripts/skypilot-env) and reads what they
print. Tests inject a function that plays a scripted fake `sky`, or point `venv` at one.

Failures to run a command at all become typed errors here (missing executable, timeout), with
secret values redacted; what a command's exit status means is for the caller to say.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from msgspec import Struct, field

from vibesys.adapters.skypilot.errors import (
    SkyMalformedOutput,
    SkyNotInstalled,
    SkyTimeout,
    SkyVersionMismatch,
)
from vibesys.adapters.skypilot.parse import parse_version, strip_ansi
from vibesys.adapters.transports.ssh_errors import REDACTED, redact

__all__ = [
    "DEFAULT_VENV",
    "PINNED_VERSION",
    "Completed",
    "RunCommand",
    "SkyCli",
    "default_venv",
    "run_subprocess",
]

PINNED_VERSION: Final = "0.14.1"
#: Where scripts/skypilot-env puts SkyPilot unless VIBESYS_SKY_VENV says otherwise.
DEFAULT_VENV: Final = f"~/.local/share/vibesys/skypilot-{PINNED_VERSION}"
HELPER: Final = Path(__file__).with_name("sdk_helper.py")
# "KEY": "value" pairs in JSON (SkyPilot prints the job's env vars, secrets included, as JSON on
# the srun command lines it quotes in errors).
_JSON_SECRET = re.compile(
    r'(?P<name>"[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|credential|key)'
    r'[A-Za-z0-9_.-]*"\s*:\s*)"(?:[^"\\]|\\.)*"',
    re.IGNORECASE,
)


def default_venv() -> Path:
    return Path(os.environ.get("VIBESYS_SKY_VENV") or DEFAULT_VENV).expanduser()


class Completed(Struct, frozen=True):
    returncode: int
    stdout: str
    stderr: str


#: Runs one argv with an environment and a timeout. Raises FileNotFoundError when the program is
#: missing and subprocess.TimeoutExpired when it does not end in time (as subprocess.run does).
RunCommand = Callable[[Sequence[str], Mapping[str, str], float], Completed]


def run_subprocess(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Completed:
    """The real runner: no stdin, output decoded leniently, its own session so a timeout's kill
    reaches only this command (the API server it may have started lives on in its own)."""
    done = subprocess.run(
        list(argv),
        env=dict(env),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        start_new_session=True,
        check=False,
    )
    return Completed(
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def redact_sky(text: str, secrets: Iterable[str] = ()) -> str:
    return _JSON_SECRET.sub(lambda m: f'{m["name"]}"{REDACTED}"', redact(text, secrets))


class SkyCli(Struct):
    """SkyPilot's CLI and SDK helper in one virtual environment, run through `runner`."""

    venv: Path = field(default_factory=default_venv)
    #: added to this process's environment for every command (e.g. HOME of SkyPilot's client
    #: state, SKYPILOT_API_SERVER_LOCAL_PORT)
    env: Mapping[str, str] = field(default_factory=dict)
    runner: RunCommand = run_subprocess
    #: values never to appear in an error message or evidence (e.g. the task's secrets)
    secrets: tuple[str, ...] = ()
    timeout: float = 120.0
    #: check the version before the first command (the adapter does; plain tools need not)
    verify_version: bool = False
    _checked: bool = False

    @property
    def sky(self) -> Path:
        return self.venv / "bin" / "sky"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def environment(self) -> dict[str, str]:
        # Telemetry off: the machine may not reach it, and an evaluation is nobody's business.
        return {**os.environ, "SKYPILOT_DISABLE_USAGE_COLLECTION": "1", **self.env}

    def run(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        maybe_effect: bool = False,
        helper: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> Completed:
        """Run `sky ARGS` (or the SDK helper with ARGS), with `env` added to its environment
        for this command only. The exit status is not interpreted."""
        if self.verify_version and not self._checked:
            self.check_version()
        return self._run(args, timeout=timeout, maybe_effect=maybe_effect, helper=helper, env=env)

    def _run(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        maybe_effect: bool = False,
        helper: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> Completed:
        program = [str(self.python), str(HELPER)] if helper else [str(self.sky)]
        argv = [*program, *args]
        limit = timeout if timeout is not None else self.timeout
        shown = self.clean(shlex.join(["sky", *args]))
        try:
            done = self.runner(argv, {**self.environment(), **(env or {})}, limit)
        except FileNotFoundError:
            raise SkyNotInstalled(
                f"SkyPilot is not installed in {self.venv} (run scripts/skypilot-env, or set "
                "VIBESYS_SKY_VENV)",
                evidence=f"{shown}: {argv[0]} not found",
            ) from None
        except OSError as exc:  # not executable, a bad interpreter line: it never started
            raise SkyNotInstalled(
                f"SkyPilot in {self.venv} cannot run: {exc.strerror or exc} (recreate it with "
                "scripts/skypilot-env)",
                evidence=f"{shown}: {argv[0]}: {exc.strerror or exc}",
            ) from None
        except subprocess.TimeoutExpired:
            raise SkyTimeout(
                f"{shown}: no answer within {limit:g} s",
                evidence=f"{shown}: timed out after {limit:g} s",
                maybe_submitted=maybe_effect,
            ) from None
        return Completed(done.returncode, done.stdout, done.stderr)

    def evidence(self, args: Sequence[str], done: Completed, hide: Iterable[str] = ()) -> str:
        """One redacted line for the journal: what ran, how it ended, the end of its output
        (`hide`: more values never to show, e.g. those a command was given)."""
        line = f"{shlex.join(['sky', *args])} -> rc={done.returncode}"
        tail = " ".join(strip_ansi(done.stderr or done.stdout).split())[-400:]
        if tail:
            line += f": {tail}"
        return self.clean(line, hide)

    def clean(self, text: str, hide: Iterable[str] = ()) -> str:
        return redact_sky(text, (*self.secrets, *hide))

    def check_version(self, timeout: float = 60.0) -> str:
        """Refuse any SkyPilot but the pinned one (once per instance)."""
        args = ["--version"]
        done = self._run(args, timeout=timeout)
        if done.returncode != 0:
            raise SkyNotInstalled(
                f"{self.sky} --version failed", evidence=self.evidence(args, done)
            )
        try:
            version = parse_version(done.stdout)
        except SkyMalformedOutput as exc:
            raise SkyNotInstalled(str(exc), evidence=self.evidence(args, done)) from None
        if version != PINNED_VERSION:
            raise SkyVersionMismatch(
                f"SkyPilot {version} in {self.venv}, but vibesys needs exactly {PINNED_VERSION} "
                "(run scripts/skypilot-env)"
            )
        self._checked = True
        return version
