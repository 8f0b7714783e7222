"""Days left on an OpenSSH certificate, read from certificates `ssh-keygen` signs with a
throwaway CA: valid, expiring soon, expired, not yet valid, forever, a host certificate, the
wrong principal, none at all, and garbage. Each key type's layout is parsed."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vibesys.sitecheck.certificate import (
    FOREVER,
    CertificateError,
    certificate_found,
    certificate_path,
    parse_certificate,
)

UTC_ENV = {**os.environ, "TZ": "UTC"}
#: The check's "now" in these tests: 2026-01-21 00:00 UTC.
NOW = datetime(2026, 1, 21, tzinfo=UTC).timestamp()


def keygen(*args: str) -> None:
    subprocess.run(["ssh-keygen", "-q", *args], check=True, env=UTC_ENV, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ca") / "ca"
    keygen("-t", "ed25519", "-N", "", "-f", str(path))
    return path


def identity(
    tmp_path: Path, ca: Path, validity: str | None, *extra: str, kind: str = "ed25519"
) -> Path:
    key = tmp_path / f"id_{kind}"
    keygen("-t", kind, "-N", "", "-f", str(key))
    if validity is not None:
        keygen(
            "-s", str(ca), "-I", "op@site", "-n", "root,op", "-V", validity, *extra, f"{key}.pub"
        )
    return key


def found(
    key: Path | None, user: str | None = "root", warn_days: float = 7.0
) -> tuple[str, str, str]:
    row = certificate_found(key, now=NOW, warn_days=warn_days, user=user)
    return str(row.status), row.detail, row.fix


def test_a_valid_certificate_says_when_it_expires(tmp_path: Path, ca: Path) -> None:
    key = identity(tmp_path, ca, "20260101000000:20260301000000")
    cert = certificate_path(key)
    assert cert == tmp_path / "id_ed25519-cert.pub"
    assert found(key) == (
        "ok",
        f"{cert} (key id 'op@site') valid until 2026-03-01 00:00 UTC (39.0 days left)",
        "",
    )


def test_a_certificate_about_to_expire_warns(tmp_path: Path, ca: Path) -> None:
    key = identity(tmp_path, ca, "20260101000000:20260121060000")
    status, detail, fix = found(key)
    cert = certificate_path(key)
    assert (status, detail) == (
        "warn",
        f"{cert} (key id 'op@site') expires 2026-01-21 06:00 UTC (6.0 hours left)",
    )
    assert fix == (
        f"renew the SSH certificate {cert} with the site's tool before then: every login "
        "(vibesys, SkyPilot) fails once it expires"
    )
    # Under the threshold only: with a 0-day threshold the same certificate is fine.
    assert found(key, warn_days=0)[0] == "ok"


def test_an_expired_certificate_fails_with_the_renewal(tmp_path: Path, ca: Path) -> None:
    key = identity(tmp_path, ca, "20251201000000:20260111000000")
    cert = certificate_path(key)
    assert found(key) == (
        "fail",
        f"{cert} (key id 'op@site') expired 2026-01-11 00:00 UTC (10.0 days ago)",
        f"renew the SSH certificate {cert} with the site's tool",
    )


def test_a_certificate_not_valid_yet_fails(tmp_path: Path, ca: Path) -> None:
    key = identity(tmp_path, ca, "20260201000000:20260301000000")
    status, detail, fix = found(key)
    assert status == "fail" and "is not valid before 2026-02-01 00:00 UTC" in detail
    assert fix == "check this host's clock, or renew the certificate"


def test_forever_host_and_principals(tmp_path: Path, ca: Path) -> None:
    (tmp_path / "a").mkdir()
    forever = identity(tmp_path / "a", ca, "always:forever")
    assert found(forever)[:2] == (
        "ok",
        f"{certificate_path(forever)} (key id 'op@site') never expires",
    )
    (tmp_path / "b").mkdir()
    host = identity(tmp_path / "b", ca, "always:forever", "-h")
    status, detail, _ = found(host)
    assert status == "fail" and detail.endswith("is a host certificate, not a user one")
    (tmp_path / "c").mkdir()
    other = identity(tmp_path / "c", ca, "20260101000000:20260301000000")
    status, detail, fix = found(other, user="alice")
    assert (status, detail.split(" is for ")[1]) == ("warn", "root, op, not the login user alice")
    assert fix.endswith("for alice, or log in as one of its principals")


def test_no_certificate_is_a_pass_with_a_note(tmp_path: Path, ca: Path) -> None:
    key = identity(tmp_path, ca, None)
    assert found(key) == ("ok", f"no certificate ({key}-cert.pub): the key logs in on its own", "")
    assert found(None) == ("ok", "no identity file configured: no certificate to check", "")


def test_garbage_fails_with_its_reason(tmp_path: Path) -> None:
    key = tmp_path / "id"
    certificate_path(key).write_text("ssh-ed25519-cert-v01@openssh.com AAAA!!!\n")
    status, detail, fix = found(key)
    assert (status, detail) == ("fail", f"{key}-cert.pub: its key is not base64")
    assert fix.endswith("or remove the file")
    with pytest.raises(CertificateError, match="not an OpenSSH certificate type"):
        parse_certificate(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOCnmW2Q7P2Yc4qgUd0Q6A3T4ZrdT0Ow0r6k2VxJ1o+7"
        )
    with pytest.raises(CertificateError, match="cut short"):
        parse_certificate(
            "ssh-ed25519-cert-v01@openssh.com AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2guY29t"
        )


@pytest.mark.parametrize("kind", ["ed25519", "rsa", "ecdsa"])
def test_every_key_type_parses_as_ssh_keygen_reads_it(tmp_path: Path, ca: Path, kind: str) -> None:
    key = identity(tmp_path, ca, "20260101000000:20260301000000", kind=kind)
    cert = parse_certificate(certificate_path(key).read_text())
    shown = subprocess.run(
        ["ssh-keygen", "-L", "-f", str(certificate_path(key))],
        capture_output=True,
        text=True,
        check=True,
        env=UTC_ENV,
    ).stdout
    valid = re.search(r"Valid: from (\S+) to (\S+)", shown)
    assert valid is not None
    assert datetime.fromtimestamp(cert.valid_after, UTC).strftime("%Y-%m-%dT%H:%M:%S") == valid[1]
    assert datetime.fromtimestamp(cert.valid_before, UTC).strftime("%Y-%m-%dT%H:%M:%S") == valid[2]
    assert (cert.key_id, cert.principals, cert.user_certificate) == (
        "op@site",
        ("root", "op"),
        True,
    )
    assert cert.valid_before != FOREVER
