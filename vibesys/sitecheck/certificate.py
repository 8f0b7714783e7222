"""Days left on an OpenSSH certificate (`<identity>-cert.pub`), read from the certificate.

Sites that sign short-lived SSH certificates (a CSCS-style `-cert.pub` next to the key) break
every login when one expires. vibesys does not issue or renew certificates: it says how long the
one there is valid and what to do. The parser lives in `vibesys.osutil.ssh_certificate`, which
the transports read too (to name an expired certificate when a login is refused).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from vibesys.osutil.ssh_certificate import (
    FOREVER,
    Certificate,
    CertificateError,
    certificate_path,
    parse_certificate,
)
from vibesys.sitecheck.runner import Found, fail, ok, warn

__all__ = [
    "FOREVER",
    "Certificate",
    "CertificateError",
    "certificate_found",
    "certificate_path",
    "parse_certificate",
]


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
