"""How the `ssh` transport reports failures and keeps secrets out of what it reports.

`map_ssh_errors` turns paramiko's and the socket's exceptions into our error types at this edge;
`redact` removes secret values from every message, evidence and stderr. Both live apart from the
transport so the error policy can be read (and tested) on its own.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paramiko

from vibesys.errors import (
    BackendMisconfigured,
    BackendUnavailable,
    CredentialRefused,
    TransportLost,
)
from vibesys.osutil.ssh_certificate import expired_certificate, when

__all__ = [
    "REDACTED",
    "UnknownHostKey",
    "describe_exception",
    "host_key_fingerprint",
    "is_secret_name",
    "map_ssh_errors",
    "misconfigured",
    "redact",
    "refused_login",
]

REDACTED = "[REDACTED]"
_SECRET_WORDS = r"token|secret|passw(?:or)?d|passphrase|credential|key"
_SECRET_NAME = re.compile(_SECRET_WORDS, re.IGNORECASE)
_SECRET_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z0-9_.-]*(?:" + _SECRET_WORDS + r")[A-Za-z0-9_.-]*)="
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s'\"]+)",
    re.IGNORECASE,
)
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)


def is_secret_name(name: str) -> bool:
    """Whether a variable called `name` likely holds a secret (TOKEN, SECRET, PASSWORD, KEY)."""
    return _SECRET_NAME.search(name) is not None


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without the given secret values (also in their repr- and shell-quoted forms),
    private key blocks, or the values of `NAME=value` assignments whose names look secret."""
    out = _PRIVATE_KEY_BLOCK.sub("[REDACTED PRIVATE KEY]", text)
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms.update((secret, repr(secret)[1:-1], shlex.quote(secret)))
    for form in sorted(forms, key=len, reverse=True):
        if form:
            out = out.replace(form, REDACTED)
    return _SECRET_ASSIGNMENT.sub(lambda m: f"{m['name']}={REDACTED}", out)


def host_key_fingerprint(key: Any) -> str:
    """`SHA256:...`, as `ssh-keygen -l` and ssh's own prompts print it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


class UnknownHostKey(Exception):
    """Raised by our host-key policy: the host is not in known_hosts and may not be trusted."""

    def __init__(self, hostname: str, key_type: str, fingerprint: str, known_hosts: str) -> None:
        super().__init__(f"{hostname} is not in {known_hosts}")
        self.hostname = hostname
        self.key_type = key_type
        self.fingerprint = fingerprint
        self.known_hosts = known_hosts


def describe_exception(exc: BaseException) -> str:
    """`TypeName: message`, or just the type's name when the message is empty."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def misconfigured(message: str, fix: str, evidence: str = "") -> BackendMisconfigured:
    """A failure that waiting does not cure (a refused key, a host we may not trust): nothing
    ran, and the operator must apply `fix`."""
    return BackendMisconfigured(message, evidence=evidence, fix=fix, maybe_submitted=False)


def refused_login(
    what: str,
    *,
    identity: str | None,
    evidence: str,
    maybe_submitted: bool = False,
    now: float | None = None,
) -> CredentialRefused:
    """The site refused our login during `what`: named by the identity's certificate when one
    lies next to it and is expired (or not yet valid), else by the key. `evidence` is what the
    other side said (redacted already)."""
    moment = time.time() if now is None else now
    found = expired_certificate(Path(identity).expanduser(), moment) if identity else None
    if found is not None:
        path, cert = found
        if cert.valid_after > moment:
            credential = f"the SSH certificate {path} (not valid before {when(cert.valid_after)})"
            why = f"the SSH certificate {path} is not valid before {when(cert.valid_after)}"
        else:
            credential = f"the SSH certificate {path} (expired at {when(cert.valid_before)})"
            why = f"the SSH certificate {path} expired at {when(cert.valid_before)}"
        fix = (
            f"renew the SSH certificate {path} with the site's tool (`vibesys check` shows "
            "its validity)"
        )
        message = f"{what}: login refused: {why}; renew it (with the site's tool)"
    else:
        key = f"the key {identity}" if identity else "the login's key"
        credential = key
        fix = (
            f"check that {key} is still accepted (its public key in the remote authorized_keys, "
            "its certificate renewed) and identity_file"
        )
        message = f"{what}: login refused: {key} was not accepted; {fix}"
    return CredentialRefused(
        message,
        credential=credential,
        fix=fix,
        evidence=f"{message} ({evidence})" if evidence else message,
        maybe_submitted=maybe_submitted,
    )


