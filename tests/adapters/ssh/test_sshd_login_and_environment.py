"""Logging in to the real local sshd: unknown and changed host keys, wrong or encrypted
identities (nothing secret leaks), the environment allowlist, a jump host, a site's config."""

from __future__ import annotations

import base64
from pathlib import Path

import paramiko
import pytest

from tests.helpers.ssh import (
    PASSPHRASE,
    SSHD_PORT,
    everything_said,
    host_key_line,
    make,
    new_key,
    secret_lines,
)
from vibesys.adapters.transports.configured import runner_from_config
from vibesys.adapters.transports.ssh import REDACTED, SshTransport, host_key_fingerprint
from vibesys.config.transport import SshTransportConfig
from vibesys.errors import BackendMisconfigured, BackendUnavailable


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
    assert refused.connection.connections == 0

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
    assert f"connect to root@127.0.0.1:2222: login refused: the key {stranger} was not" in str(
        error
    )
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
        assert isinstance(transport.connection.paramiko_transport.sock, paramiko.Channel)
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
