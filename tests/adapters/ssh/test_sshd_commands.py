"""Commands through the real local sshd: exit status, streams and stdin, hostile arguments,
one connection and one helper for many commands, and the fallback without a helper."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.ssh import make
from vibesys.adapters.transports import CommandResult
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.errors import BackendMisconfigured

ARG = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=30)
PRINT_ARGS = ["printf", "%s\\0"]
HOSTILE = [
    "it's",
    '"double"',
    "$(id)",
    "`id`",
    "a b  c",
    "line\nbreak",
    "*",
    "~",
    "$HOME",
    "; exit 3",
    "&& false",
    "|",
    "\\",
    "",
    "-n",
    "if",
    "A=1",
    "ünïcødé ✓",
]


def printed(result: CommandResult) -> list[str]:
    assert result.returncode == 0, result.evidence()
    return result.stdout.split("\0")[:-1]


@pytest.mark.slurm
def test_squeue_runs_on_the_remote_side(ssh: SshTransport) -> None:
    result = ssh.run(["squeue", "-h", "-o", "%i"], timeout=30)
    assert result.returncode == 0, result.evidence()
    assert result.argv == ("squeue", "-h", "-o", "%i")
    header = ssh.run(["squeue"], timeout=30)
    assert header.stdout.split()[:2] == ["JOBID", "PARTITION"]


@pytest.mark.slurm
def test_exit_status_and_both_streams(ssh: SshTransport) -> None:
    assert ssh.run(["sh", "-c", "exit 7"]).returncode == 7
    result = ssh.run(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert result == CommandResult(
        3, "out\n", "err\n", ("bash", "-c", "echo out; echo err >&2; exit 3")
    )


@pytest.mark.slurm
def test_hostile_arguments_arrive_intact(ssh: SshTransport, tmp_path: Path) -> None:
    trap = tmp_path / "pwned"
    hostile = [*HOSTILE, f"$(touch {trap})", f"`touch {trap}`", f"'; touch {trap}; '"]
    assert printed(ssh.run([*PRINT_ARGS, *hostile], timeout=30)) == hostile
    assert not trap.exists()
    odd_dir = tmp_path / "dir with 'quotes' and $(x)"
    odd_dir.mkdir()
    (odd_dir / "f*").write_text("x")
    assert ssh.run(["ls", str(odd_dir)]).stdout == "f*\n"


@pytest.mark.slurm
@settings(
    deadline=None, max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(ARG, min_size=1, max_size=6))
def test_any_arguments_arrive_intact(shared_ssh: SshTransport, args: list[str]) -> None:
    assert printed(shared_ssh.run([*PRINT_ARGS, *args], timeout=30)) == args


@pytest.mark.slurm
def test_input_reaches_stdin_and_stdin_is_empty_without_it(ssh: SshTransport) -> None:
    assert ssh.run(["cat"], input=b"some\nbytes\0here").stdout == "some\nbytes\0here"
    assert ssh.run(["cat"], timeout=10).stdout == ""


@pytest.mark.slurm
def test_large_stdout_stderr_and_stdin_at_once_do_not_deadlock(ssh: SshTransport) -> None:
    script = "head -c 20000000 /dev/zero >&2; head -c 20000000 /dev/zero; wc -c >&2"
    result = ssh.run(["sh", "-c", script], input=b"x" * 5_000_000, timeout=120)
    assert result.returncode == 0
    assert len(result.stdout) == 20_000_000
    assert result.stderr.endswith("5000000\n")
    assert len(result.stderr) == 20_000_000 + len("5000000\n")


@pytest.mark.slurm
def test_twenty_commands_share_one_connection(ssh: SshTransport) -> None:
    ssh.run(["true"])
    first = ssh.connection.paramiko_transport
    for index in range(20):
        assert ssh.run(["echo", str(index)]).stdout == f"{index}\n"
        assert ssh.connection.paramiko_transport is first
    assert ssh.connection.connections == 1
    assert first.remote_cipher == "aes128-gcm@openssh.com"
    # keepalive 30 s: the kernel gives up on unacknowledged data after three intervals
    assert first.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 90_000


@pytest.mark.slurm
def test_commands_run_in_one_helper_without_a_shell_each(ssh: SshTransport) -> None:
    # Every command's parent is the one helper process of the connection: no user shell (and
    # no ~/.bashrc) is started per command. On the old way each has a shell of its own.
    parents = {ssh.run(["sh", "-c", "echo $PPID"]).stdout for _ in range(5)}
    assert len(parents) == 1 and ssh.pool.helpers_started == 1
    helper = parents.pop().strip()
    assert "python" in ssh.run(["ps", "-o", "args=", "-p", helper]).stdout


@pytest.mark.slurm
def test_without_the_helper_each_command_comes_from_sshd_through_the_users_shell(
    ssh_dir: Path,
) -> None:
    transport = make(ssh_dir, use_helper=False)
    try:
        parent = transport.run(["sh", "-c", 'ps -o args= -p "$PPID"']).stdout
        assert "python" not in parent and "sshd" in parent
        assert transport.pool.helpers_started == 0
    finally:
        transport.close()


@pytest.mark.slurm
def test_a_remote_side_without_python_falls_back_to_a_channel_per_command(
    ssh_dir: Path,
) -> None:
    transport = make(ssh_dir, helper_pythons=("/nonexistent/python3",))
    try:
        assert transport.run(["echo", "fallback"]).stdout == "fallback\n"
        assert transport.run(["sh", "-c", "exit 4"]).returncode == 4
        assert transport.pool.helpers_started == 0
        assert (
            transport.connection.connections == 1
        )  # tried once for the connection, not per command
    finally:
        transport.close()


@pytest.mark.slurm
def test_a_missing_program_is_misconfigured_through_the_helper(ssh: SshTransport) -> None:
    with pytest.raises(BackendMisconfigured) as caught:
        ssh.run(["vibesys-no-such-program"], maybe_effect=True)
    assert caught.value.maybe_submitted is False and caught.value.retryable is False
    assert ssh.run(["echo", "fine"]).stdout == "fine\n"  # the helper survives it
    assert ssh.pool.helpers_started == 1


@pytest.mark.slurm
def test_concurrent_commands_share_the_connection(ssh: SshTransport) -> None:
    results: list[str] = []

    def one(index: int) -> None:
        results.append(ssh.run(["sh", "-c", f"sleep 0.2; echo {index}"], timeout=30).stdout)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == sorted(f"{i}\n" for i in range(8))
    assert ssh.connection.connections == 1