@contextmanager
def map_ssh_errors(
    what: str,
    *,
    host: str = "",
    maybe_effect: bool = False,
    secrets: Iterable[str] = (),
    identity: str | None = None,
) -> Iterator[None]:
    """Translate paramiko's and the socket's failures during `what` into our error types.

    Host-key and key-file problems become BackendMisconfigured (never retried,
    `maybe_submitted=False`: nothing ran) with the fix in `fix`; a refused login becomes its
    kind, CredentialRefused, naming `identity`'s expired certificate when there is one (a
    login comes before any command: nothing ran). A refused channel is
    BackendUnavailable (the connection is fine). Anything else from the connection (socket
    timeout, EOF, SSHException, OSError) is TransportLost with `maybe_submitted=maybe_effect`.
    Messages and evidence are redacted of `secrets`, and paramiko's exception is not chained.
    """
    hidden = tuple(secrets)
    where = f"ssh {host}: " if host else "ssh: "

    def clean(text: str) -> str:
        return redact(text, hidden)

    try:
        yield
    except UnknownHostKey as exc:
        message = (
            f"{what}: refusing to connect: the host key of {exc.hostname} ({exc.key_type} "
            f"{exc.fingerprint}) is not in {exc.known_hosts}; verify the fingerprint and add "
            "the key there, or set accept_unknown_host = true"
        )
        fix = (
            f"verify {exc.fingerprint} with the host's owner, then add the key to {exc.known_hosts}"
        )
        raise misconfigured(clean(message), fix, clean(where + message)) from None
    except paramiko.BadHostKeyException as exc:
        message = (
            f"{what}: refusing to connect: the host key of {exc.hostname} changed (got "
            f"{exc.key.get_name()} {host_key_fingerprint(exc.key)}, known_hosts has "
            f"{exc.expected_key.get_name()} {host_key_fingerprint(exc.expected_key)}); "
            "this may be an attack, or the host was reinstalled"
        )
        fix = (
            "do not connect until the new key is verified out of band; then replace the old "
            f"entry for {exc.hostname} in known_hosts"
        )
        raise misconfigured(clean(message), fix, clean(where + message)) from None
    except paramiko.PasswordRequiredException as exc:
        # paramiko's kind of AuthenticationException for an encrypted key: our key file, not
        # the site's refusal.
        message = f"{what}: the identity file is encrypted and no passphrase was given"
        evidence = clean(f"{where}{message}: {describe_exception(exc)}")
        raise misconfigured(clean(message), "set passphrase_env", evidence) from None
    except paramiko.AuthenticationException as exc:
        said = clean(f"{where}authentication failed: {describe_exception(exc)}")
        raise refused_login(clean(what), identity=identity, evidence=said) from None
    except paramiko.ChannelException as exc:
        message = f"{what}: the server refused a new session ({exc.text or exc.code})"
        raise BackendUnavailable(
            clean(message), evidence=clean(where + message), maybe_submitted=False
        ) from None
    # socket.timeout is an OSError; NoValidConnectionsError too.
    except (EOFError, paramiko.SSHException, OSError) as exc:
        message = f"{what}: connection lost ({describe_exception(exc)})"
        raise TransportLost(
            clean(message), evidence=clean(where + message), maybe_submitted=maybe_effect
        ) from None
