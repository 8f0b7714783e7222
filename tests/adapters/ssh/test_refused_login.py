"""A refused login (an expired SSH certificate, a key the site no longer accepts) is
CredentialRefused wherever it is met: at a first login, at a re-login after a dropped
connection, in SkyPilot's own ssh to the login node. Never a lost transport retried; the
message names the certificate's expiry and the renewal. Fast: no sshd (paramiko's exception is
raised by hand, sky answers from a script)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import paramiko
import pytest

from vibesys.adapters.skypilot.boundary import Completed, SkyCli
from vibesys.adapters.skypilot.errors import SkyCommandFailed
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.transports.ssh_connect import SshConnection
from vibesys.adapters.transports.ssh_errors import map_ssh_errors
from vibesys.adapters.transports.ssh_settings import SshSettings
from vibesys.errors import CredentialRefused, TransportLost

#: 2026-01-01 00:00:00 UTC .. 2026-01-01 00:01:00 UTC, a minute as a site might sign it
VALID_AFTER, VALID_BEFORE = 1767225600, 1767225660


def signed_key(tmp_path: Path, window: str = "20260101000000:20260101000100") -> Path:
    """A throwaway key and its user certificate, signed by a throwaway CA for `window`."""
    ca, key = tmp_path / "ca", tmp_path / "id_ed25519"
    for path in (ca, key):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
            check=True,
            timeout=30,
        )
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(ca), "-I", "t", "-n", "op", "-V", window, f"{key}.pub"],
        check=True,
        timeout=30,
        env={"TZ": "UTC"},
    )
    return key


def refused(identity: Path | None, what: str = "connect to op@login:22") -> CredentialRefused:
    with (
        pytest.raises(CredentialRefused) as caught,
        map_ssh_errors(what, host="op@login:22", identity=str(identity) if identity else None),
    ):
        raise paramiko.AuthenticationException("Authentication failed.")
    return caught.value


def test_an_expired_certificate_is_named_with_its_expiry_and_renewal(tmp_path: Path) -> None:
    key = signed_key(tmp_path)
    cert = f"{key}-cert.pub"
    error = refused(key)
    assert str(error) == (
        f"connect to op@login:22: login refused: the SSH certificate {cert} expired at "
        "2026-01-01 00:01:00 UTC; renew it (with the site's tool)"
    )
    assert error.credential == f"the SSH certificate {cert} (expired at 2026-01-01 00:01:00 UTC)"
    assert error.fix == (
        f"renew the SSH certificate {cert} with the site's tool (`vibesys check` shows its "
        "validity)"
    )
    assert error.evidence == (
        f"{error} (ssh op@login:22: authentication failed: AuthenticationException: "
        "Authentication failed.)"
    )
    # A login comes before any command: nothing ran, and waiting does not cure it.
    assert (error.maybe_submitted, error.retryable) == (False, False)
    assert not isinstance(error, TransportLost)


def test_a_refused_key_without_an_expired_certificate_names_the_key(tmp_path: Path) -> None:
    far = time.strftime("%Y%m%d", time.gmtime(time.time() + 86400 * 30))
    key = signed_key(tmp_path, f"20260101000000:{far}000000")  # valid: not why it failed
    error = refused(key)
    assert str(error) == (
        f"connect to op@login:22: login refused: the key {key} was not accepted; check that "
        f"the key {key} is still accepted (its public key in the remote authorized_keys, its "
        "certificate renewed) and identity_file"
    )
    assert error.credential == f"the key {key}"
    assert refused(None).credential == "the login's key"


def test_a_refused_relogin_after_a_dropped_connection_is_not_a_lost_transport(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = signed_key(tmp_path)
    slept: list[float] = []
    settings = SshSettings(host="login", user="op", identity_file=str(key), reconnect_attempts=5)
    connection = SshConnection(settings, sleep=slept.append)
    tries: list[int] = []

    def relogin() -> Any:
        tries.append(1)
        raise paramiko.AuthenticationException("Authentication failed.")

    monkeypatch.setattr(connection, "_connect_once", relogin)
    connection._connections = 1  # a connection was up, and dropped: this is a re-login
    with pytest.raises(CredentialRefused) as caught:
        connection.connect()
    # One try, no backoff: a refused login is not retried as a lost one.
    assert (len(tries), slept) == (1, [])
    assert "the SSH certificate" in str(caught.value) and "expired at" in str(caught.value)


def scripted(reply: Completed) -> SkyCli:
    def runner(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Completed:
        return reply

    return SkyCli(runner=runner)


#: OpenSSH's line when the login node refuses SkyPilot's key (sshconnect2.c)
DENIED = "root@127.0.0.1: Permission denied (publickey).\n"


def test_skys_refused_ssh_is_credential_refused_with_the_commands_own_maybe_submitted(
    tmp_path: Path,
) -> None:
    key = signed_key(tmp_path)
    ops = SkyOps(scripted(Completed(255, "", DENIED)), identity=lambda: str(key))
    with pytest.raises(CredentialRefused) as status:
        ops.status("c", refresh=True)
    assert (status.value.maybe_submitted, status.value.retryable) == (False, False)
    assert str(status.value) == (
        "sky status (SkyPilot's ssh to the login node): login refused: the SSH certificate "
        f"{key}-cert.pub expired at 2026-01-01 00:01:00 UTC; renew it (with the site's tool)"
    )
    assert "Permission denied (publickey)" in status.value.evidence
    # An exec may have reached the API server before its ssh failed: it may have submitted.
    with pytest.raises(CredentialRefused) as submitted:
        ops.exec("c", tmp_path / "task.json")
    assert submitted.value.maybe_submitted is True


def test_a_files_permission_denied_is_not_a_refused_login() -> None:
    ops = SkyOps(scripted(Completed(1, "", "cat: /x: Permission denied\n")))
    with pytest.raises(SkyCommandFailed):
        ops.queue("c")


def test_an_empty_queue_behind_a_refused_ssh_is_not_a_cluster_gone() -> None:
    ops = SkyOps(scripted(Completed(0, "{}\n", DENIED)))
    with pytest.raises(CredentialRefused) as caught:
        ops.queue("c")
    assert caught.value.maybe_submitted is False
    assert SkyOps(scripted(Completed(0, "{}\n", ""))).queue("c") is None
