"""A command whose processes try to outlive it, and the check that none did.

The processes are found by their exact argument lists, which carry a nonce, never by the pids
the command reports: inside a PID namespace those are not this host's pids."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

import msgspec

from tests.helpers.hang_guard import wait_until


class Escapees(msgspec.Struct, frozen=True):
    nonce: str

    @property
    def argvs(self) -> list[tuple[str, ...]]:
        return [
            ("sleep", f"300.{self.nonce}"),  # setsid'd: its own session and group
            ("sleep", f"301.{self.nonce}"),  # double-forked: its parent ends at once
            ("sh", "-c", "kill -STOP $$", f"stopped-{self.nonce}"),  # setsid'd and stopped
        ]

    def script(self, then: str) -> str:
        """A shell script that starts the three, says so in `started`, then runs `then`."""
        setsid, forked, stopped = self.argvs
        return (
            f"setsid {' '.join(setsid)} & "
            f"(sleep {forked[1]} &) ; "
            f"setsid sh -c 'kill -STOP $$' {stopped[-1]} & "
            f"{then}"
        )

    def running(self) -> list[int]:
        """The escapees alive now (zombies, dead and waiting to be reaped, excluded)."""
        wanted = {"\0".join(argv).encode() + b"\0" for argv in self.argvs}
        found = []
        with os.scandir("/proc") as entries:
            for entry in entries:
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
                    stat = Path(f"/proc/{entry.name}/stat").read_bytes()
                except OSError:
                    continue
                state = stat.rpartition(b")")[2].split()[:1]
                if cmdline in wanted and state not in ([b"Z"], [b"X"], []):
                    found.append(int(entry.name))
        return found

    def wait_started(self, seconds: float = 30) -> None:
        wait_until(lambda: len(self.running()) == 3, seconds, "the three escapees to start")

    def assert_gone(self, seconds: float = 0.0) -> None:
        """None of them runs, now or within `seconds`."""
        deadline = time.monotonic() + seconds
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.02)
        left = self.running()
        assert left == [], f"processes outlived the job: {left}"

    def kill_any_left(self) -> None:
        """Cleanup for a failed test: nothing of it may outlive the test either."""
        for pid in self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def escapees() -> Escapees:
    return Escapees(str(secrets.randbelow(10**6)).zfill(6))
