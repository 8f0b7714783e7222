"""The SSH transport against the project's real sshd (127.0.0.1:2222, scripts/local-slurm), plus
unit tests of redaction, command lines and error mapping that need no server.

Every connection stays on 127.0.0.1. The sshd tests are marked `slurm`; the session fixture
brings the local cluster (and its sshd) up and finds the key directory through
`scripts/local-slurm env`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hang_guard import hang_guard
from vibesys.adapters.transports import CommandResult, runner_from_config
from vibesys.adapters.transports.ssh import (
    REDACTED,
    SshTransport,
    host_key_fingerprint,
    is_secret_name,
    map_ssh_errors,
    redact,
)
from vibesys.config import SshTransportConfig
from vibesys.errors import (
    BackendError,
    BackendMisconfigured,
    BackendUnavailable,
    ConfigError,
    TransportLost,
)

ROOT = Path(__file__).resolve().parents[2]
LOCAL_SLURM = ROOT / "scripts" / "local-slurm"
SSHD_PORT = 2222
PASSPHRASE = "correct horse battery staple 42"

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


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ssh_dir() -> Path:
    """DIR/ssh of the local cluster, brought up first (a no-op when it is up)."""
    up = subprocess.run(
        [str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=600, check=False
    )
    if up.returncode != 0:
        pytest.fail(f"scripts/local-slurm up failed (rc={up.returncode}):\n{up.stderr}")
    env_file = subprocess.run(
        [str(LOCAL_SLURM), "env"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    found = Path(env_file).parent / "ssh"
    assert (found / "id_ed25519").is_file() and (found / "known_hosts").is_file()
    return found


def make(ssh_dir: Path, **overrides: Any) -> SshTransport:
    options: dict[str, Any] = {
        "port": SSHD_PORT,
        "user": "root",
        "identity_file": str(ssh_dir / "id_ed25519"),
        "known_hosts": str(ssh_dir / "known_hosts"),
        "connect_timeout": 10.0,
        "reconnect_backoff": 0.05,
    }
    options.update(overrides)
    return SshTransport("127.0.0.1", **options)


@pytest.fixture
def ssh(ssh_dir: Path) -> Iterator[SshTransport]:
    transport = make(ssh_dir)
    yield transport
    transport.close()


@pytest.fixture(scope="module")
def shared_ssh(ssh_dir: Path) -> Iterator[SshTransport]:
    transport = make(ssh_dir)
    yield transport
    transport.close()


def host_key_line(ssh_dir: Path) -> tuple[str, str]:
    """(key type, base64 key) of the local sshd, from its known_hosts."""
    _, key_type, key = (ssh_dir / "known_hosts").read_text().split()[:3]
    return key_type, key


def new_key(path: Path, passphrase: str = "") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "test", "-f", str(path)],
        check=True,
        timeout=30,
    )
    return path


def secret_lines(key_file: Path) -> list[str]:
    return [line for line in key_file.read_text().splitlines() if "PRIVATE KEY" not in line]


def everything_said(error: BaseException) -> str:
    """All an operator could see of `error`: message, evidence and the full traceback."""
    return "\n".join(
        [str(error), getattr(error, "evidence", ""), *traceback.format_exception(error)]
    )


def sshd_pids_serving(local_port: int) -> list[int]:
    """The sshd processes holding the server end of our connection from `local_port`."""
    wanted_local = f"0100007F:{SSHD_PORT:04X}"
    wanted_remote = f"0100007F:{local_port:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == wanted_local and fields[2] == wanted_remote:
            inodes.add(f"socket:[{fields[9]}]")
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "sshd":
                continue
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


class Proxy:
    """A TCP relay on 127.0.0.1 to the local sshd: stopping it is a network outage."""

    def __init__(self, port: int = 0) -> None:
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", SSHD_PORT))
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def proxied_known_hosts(ssh_dir: Path, path: Path, port: int) -> Path:
    key_type, key = host_key_line(ssh_dir)
    path.write_text(f"[127.0.0.1]:{port} {key_type} {key}\n")
    return path


def wait_until(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


# -- redaction (no server) ---------------------------------------------------------------------


def test_redact_removes_given_secrets_in_every_form() -> None:
    secret = "s3cr3t 'quoted' value"
    text = f"plain {secret} repr {secret!r} shell {shlex.quote(secret)} end"
    cleaned = redact(text, [secret])
    assert "s3cr3t" not in cleaned
    assert cleaned.startswith("plain [REDACTED] repr ")
    assert cleaned.endswith(" end")


def test_redact_prefers_the_longest_secret_and_ignores_empty_ones() -> None:
    assert redact("abcdef abc", ["abc", "abcdef", ""]) == f"{REDACTED} {REDACTED}"
    assert redact("nothing here", [""]) == "nothing here"


def test_redact_removes_private_key_blocks() -> None:
    block = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----"
    )
    assert redact(f"before\n{block}\nafter") == "before\n[REDACTED PRIVATE KEY]\nafter"
    truncated = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA"
    assert redact(f"x {truncated}") == "x [REDACTED PRIVATE KEY]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HF_TOKEN=hf_abc123 rest", f"HF_TOKEN={REDACTED} rest"),
        ("export DB_PASSWORD='p a s s'", f"export DB_PASSWORD={REDACTED}"),
        ('--api-key="xyz"', f"--api-key={REDACTED}"),
        ("aws_secret_access_key=AKIA/xx+yy", f"aws_secret_access_key={REDACTED}"),
        ("SSH_PASSPHRASE=hunter2", f"SSH_PASSPHRASE={REDACTED}"),
        ("PATH=/usr/bin HOME=/root", "PATH=/usr/bin HOME=/root"),
        ("no assignment: token", "no assignment: token"),
    ],
)
def test_redact_hides_values_of_secret_looking_assignments(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("GITHUB_TOKEN", True),
        ("MY_SECRET", True),
        ("DB_PASSWORD", True),
        ("PGPASSWD", True),
        ("SSH_KEY", True),
        ("api_key", True),
        ("WANDB_API_KEY", True),
        ("PATH", False),
        ("SLURM_CONF", False),
        ("HOME", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


# -- error mapping (no server) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "expected", "retryable"),
    [
        (paramiko.AuthenticationException("Authentication failed."), BackendMisconfigured, False),
        (paramiko.PasswordRequiredException("key is encrypted"), BackendMisconfigured, False),
        (paramiko.ChannelException(1, "administratively prohibited"), BackendUnavailable, True),
        (paramiko.SSHException("Error reading SSH protocol banner"), TransportLost, True),
        (EOFError(), TransportLost, True),
        (TimeoutError("timed out"), TransportLost, True),
        (ConnectionRefusedError(111, "Connection refused"), TransportLost, True),
        (ConnectionResetError(104, "Connection reset by peer"), TransportLost, True),
        (OSError(113, "No route to host"), TransportLost, True),
    ],
)
@pytest.mark.parametrize("maybe_effect", [False, True])
def test_map_ssh_errors_translates_foreign_exceptions(
    raised: BaseException, expected: type[BackendError], retryable: bool, maybe_effect: bool
) -> None:
    with (
        pytest.raises(BackendError) as caught,
        map_ssh_errors("sbatch x", host="op@login:22", maybe_effect=maybe_effect),
    ):
        raise raised
    error = caught.value
    assert type(error) is expected
    assert error.retryable is retryable
    assert error.maybe_submitted is (maybe_effect and expected is TransportLost)
    assert "sbatch x" in str(error)
    assert "op@login:22" in error.evidence
    assert error.__suppress_context__ and error.__cause__ is None
    if not retryable:
        assert error.fix, "a failure a person must fix says how"


def test_map_ssh_errors_leaves_our_own_errors_alone() -> None:
    original = BackendUnavailable("already typed")
    with pytest.raises(BackendUnavailable) as caught, map_ssh_errors("x"):
        raise original
    assert caught.value is original


def test_secrets_in_paramikos_message_never_reach_message_evidence_or_traceback() -> None:
    leak = paramiko.SSHException(f"could not decrypt key with passphrase {PASSPHRASE!r}")
    with (
        pytest.raises(TransportLost) as caught,
        map_ssh_errors("connect", host="h", secrets=[PASSPHRASE]),
    ):
        raise leak
    said = everything_said(caught.value)
    assert PASSPHRASE not in said
    assert REDACTED in caught.value.evidence


def test_host_key_errors_name_the_host_and_the_fingerprints() -> None:
    key_a = paramiko.RSAKey.generate(2048)
    key_b = paramiko.RSAKey.generate(2048)
    with pytest.raises(BackendMisconfigured) as caught, map_ssh_errors("connect", host="h"):
        raise paramiko.BadHostKeyException("[login]:2222", key_a, key_b)
    message = str(caught.value)
    assert "[login]:2222" in message and "changed" in message
    assert host_key_fingerprint(key_a) in message and host_key_fingerprint(key_b) in message
    assert caught.value.retryable is False and caught.value.maybe_submitted is False


# -- command lines and configuration (no server) ------------------------------------------------


def test_command_line_quotes_for_the_remote_shell() -> None:
    # The line for the user's shell when commands run one channel each (no helper).
    transport = SshTransport("login", env={})
    argv = ["printf", "%s", "a b", "$(x)", "it's"]
    assert shlex.split(transport.command_line(argv)) == argv
    with_shell = SshTransport("login", env={}, shell_command=("bash", "-c"))
    outer = shlex.split(with_shell.command_line(argv))
    assert outer[:2] == ["bash", "-c"]
    assert shlex.split(outer[2]) == argv


def test_a_login_shell_wraps_the_line_and_starts_the_helper() -> None:
    transport = SshTransport("login", env={}, login_shell=True)
    outer = shlex.split(transport.command_line(["squeue", "-h"]))
    assert outer[:2] == ["bash", "-lc"] and shlex.split(outer[2]) == ["squeue", "-h"]
    launch = shlex.split(transport.helper_launch())
    assert launch[:2] == ["bash", "-lc"] and "exec" in launch[2]
    plain = shlex.split(SshTransport("login", env={}).helper_launch())
    assert plain[:2] == ["sh", "-c"]


def test_the_helper_starts_argv_directly_unless_the_site_sets_a_shell() -> None:
    argv = ["squeue", "-h", "--name", "a b"]
    assert SshTransport("login").helper_argv(argv) == argv
    wrapped = SshTransport("login", shell_command=("bash", "-c")).helper_argv(argv)
    assert wrapped[:2] == ["bash", "-c"] and shlex.split(wrapped[2]) == argv


def test_only_allowlisted_variables_travel_and_only_when_set() -> None:
    env = {"KEEP": "a 'b' $c", "DROP": "no", "PATH": "/local/bin"}
    transport = SshTransport("login", env_allowlist=("KEEP", "ABSENT"), env=env)
    outer = shlex.split(transport.command_line(["true"]))
    assert outer == ["env", "KEEP=a 'b' $c", "true"]
    assert "DROP" not in transport.command_line(["true"])


def test_secret_looking_allowlisted_values_count_as_secrets() -> None:
    env = {"HF_TOKEN": "hf_value", "MODE": "fast"}
    transport = SshTransport(
        "login", env_allowlist=("HF_TOKEN", "MODE"), env=env, passphrase=PASSPHRASE
    )
    assert transport.secrets() == {"hf_value", PASSPHRASE}


def test_shell_command_may_not_look_like_an_assignment() -> None:
    with pytest.raises(ConfigError, match="'='"):
        SshTransport("login", shell_command=("A=1", "-c"))


def test_from_config_reads_the_passphrase_from_the_named_variable() -> None:
    config = SshTransportConfig(
        kind="ssh", host="login", passphrase_env="VIBESYS_TEST_PASSPHRASE", env_allowlist=("X",)
    )
    transport = SshTransport.from_config(config, env={"VIBESYS_TEST_PASSPHRASE": PASSPHRASE})
    assert PASSPHRASE in transport.secrets()
    assert transport.env_allowlist == ("X",)
    with pytest.raises(ConfigError, match=r"passphrase_env: \$VIBESYS_TEST_PASSPHRASE is not set"):
        SshTransport.from_config(config, env={})


def test_runner_from_config_builds_an_ssh_transport_without_connecting() -> None:
    config = SshTransportConfig(kind="ssh", host="login.invalid", port=2200, user="op")
    runner = runner_from_config(config)
    assert isinstance(runner, SshTransport)
    assert (runner.label, runner.connections) == ("op@login.invalid:2200", 0)


def test_the_cli_never_imports_paramiko() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vibesys", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "paramiko" not in done.stderr


def test_first_connection_failure_is_backend_unavailable_after_bounded_backoff(
    tmp_path: Path,
) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: connection refused at once
    slept: list[float] = []
    transport = SshTransport(
        "127.0.0.1",
        port=port,
        known_hosts=str(tmp_path / "known_hosts"),
        reconnect_attempts=4,
        reconnect_backoff=0.5,
        sleep=slept.append,
    )
    (tmp_path / "known_hosts").write_text("")
    with pytest.raises(BackendUnavailable) as caught:
        transport.run(["true"], maybe_effect=True)
    assert type(caught.value) is BackendUnavailable
    assert caught.value.maybe_submitted is False
    assert slept == [0.5, 1.0, 2.0]
    assert "after 4 attempts" in str(caught.value)
    assert transport.connections == 0


# -- against the real sshd ---------------------------------------------------------------------


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
    first = ssh.paramiko_transport
    for index in range(20):
        assert ssh.run(["echo", str(index)]).stdout == f"{index}\n"
        assert ssh.paramiko_transport is first
    assert ssh.connections == 1
    assert first.remote_cipher == "aes128-gcm@openssh.com"
    # keepalive 30 s: the kernel gives up on unacknowledged data after three intervals
    assert first.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 90_000


@pytest.mark.slurm
def test_commands_run_in_one_helper_without_a_shell_each(ssh: SshTransport) -> None:
    # Every command's parent is the one helper process of the connection: no user shell (and
    # no ~/.bashrc) is started per command. On the old way each has a shell of its own.
    parents = {ssh.run(["sh", "-c", "echo $PPID"]).stdout for _ in range(5)}
    assert len(parents) == 1 and ssh.helpers_started == 1
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
        assert transport.helpers_started == 0
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
        assert transport.helpers_started == 0
        assert transport.connections == 1  # tried once for the connection, not per command
    finally:
        transport.close()


@pytest.mark.slurm
def test_a_missing_program_is_misconfigured_through_the_helper(ssh: SshTransport) -> None:
    with pytest.raises(BackendMisconfigured) as caught:
        ssh.run(["vibesys-no-such-program"], maybe_effect=True)
    assert caught.value.maybe_submitted is False and caught.value.retryable is False
    assert ssh.run(["echo", "fine"]).stdout == "fine\n"  # the helper survives it
    assert ssh.helpers_started == 1


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
    assert ssh.connections == 1


@pytest.mark.slurm
def test_unknown_host_is_refused_unless_the_operator_opted_in(
    ssh_dir: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    refused = make(ssh_dir, known_hosts=str(empty))
    with pytest.raises(BackendMisconfigured) as caught:
        refused.run(["true"], maybe_effect=True)
    error = caught.value
    assert (error.retryable, error.maybe_submitted) == (False, False)
    assert "add the key" in error.fix
    assert "[127.0.0.1]:2222" in str(error)
    assert "is not in" in str(error) and "accept_unknown_host" in str(error)
    key_type, key = host_key_line(ssh_dir)
    fingerprint = host_key_fingerprint(
        paramiko.PKey.from_type_string(key_type, base64.b64decode(key))
    )
    assert fingerprint in str(error)
    assert refused.connections == 0

    trusting = make(ssh_dir, known_hosts=str(empty), accept_unknown_host=True)
    try:
        assert trusting.run(["echo", "ok"]).stdout == "ok\n"
        trusting.close()
        assert trusting.run(["echo", "again"]).stdout == "again\n"  # remembered key matches
    finally:
        trusting.close()
    assert empty.read_text() == ""  # trusted in memory only, never written


@pytest.mark.slurm
def test_a_changed_host_key_is_refused_even_when_unknown_hosts_are_accepted(
    ssh_dir: Path, tmp_path: Path
) -> None:
    impostor = new_key(tmp_path / "impostor")
    public = (tmp_path / "impostor.pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{SSHD_PORT} {public[0]} {public[1]}\n")
    transport = make(ssh_dir, known_hosts=str(known), accept_unknown_host=True)
    with pytest.raises(
        BackendMisconfigured, match=r"host key of .*127\.0\.0\.1.* changed"
    ) as caught:
        transport.run(["true"])
    assert caught.value.retryable is False and "verified out of band" in caught.value.fix
    assert impostor.exists()


@pytest.mark.slurm
def test_a_wrong_key_fails_without_leaking_the_key_or_its_passphrase(
    ssh_dir: Path, tmp_path: Path
) -> None:
    stranger = new_key(tmp_path / "stranger", PASSPHRASE)
    transport = make(ssh_dir, identity_file=str(stranger), passphrase=PASSPHRASE)
    with pytest.raises(BackendMisconfigured) as caught:
        transport.run(["true"], maybe_effect=True)
    error = caught.value
    assert (error.retryable, error.maybe_submitted) == (False, False)
    assert "authentication failed for root@127.0.0.1:2222" in str(error)
    said = everything_said(error)
    assert PASSPHRASE not in said
    for line in secret_lines(stranger):
        assert line not in said


@pytest.mark.slurm
@pytest.mark.parametrize(
    ("passphrase", "reason"),
    [(None, "it is encrypted and no passphrase was given"), ("not it", "wrong passphrase")],
)
def test_an_unusable_identity_file_is_a_clear_error(
    ssh_dir: Path, tmp_path: Path, passphrase: str | None, reason: str
) -> None:
    locked = new_key(tmp_path / "locked", PASSPHRASE)
    transport = make(ssh_dir, identity_file=str(locked), passphrase=passphrase)
    with pytest.raises(BackendMisconfigured, match=f"cannot load identity file .*: {reason}") as e:
        transport.run(["true"])
    assert e.value.retryable is False
    said = everything_said(e.value)
    assert PASSPHRASE not in said and (passphrase is None or passphrase not in said)
    for line in secret_lines(locked):
        assert line not in said


@pytest.mark.slurm
def test_an_encrypted_key_with_its_passphrase_works(ssh_dir: Path, tmp_path: Path) -> None:
    locked = new_key(tmp_path / "locked", PASSPHRASE)
    authorized = ssh_dir / "authorized_keys"
    before = authorized.read_text()
    authorized.write_text(before + (tmp_path / "locked.pub").read_text())
    try:
        transport = make(ssh_dir, identity_file=str(locked), passphrase=PASSPHRASE)
        assert transport.run(["echo", "in"]).stdout == "in\n"
        transport.close()
    finally:
        authorized.write_text(before)


@pytest.mark.slurm
def test_stream_of_50_mb_is_byte_identical(ssh: SshTransport, tmp_path: Path) -> None:
    source = tmp_path / "remote.log"
    with source.open("wb") as out:
        for _ in range(50):
            out.write(os.urandom(1 << 20))
    target = tmp_path / "spool.log"
    with target.open("wb") as sink:
        result = ssh.stream(["cat", str(source)], sink, timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert target.stat().st_size == 50 << 20
    digest = hashlib.sha256
    assert digest(target.read_bytes()).digest() == digest(source.read_bytes()).digest()


_RSS_PROBE = """
import sys
from vibesys.adapters.transports.ssh import SshTransport

