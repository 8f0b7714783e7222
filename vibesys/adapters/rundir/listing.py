"""Listing declared artifacts (relative globs) with sizes and sha256 digests.

`LIST_SCRIPT` is a standalone Python 3 program (stdlib only) that runs where the job ran:
`python3 -c LIST_SCRIPT BASE PATTERN...` prints one JSON object
`{"found": [{"path", "size", "sha256"}], "missing": [pattern, ...]}`. The local adapter calls
`list_matching()` in process; both share the same rules.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from vibesys.errors import UsageError

LIST_SCRIPT = r"""
import glob, hashlib, json, os, sys
base, patterns = sys.argv[1], sys.argv[2:]
found, missing, seen = [], [], set()
for pattern in patterns:
    matches = sorted(glob.glob(os.path.join(glob.escape(base), pattern), recursive=True))
    files = [m for m in matches if os.path.isfile(m) and not os.path.islink(m)]
    if not files:
        missing.append(pattern)
    for path in files:
        rel = os.path.relpath(path, base)
        if rel in seen or rel.startswith(".."):
            continue
        seen.add(rel)
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        found.append({"path": rel, "size": os.path.getsize(path), "sha256": digest.hexdigest()})
print(json.dumps({"found": found, "missing": missing}))
"""


def check_pattern(pattern: str) -> str:
    """A declared artifact must stay inside the job's working directory."""
    path = PurePosixPath(pattern)
    if not pattern or path.is_absolute() or ".." in path.parts or "\0" in pattern:
        raise UsageError(
            f"--artifact {pattern!r}: must be a relative path or glob inside the "
            "job's working directory"
        )
    return pattern


def parse_listing(text: str) -> tuple[list[dict[str, object]], list[str]]:
    data = json.loads(text)
    return list(data["found"]), [str(p) for p in data["missing"]]
