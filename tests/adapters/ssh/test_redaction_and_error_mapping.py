"""Redaction of secrets, and the mapping of paramiko's and the network's errors to ours (no
server needed)."""

from __future__ import annotations

import shlex

import paramiko
import pytest

from tests.helpers.ssh import PASSPHRASE, everything_said
from vibesys.adapters.transports.ssh import (
    REDACTED,
    host_key_fingerprint,
    is_secret_name,
    map_ssh_errors,
    redact,
)
from vibesys.errors import (
    BackendError,
    BackendMisconfigured,
    BackendUnavailable,
    CredentialRefused,
    TransportLost,
)


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


@pytest.mark.parametrize(
    ("raised", "expected", "retryable"),
    [
        (paramiko.AuthenticationException("Authentication failed."), CredentialRefused, False),
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