def hwm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

key_dir, source, target = sys.argv[1:4]
transport = SshTransport("127.0.0.1", port=2222, user="root",
                         identity_file=key_dir + "/id_ed25519",
                         known_hosts=key_dir + "/known_hosts")
transport.run(["true"])
before = hwm_kib()
with open(target, "wb") as sink:
    result = transport.stream(["cat", source], sink, timeout=300)
print(result.returncode, before, hwm_kib())
"""


@pytest.mark.slurm
def test_stream_memory_stays_bounded(ssh_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "remote.log"
    with source.open("wb") as out:
        block = os.urandom(1 << 20)
        for _ in range(50):
            out.write(block)
    done = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, str(ssh_dir), str(source), str(tmp_path / "spool")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    returncode, before, after = (int(word) for word in done.stdout.split())
    assert returncode == 0
    assert (tmp_path / "spool").stat().st_size == 50 << 20
    growth_mib = (after - before) / 1024
    assert growth_mib < 40, f"peak RSS grew by {growth_mib:.1f} MiB while streaming 50 MiB"


class _CutAfter:
    """A sink that breaks the connection once `limit` bytes have been written to it."""

    def __init__(self, path: Path, limit: int, cut: Any) -> None:
        self.file = path.open("wb")
        self.limit = limit
        self.cut = cut
        self.written = 0
        self.fired = False

    def write(self, data: bytes) -> int:
        self.file.write(data)
        self.written += len(data)
        if self.written >= self.limit and not self.fired:
            self.fired = True
            self.cut()
        return len(data)

    def flush(self) -> None:
        self.file.flush()


@pytest.mark.slurm
@pytest.mark.parametrize("how", ["kill-sshd", "close-from-another-thread"])
def test_connection_lost_mid_stream_then_the_next_command_reconnects(
    ssh: SshTransport, tmp_path: Path, how: str
) -> None:
    ssh.run(["true"])
    transport = ssh.paramiko_transport
    local_port = transport.sock.getsockname()[1]

    def cut() -> None:
        if how == "kill-sshd":
            pids = sshd_pids_serving(local_port)
            assert pids, "found no sshd process serving our connection"
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        else:
            threading.Thread(target=ssh.close).start()

    first = 3_000_000
    # After the cut the remote loop dies of SIGPIPE at its next echo (no orphan left behind).
    script = f"head -c {first} /dev/zero; while :; do sleep 0.2; echo x; done"
    sink = _CutAfter(tmp_path / "spool", first, cut)
    with pytest.raises(TransportLost) as caught:
        ssh.stream(["sh", "-c", script], sink, timeout=60)
    sink.file.close()
    assert caught.value.maybe_submitted is False
    assert sink.fired
    kept = (tmp_path / "spool").read_bytes()
    assert len(kept) == sink.written >= first
    assert kept[:first] == b"\0" * first
    wait_until(lambda: not transport.is_active())

    assert ssh.run(["echo", "back"], timeout=30).stdout == "back\n"
    assert ssh.connections == 2
    assert ssh.paramiko_transport is not transport


@pytest.mark.slurm
def test_lost_sbatch_is_transport_lost_with_maybe_submitted(ssh: SshTransport) -> None:
    ssh.run(["true"])
    local_port = ssh.paramiko_transport.sock.getsockname()[1]

    def killer() -> None:
        time.sleep(0.5)
        for pid in sshd_pids_serving(local_port):
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=killer).start()
    with pytest.raises(TransportLost) as caught:
        ssh.run(["sh", "-c", "sleep 3; echo done"], maybe_effect=True, timeout=30)
    assert caught.value.maybe_submitted is True
    assert "connection lost" in str(caught.value)


@pytest.mark.slurm
def test_reconnect_backs_off_then_reports_transport_lost(ssh_dir: Path, tmp_path: Path) -> None:
    proxy = Proxy()
    port = proxy.port
    slept: list[float] = []
    transport = make(
        ssh_dir,
        port=port,
        known_hosts=str(proxied_known_hosts(ssh_dir, tmp_path / "known_hosts", port)),
        reconnect_attempts=3,
        reconnect_backoff=0.25,
        sleep=slept.append,
    )
    try:
        assert transport.run(["echo", "up"]).stdout == "up\n"
        first = transport.paramiko_transport
        proxy.stop()  # the network goes away
        wait_until(lambda: not first.is_active())
        with pytest.raises(TransportLost) as caught:
            transport.run(["sbatch", "--parsable", "x.sh"], maybe_effect=True)
        # Never sent: the command did not run, whatever maybe_effect says.
        assert caught.value.maybe_submitted is False
        assert "not re-established after 3 attempts" in str(caught.value)
        assert slept == [0.25, 0.5]

        proxy = Proxy(port)  # the network comes back
        assert transport.run(["echo", "again"]).stdout == "again\n"
        assert transport.connections == 2
    finally:
        transport.close()
        proxy.stop()


@pytest.mark.slurm
@pytest.mark.parametrize("maybe_effect", [True, False])
def test_timeout_is_backend_unavailable_and_the_connection_survives(
    ssh: SshTransport, maybe_effect: bool
) -> None:
    # The remote sleep may outlive the closed channel: short enough to leave no junk for long,
    # long enough that returning only when it ended would trip the guard.
    with (
        hang_guard(20, "a run that outlived its 1 s timeout"),
        pytest.raises(BackendUnavailable) as caught,
    ):
        ssh.run(["sleep", "40"], timeout=1, maybe_effect=maybe_effect)
    assert type(caught.value) is BackendUnavailable  # not TransportLost: the link is fine
    assert caught.value.maybe_submitted is maybe_effect
    assert "no answer within 1 s" in str(caught.value)
    assert ssh.run(["echo", "still"]).stdout == "still\n"
    assert ssh.connections == 1


@pytest.mark.slurm
def test_stream_timeout(ssh: SshTransport, tmp_path: Path) -> None:
    with (tmp_path / "spool").open("wb") as sink, pytest.raises(BackendUnavailable) as caught:
        ssh.stream(["sh", "-c", "echo partial; sleep 5"], sink, timeout=1)
    assert caught.value.maybe_submitted is False
    assert (tmp_path / "spool").read_bytes() == b"partial\n"


@pytest.mark.slurm
def test_endless_output_still_times_out(ssh: SshTransport) -> None:
    class Counter:
        written = 0

        def write(self, data: bytes) -> None:
            self.written += len(data)

        def flush(self) -> None:
            pass

    sink = Counter()
    with (
        hang_guard(20, "an endless stream past its 1 s timeout"),
        pytest.raises(BackendUnavailable, match="no answer within 1 s"),
    ):
        ssh.stream(["yes"], sink, timeout=1)  # dies of SIGPIPE once its channel is closed
    assert sink.written > 0
    assert ssh.run(["echo", "ok"]).stdout == "ok\n"


@pytest.mark.slurm
def test_environment_allowlist(
    ssh_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VIBESYS_ALLOWED", "yes it's 'ok' $HOME `x`")
    monkeypatch.setenv("VIBESYS_FORBIDDEN", "must not arrive")
    transport = make(ssh_dir, env_allowlist=("VIBESYS_ALLOWED", "VIBESYS_UNSET"))
    try:
        script = (
            'printf "%s|%s|%s" "$VIBESYS_ALLOWED" "${VIBESYS_FORBIDDEN-unset}" '
            '"${VIBESYS_UNSET-unset}"'
        )
        result = transport.run(["sh", "-c", script])
        assert result.stdout == "yes it's 'ok' $HOME `x`|unset|unset"
    finally:
        transport.close()


@pytest.mark.slurm
def test_secret_variables_arrive_but_are_redacted_from_stderr_and_evidence(
    ssh_dir: Path,
) -> None:
    token = "hf_" + "Zq8" * 10
    transport = make(ssh_dir, env_allowlist=("HF_TOKEN",), env={"HF_TOKEN": token})
    try:
        assert transport.run(["sh", "-c", 'printf %s "$HF_TOKEN"']).stdout == token  # data
        result = transport.run(["sh", "-c", 'echo "bad token $HF_TOKEN" >&2; exit 1'])
        assert result.stderr == f"bad token {REDACTED}\n"
        assert token not in result.evidence()
        with pytest.raises(BackendUnavailable) as caught:
            transport.run(["sh", "-c", 'sleep 3; echo "$HF_TOKEN"'], timeout=0.5)
        assert token not in everything_said(caught.value)
    finally:
        transport.close()


@pytest.mark.slurm
def test_jump_host(ssh_dir: Path) -> None:
    transport = make(ssh_dir, jump_host="127.0.0.1", jump_port=SSHD_PORT, jump_user="root")
    try:
        assert transport.run(["echo", "through"]).stdout == "through\n"
        assert isinstance(transport.paramiko_transport.sock, paramiko.Channel)
        assert transport.label == "root@127.0.0.1:2222 via 127.0.0.1:2222"
    finally:
        transport.close()


@pytest.mark.slurm
def test_runner_from_config_reaches_the_local_sshd(ssh_dir: Path) -> None:
    config = SshTransportConfig(
        kind="ssh",
        host="127.0.0.1",
        port=SSHD_PORT,
        user="root",
        identity_file=str(ssh_dir / "id_ed25519"),
        known_hosts=str(ssh_dir / "known_hosts"),
        keepalive_seconds=5,
    )
    runner = runner_from_config(config)
    assert isinstance(runner, SshTransport)
    try:
        assert runner.run(["sh", "-c", "echo $SLURM_CONF"]).stdout.strip().endswith("slurm.conf")
    finally:
        runner.close()
