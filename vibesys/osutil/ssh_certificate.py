"""An OpenSSH certificate (`<identity>-cert.pub`), read from its blob (PROTOCOL.certkeys).

Sites that sign short-lived SSH certificates break every login when one expires; OpenSSH and
paramiko both pick the certificate up from next to the identity file. The validity is two
64-bit epoch seconds, so no time zone or locale stands between the file and the answer. Read by
`vibesys check` (before a session) and by the transports (to name an expired certificate when a
login is refused).
"""

from __future__ import annotations

import base64
import binascii
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec

__all__ = [
    "FOREVER",
    "Certificate",
    "CertificateError",
    "certificate_path",
    "expired_certificate",
    "parse_certificate",
    "when",
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


class Certificate(msgspec.Struct, frozen=True):
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


def expired_certificate(identity: Path, now: float) -> tuple[Path, Certificate] | None:
    """The identity's certificate when it is there, readable, and expired (or not yet valid)
    at `now`; None otherwise (no certificate, or one that is not why a login failed)."""
    path = certificate_path(identity)
    try:
        cert = parse_certificate(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, CertificateError):
        return None
    if cert.valid_before != FOREVER and cert.valid_before <= now:
        return path, cert
    if cert.valid_after > now:
        return path, cert
    return None


def when(epoch: int) -> str:
    """An epoch second as `YYYY-MM-DD HH:MM:SS UTC`."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
