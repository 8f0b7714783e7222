"""The per-session tokens of the host's socket services, one format per service.

A candidate session holds two: the evaluation bridge's (`vibesys-eval`) and the GPU broker's
(`vibesys-gpu`). Each is random and new at every start, so one never equals the other; the
prefix makes a token's service visible, so a service handed the other one's token refuses it
by name instead of with a bare "bad token". Stdlib only.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Final

__all__ = [
    "BRIDGE_PREFIX",
    "BROKER_PREFIX",
    "new_token",
    "service_of",
    "tokens_match",
    "write_private",
    "write_token_file",
]

#: `vibesys-eval` tokens (the evaluation bridge).
BRIDGE_PREFIX: Final = "vbeval1."
#: `vibesys-gpu` tokens (the GPU broker).
BROKER_PREFIX: Final = "vbgpu1."

_SERVICES: Final = {BRIDGE_PREFIX: "the evaluation bridge", BROKER_PREFIX: "the GPU broker"}


def new_token(prefix: str) -> str:
    """A fresh token of one service: its prefix, then 256 random bits (URL-safe base64)."""
    if prefix not in _SERVICES:
        raise ValueError(f"unknown token prefix {prefix!r}")
    return prefix + secrets.token_urlsafe(32)


def service_of(token: str) -> str | None:
    """Which service's format `token` has ("the GPU broker", ...), or None."""
    for prefix, service in _SERVICES.items():
        if token.startswith(prefix):
            return service
    return None


def tokens_match(sent: str, expected: str) -> bool:
    """Constant-time comparison, so the time taken tells nothing about the token."""
    return hmac.compare_digest(sent.encode("utf-8"), expected.encode("utf-8"))


def write_token_file(path: Path, token: str) -> None:
    """`token` in a new file readable by its owner only (0600), replacing a stale one."""
    write_private(path, token + "\n")


def write_private(path: Path, text: str) -> None:
    """`text` in a new file readable by its owner only (0600): whatever was at `path` is
    replaced, never followed."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
