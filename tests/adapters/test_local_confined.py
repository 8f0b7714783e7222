"""A local request's confinement against the real bwrap: the command sees its own directory
(writable) and the system directories, nothing else of the host; the wrapper outside still
writes its logs byte for byte and its marker. And the confinement is recorded with the request,
so whichever process submits a retry confines it the same way."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from tests.adapters.test_local import job_name_for, wait_terminal
from tests.helpers.hang_guard import wait_until
from vibesys.adapters.base import JobContext, JobRef, RemoteState, Submission
from vibesys.adapters.local import LocalBackend
from vibesys.adapters.local_request import SANDBOX_ENV_FILE, Confinement, LocalRequest
from vibesys.adapters.registry import entry
from vibesys.errors import BackendMisconfigured, ConfigError

PROBE = r"""
cat candidate.txt
cat "$SECRET" 2>/dev/null && echo read-secret || echo no-secret
echo x 2>/dev/null > "$ORIGINAL/new" && echo wrote-original || echo no-original
echo y > made.txt && echo wrote-copy
ls "$READ_ONLY" && (echo z 2>/dev/null > "$READ_ONLY/new" && echo wrote-ro || echo no-ro)
test -e "/proc/$HOST_PID" && echo host-pid-seen || echo no-host-pid
echo "shadow=$(head -c 1 /etc/shadow 2>/dev/null | wc -c)"
echo "home=$HOME value=$VALUE"
printf '\377\000raw\n' >&2
exit 3
"""


def layout(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("work", "original", "host", "ro", "inv/attempts/1")}
    for path in paths.values():
        path.mkdir(parents=True)
    (paths["work"] / "candidate.txt").write_text("candidate\n")
    (paths["original"] / "kept.txt").write_text("kept\n")
    (paths["ro"] / "tool").write_text("")
    secret = paths["host"] / "secret"
    secret.write_text("secret\n")
    secret.chmod(0o600)
    return paths


def confined_request(
    paths: dict[str, Path], confine: Confinement | None
) -> Submission[LocalRequest]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(paths["host"]),
        "VALUE": "passed",
        "SECRET": str(paths["host"] / "secret"),
        "ORIGINAL": str(paths["original"]),
        "READ_ONLY": str(paths["ro"]),
        "HOST_PID": str(os.getpid()),
    }
    attempt = paths["inv/attempts/1"]
    return Submission(
        "inv",
        1,
        job_name_for(attempt),
        ("sh", "-c", PROBE),
        attempt,
        JobContext(str(paths["work"]), env),
        LocalRequest(confine=confine),
    )


def run(request: Submission[LocalRequest]) -> tuple[int | None, bytes, bytes]:
    backend = LocalBackend()
    receipt = backend.submit(request)
    status = wait_terminal(backend, JobRef(request.job_name, receipt.job_id, request.attempt_dir))
    assert status.state is RemoteState.FAILED
    out = (request.attempt_dir / "stdout").read_bytes()
    return status.exit_code, out, (request.attempt_dir / "stderr").read_bytes()


def test_a_confined_command_sees_its_copy_and_the_system_only(tmp_path: Path) -> None:
    paths = layout(tmp_path)
    request = confined_request(paths, Confinement(read_only_paths=(str(paths["ro"]),)))
    code, out, err = run(request)
    assert code == 3
    assert out.decode().splitlines() == [
        "candidate",
        "no-secret",
        "no-original",
        "wrote-copy",
        "tool",
        "no-ro",
        "no-host-pid",
        "shadow=0",
        "home=/tmp value=passed",
    ]
    assert err == b"\377\000raw\n", "the wrapper outside writes the output byte for byte"
    assert sorted(os.listdir(paths["original"])) == ["kept.txt"]
    assert sorted(os.listdir(paths["ro"])) == ["tool"]
    assert (paths["work"] / "made.txt").read_text() == "y\n"
    # The variables reach the sandbox through an owner-only file, not a command line.
    env_file = request.attempt_dir / SANDBOX_ENV_FILE
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert b"VALUE=passed\0" in env_file.read_bytes()


def test_the_same_command_unconfined_sees_the_host(tmp_path: Path) -> None:
    paths = layout(tmp_path)
    code, out, _ = run(confined_request(paths, None))
    assert code == 3
    lines = out.decode().splitlines()
    assert lines[1:3] == ["secret", "read-secret"] and "wrote-original" in lines
    assert f"home={paths['host']} value=passed" in lines


def test_a_confinement_that_cannot_be_built_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    paths = layout(tmp_path)
    inside = str(paths["work"])  # a read-only path that is the writable copy itself
    request = confined_request(paths, Confinement(read_only_paths=(inside,)))
    with pytest.raises(BackendMisconfigured, match=r"cannot be confined: .* lies inside"):
        LocalBackend().submit(request)
    assert not (request.attempt_dir / "launch.json").exists()


def test_the_confinement_is_recorded_with_the_request() -> None:
    confined = LocalRequest(confine=Confinement(read_only_paths=("/opt/tools",)))
    recorded = confined.recorded()
    assert recorded["confine"] == {"read_only_paths": ["/opt/tools"], "home": "/tmp"}
    parsed = entry("local").parse_request(recorded)
    assert parsed == confined and hash(parsed) == hash(confined)
    assert parsed != LocalRequest(), "a confined request is not an unconfined one"
    assert "confine" not in LocalRequest().recorded(), "unconfined: as before"
    for bad, where in (
        ({"confine": {"home": "tmp"}}, "confine.home"),
        ({"confine": {"read_only_paths": "/opt"}}, "confine.read_only_paths"),
        ({"confine": {"read_only_paths": ["/opt/../etc"]}}, "confine.read_only_paths"),
        ({"confine": {"write": ["/"]}}, "confine.write"),
        ({"confine": []}, "confine"),
    ):
        with pytest.raises(ConfigError, match=f"local request does not fit: {where}: "):
            entry("local").parse_request(bad)


def test_a_cancelled_confined_command_leaves_nothing_running(tmp_path: Path) -> None:
    """The sandbox is its own session (out of the wrapper's process group's reach): it ends
    because it dies with its parent, and with its pid namespace everything in it."""
    paths = layout(tmp_path)
    request = confined_request(paths, Confinement())
    marker = "61.25"  # a sleep no other test runs
    request = Submission(
        request.invocation_id,
        request.attempt,
        request.job_name,
        ("sh", "-c", f"sleep {marker} & sleep {marker}; echo never"),
        request.attempt_dir,
        request.context,
        request.request,
    )
    backend = LocalBackend()
    receipt = backend.submit(request)
    ref = JobRef(request.job_name, receipt.job_id, request.attempt_dir)

    def sleepers() -> list[int]:
        needle = f"sleep\0{marker}\0".encode()
        found = []
        for found_entry in os.scandir("/proc"):
            try:
                cmdline = Path(found_entry.path, "cmdline")
                if found_entry.name.isdigit() and cmdline.read_bytes() == needle:
                    found.append(int(found_entry.name))
            except OSError:
                continue
        return found

    wait_until(lambda: len(sleepers()) >= 2, 20, "the command to start", interval=0.05)
    backend.cancel(ref)
    status = wait_terminal(backend, ref)
    assert status.state is RemoteState.CANCELLED
    deadline = time.monotonic() + 5
    while sleepers():
        assert time.monotonic() < deadline, f"left running: {sleepers()}"
        time.sleep(0.05)
    assert b"never" not in (request.attempt_dir / "stdout").read_bytes()
