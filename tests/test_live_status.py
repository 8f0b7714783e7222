"""The live status line (vibesys/cli/live.py): on a terminal `vibesys run` shows one updating line
while the job runs and erases it before the job's output; without a terminal (or with
`--json`) nothing of it is written. Runs the real command under a pseudo-terminal (`pty`)."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from msgspec.structs import replace

from vibesys.cli.live import PROGRESS_MIN_BYTES, LiveStatus, status_text
from vibesys.engine.seen import Seen, Sight
from vibesys.journal_schema import Invocation
from vibesys.states import FailureClass, JobState

JOB = ["sh", "-c", "sleep 1.5; echo done"]
ERASE_LINE = b"\x1b[2K"


def run_in(
    tmp_path: Path,
    *args: str,
    stdout_tty: bool,
    stderr_tty: bool,
    on_output: Callable[[bytes], None] | None = None,
) -> bytes:
    """`vibesys run ...` with stdout and/or stderr on a pseudo-terminal; every byte written to
    either, in order when both share the terminal (`on_output` sees them as they come)."""
    master, slave = pty.openpty()
    outputs = {True: slave, False: subprocess.PIPE}
    env = {k: v for k, v in os.environ.items() if k not in ("VIBESYS_FAILPOINTS", "NO_COLOR")}
    process = subprocess.Popen(
        [sys.executable, "-m", "vibesys", *args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=outputs[stdout_tty],
        stderr=outputs[stderr_tty],
    )
    os.close(slave)
    seen = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed
                break
            if not data:
                break
            seen += data
            if on_output is not None:
                on_output(bytes(seen))
        elif process.poll() is not None:
            break
    out, err = process.communicate(timeout=60)
    os.close(master)
    assert process.returncode == 0, (bytes(seen), out, err)
    return bytes(seen) + (out or b"") + (err or b"")


@pytest.mark.parametrize(
    ("stdout_tty", "stderr_tty", "extra"),
    [(False, False, ()), (True, False, ()), (False, True, ()), (True, True, ("--json",))],
    ids=["pipes", "stdout-only", "stderr-only", "json"],
)
def test_no_status_line_without_a_terminal_on_both(
    tmp_path: Path, stdout_tty: bool, stderr_tty: bool, extra: tuple[str, ...]
) -> None:
    written = run_in(
        tmp_path, "run", *extra, "--", *JOB, stdout_tty=stdout_tty, stderr_tty=stderr_tty
    )
    assert b"done" in written
    assert b"\x1b[" not in written  # no control sequence at all
    assert b"running" not in written and "·".encode() not in written


def test_the_status_line_appears_and_is_erased_before_the_output(tmp_path: Path) -> None:
    written = run_in(tmp_path, "run", "--", *JOB, stdout_tty=True, stderr_tty=True)
    before, _, after = written.partition(b"done")
    assert b"running \xc2\xb7 0:0" in before  # `<id> running · 0:01` while the job ran
    last_line = before.rfind(b"running")
    assert ERASE_LINE in before[last_line:], "the status line was not erased before the output"
    # After the output the line may be drawn again while the job winds down (below the output,
    # as a terminal's progress line stays at the bottom), but it is erased before the summary:
    # nothing of it stays on the screen.
    summary = after.rfind(b"DONE COMPLETED exit 0")
    assert summary >= 0
    redrawn = after.rfind(b"running", 0, summary)
    if redrawn >= 0:
        assert ERASE_LINE in after[redrawn:summary], "a status line stays above the summary"
    assert b"running" not in after[summary:]


def test_wait_shows_the_status_line_and_erases_it_before_the_summary(tmp_path: Path) -> None:
    # The job ends once the test has seen `wait` draw its line (bounded at 60 s), so a slow
    # start of `wait` on a busy machine cannot find it ended already.
    go = tmp_path / "go"
    job = f"for i in $(seq 600); do [ -e {go} ] && exit 0; sleep 0.1; done; exit 1"
    started = subprocess.run(
        [sys.executable, "-m", "vibesys", "run", "--detach", "--json", "--", "sh", "-c", job],
        cwd=tmp_path,
        capture_output=True,
        check=True,
        timeout=60,
    )
    invocation_id = json.loads(started.stdout)["id"]  # --json: one object, even detached

    def release(seen: bytes) -> None:
        if b"running" in seen:
            go.touch()

    written = run_in(
        tmp_path, "wait", invocation_id, stdout_tty=True, stderr_tty=True, on_output=release
    )
    assert b"DONE COMPLETED exit 0" in written, written
    before, _, after = written.partition(b"DONE COMPLETED exit 0")
    assert b"running \xc2\xb7 0:0" in before, written  # drawn while it waited
    last_line = before.rfind(b"running")
    assert ERASE_LINE in before[last_line:], "the status line was not erased before the summary"
    assert b"running" not in after


def invocation(state: JobState = JobState.RUNNING) -> Invocation:
    return Invocation(
        id="0123456789ab",
        label=None,
        adapter="sbatch",
        command=["true"],
        recorded_request={},
        state=state,
        version=3,
        attempt=1,
        max_retries=2,
        retries=0,
        outcome=None,
        exit_code=None,
        failure_class=None,
        cancel_requested=False,
        not_before=None,
        invocation_dir="/runs/0123456789ab",
        created_at=datetime(2030, 1, 1, tzinfo=UTC),
        updated_at=datetime(2030, 1, 1, tzinfo=UTC),
        lease_owner=None,
        lease_expires_at=None,
    )


@pytest.mark.parametrize(
    ("seen", "elapsed", "expected"),
    [
        (None, 0, "0123456789ab submitted · 0:00"),
        (
            Seen(Sight.QUEUED, "", "5", reason="QOSMaxJobsPerUserLimit", partition="main"),
            75,
            "0123456789ab queued (QOSMaxJobsPerUserLimit) in main · 1:15",
        ),
        (
            Seen(Sight.QUEUED, "", "5", reason="Resources", partition="main,priority"),
            12,
            "0123456789ab queued (Resources) in main,priority · 0:12",
        ),
        (
            Seen(Sight.RUNNING, "", "5", partition="gpu", nodes="node[1-2]"),
            3725,
            "0123456789ab running on node[1-2] (gpu) · 1:02:05",
        ),
        (Seen(Sight.UNREACHABLE, "timed out"), 5, "0123456789ab scheduler unreachable · 0:05"),
        (
            Seen(Sight.UNREACHABLE, "login refused", fix="renew the SSH certificate /k-cert.pub"),
            5,
            "0123456789ab login refused: renew the SSH certificate /k-cert.pub · 0:05",
        ),
    ],
)
def test_the_status_words(seen: Seen | None, elapsed: float, expected: str) -> None:
    assert status_text(invocation(), seen, elapsed) == expected


def test_submitting_and_collecting_words() -> None:
    assert "submitting" in status_text(invocation(JobState.SUBMITTING), None, 0)
    assert "collecting" in status_text(invocation(JobState.COLLECTING), None, 0)


def test_a_child_killed_with_its_parents_job_says_what_it_waits_for() -> None:
    killed = Seen(Sight.UNSATISFIABLE, "", "42")
    assert "killed with its parent's failed job" in status_text(invocation(), killed, 0)
    waiting = replace(invocation(JobState.RETRYING), failure_class=FailureClass.DEPENDENCY_FAILED)
    assert "waiting for its parent's next attempt" in status_text(waiting, None, 0)
    retrying = replace(invocation(JobState.RETRYING), failure_class=FailureClass.NODE_FAILED)
    assert "waiting to retry" in status_text(retrying, None, 0)


def terminal() -> tuple[LiveStatus, io.StringIO]:
    buffer = io.StringIO()
    return LiveStatus(buffer), buffer


def test_a_big_transfer_shows_a_bar_and_erases_it() -> None:
    live, buffer = terminal()
    live.begin("artifact model.bin", 10 * PROGRESS_MIN_BYTES)
    live.advance(5 * PROGRESS_MIN_BYTES)
    live.end()
    text = buffer.getvalue()
    assert "artifact model.bin" in text and "MB" in text
    assert text.rstrip().endswith("\x1b[2K") or "\x1b[2K" in text[text.rfind("MB") :]


def test_a_small_transfer_shows_nothing() -> None:
    live, buffer = terminal()
    live.begin("artifact small.txt", PROGRESS_MIN_BYTES - 1)
    live.advance(PROGRESS_MIN_BYTES - 1)
    live.end()
    assert buffer.getvalue() == ""


def test_done_clears_the_line() -> None:
    live, buffer = terminal()
    live.show(invocation(), Seen(Sight.RUNNING, "", "5"))
    assert "running" in buffer.getvalue()
    live.show(replace(invocation(), state=JobState.DONE), None)
    assert buffer.getvalue().rstrip().endswith("\x1b[2K")
