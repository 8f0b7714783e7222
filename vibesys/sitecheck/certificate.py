"""Days left on an OpenSSH certificate (`<identity>-cert.pub`), read from the certificate.

Sites that sign short-lived SSH certificates (a CSCS-style `-cert.pub` next to the key) break
every login when one expires; OpenSSH and paramiko both pick the certificate up from next to
the identity file. vibesys does not issue or renew certificates: it says how long the one there
is valid and what to do. The blob is parsed here (PROTOCOL.certkeys): the validity is two
64-bit epoch seconds, so no time zone or locale stands between the file and the answer.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from vibesys.sitecheck.runner import Found, fail, ok, warn

__all__ = [
    "FOREVER",
    "Certificate",
    "CertificateError",
    "certificate_found",
    "certificate_path",
    "parse_certificate",
]

#: valid_before of a certificate that never expires.
FOREVER: Final = 2**64 - 1
#: How many length-prefixed fields each certificate type has between its nonce and its serial
#: (the public key: e, n for RSA; p, q, g, y for DSA; curve, point for ECDSA; the key for
#: Ed25519; plus the application of a security-key type).
_KEY_FIELDS: Final = {
    "ssh-rsa-cert-v01@openssh.com": 2,
    "ssh-dss-cert-v01@openssh.com": 4,
    "ecdsa-sha2-nistp256-cert-v01@openssh.com": 2,
    "ecdsa-sha2-nistp384-cert-v01@openssh.com": 2,
    "ecdsa-sha2-nistp521-cert-v01@openssh.com": 2,
    "ssh-ed25519-cert-v01@openssh.com": 1,
    "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com": 3,
    "sk-ssh-ed25519-cert-v01@openssh.com": 2,
}
_USER_CERT: Final = 1


class CertificateError(ValueError):
    """The file is not an OpenSSH certificate this parser can read."""


@dataclass(frozen=True, slots=True)
class Certificate:
    key_type: str
    key_id: str
    principals: tuple[str, ...]
    #: epoch seconds
    valid_after: int
    valid_before: int
    user_certificate: bool


class _Reader:
    def __init__(self, blob: bytes) -> None:
        self.blob = blob
        self.at = 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.blob):
            raise CertificateError("the certificate is cut short")
        chunk = self.blob[self.at : self.at + size]
        self.at += size
        return chunk

    def string(self) -> bytes:
        (size,) = struct.unpack(">I", self.take(4))
        return self.take(size)

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def uint64(self) -> int:
        value: int = struct.unpack(">Q", self.take(8))[0]
        return value


def parse_certificate(text: str) -> Certificate:
    """The certificate in a `-cert.pub` line (`TYPE BASE64 [comment]`)."""
    words = text.split()
    if len(words) < 2:
        raise CertificateError("not an OpenSSH public key line")
    try:
        blob = base64.b64decode(words[1], validate=True)
    except (binascii.Error, ValueError):
        raise CertificateError("its key is not base64") from None
    reader = _Reader(blob)
    key_type = reader.string().decode("ascii", "replace")
    if key_type != words[0] or key_type not in _KEY_FIELDS:
        raise CertificateError(f"{words[0]!r} is not an OpenSSH certificate type")
    reader.string()  # nonce
    for _ in range(_KEY_FIELDS[key_type]):
        reader.string()
    reader.uint64()  # serial
    kind = reader.uint32()
    key_id = reader.string().decode("utf-8", "replace")
    principals = _Reader(reader.string())
    names: list[str] = []
    while principals.at < len(principals.blob):
        names.append(principals.string().decode("utf-8", "replace"))
    valid_after, valid_before = reader.uint64(), reader.uint64()
    return Certificate(
        key_type, key_id, tuple(names), valid_after, valid_before, kind == _USER_CERT
    )


def certificate_path(identity: Path) -> Path:
    """Where OpenSSH (and paramiko) look for the identity's certificate."""
    return identity.with_name(identity.name + "-cert.pub")


def certificate_found(
    identity: Path | None, *, now: float, warn_days: float, user: str | None = None
) -> Found:
    """The certificate row: ok with a note when there is none; warn under `warn_days` left;
    fail when expired, not yet valid, or unreadable."""
    if identity is None:
        return ok("no identity file configured: no certificate to check")
    path = certificate_path(identity)
    if not path.exists():
        return ok(f"no certificate ({path}): the key logs in on its own")
    renew = f"renew the SSH certificate {path} with the site's tool"
    try:
        cert = parse_certificate(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        return fail(f"cannot read {path}: {exc.strerror or exc}", f"make {path} readable")
    except CertificateError as exc:
        return fail(f"{path}: {exc}", f"{renew}, or remove the file")
    where = f"{path} (key id {cert.key_id!r})"
    if not cert.user_certificate:
        return fail(f"{where} is a host certificate, not a user one", renew)
    if cert.valid_after > now:
        return fail(
            f"{where} is not valid before {_when(cert.valid_after)}",
            "check this host's clock, or renew the certificate",
        )
    if cert.principals and user is not None and user not in cert.principals:
        return warn(
            f"{where} is for {', '.join(cert.principals)}, not the login user {user}",
            f"{renew} for {user}, or log in as one of its principals",
        )
    if cert.valid_before == FOREVER:
        return ok(f"{where} never expires")
    left = cert.valid_before - now
    if left <= 0:
        return fail(f"{where} expired {_when(cert.valid_before)} ({_days(-left)} ago)", renew)
    if left < warn_days * 86400:
        return warn(
            f"{where} expires {_when(cert.valid_before)} ({_days(left)} left)",
            f"{renew} before then: every login (vibesys, SkyPilot) fails once it expires",
        )
    return ok(f"{where} valid until {_when(cert.valid_before)} ({_days(left)} left)")


def _when(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _days(seconds: float) -> str:
    days = seconds / 86400
    if days < 1:
        return f"{seconds / 3600:.1f} hours"
    return f"{days:.1f} days"
