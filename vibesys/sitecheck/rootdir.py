"""Is a remote root writable? The check makes a directory of its own in it (and removes it).

The directory is made through the site's transport, as the site's own commands see the file
system: `<root>/.vibesys-check.XXXXXX`, holding a `ping` file with the check's nonce (the
compute-node job reads it back). Removal only ever touches such a directory.
"""

from __future__ import annotations

import re
from typing import Final

from msgspec import Struct

from vibesys.sitecheck.access import SiteAccess

__all__ = ["CHECK_DIR_PREFIX", "CheckDir", "RootNotWritable", "make_check_dir", "remove_check_dir"]

CHECK_DIR_PREFIX: Final = ".vibesys-check."
PING: Final = "ping"
#: `sh -c MAKE vibesys-check ROOT NONCE`: prints the new directory and whether ROOT was made.
_MAKE: Final = (
    "root=$1; nonce=$2; made=no\n"
    'if [ ! -d "$root" ]; then mkdir -p -- "$root" || exit 3; made=yes; fi\n'
    f'dir=$(mktemp -d "$root/{CHECK_DIR_PREFIX}XXXXXX") || exit 4\n'
    f'printf "%s" "$nonce" > "$dir/{PING}" || {{ rm -rf -- "$dir"; exit 5; }}\n'
    'printf "%s\\n%s\\n%s\\n" "$dir" "$made" "$(id -un)"\n'
)
_REMOVE: Final = "case $1 in */" + CHECK_DIR_PREFIX.replace(".", "[.]") + '*) rm -rf -- "$1";; esac'
_CHECK_DIR: Final = re.compile(r"/.*/" + re.escape(CHECK_DIR_PREFIX) + r"[A-Za-z0-9]+")


class RootNotWritable(Exception):
    """The check could not make its directory in the root; the message says why."""


class CheckDir(Struct, frozen=True):
    path: str
    #: the root did not exist and the check created it
    created_root: bool
    #: the remote account the site's commands run as
    user: str


def make_check_dir(access: SiteAccess, root: str, nonce: str) -> CheckDir:
    done = access.run(["sh", "-c", _MAKE, "vibesys-check", root, nonce])
    if done.returncode != 0:
        reason = " ".join(done.stderr.split())[-300:] or f"exit status {done.returncode}"
        raise RootNotWritable(f"{root} is not writable: {reason}")
    lines = done.stdout.splitlines()
    if len(lines) < 3 or not _CHECK_DIR.fullmatch(lines[0]):
        raise RootNotWritable(f"{root}: the directory check printed {done.stdout[:200]!r}")
    return CheckDir(lines[0], lines[1] == "yes", lines[2])


def remove_check_dir(access: SiteAccess, path: str) -> bool:
    """Remove a check directory; False when that could not be done (left for the operator)."""
    if not _CHECK_DIR.fullmatch(path):
        return False
    try:
        done = access.run(["sh", "-c", _REMOVE, "vibesys-check", path])
    except Exception:  # the site stopped answering: say so, never raise from cleanup
        return False
    return done.returncode == 0
