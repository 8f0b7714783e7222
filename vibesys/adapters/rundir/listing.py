"""Listing declared artifacts (relative globs) with sizes and sha256 digests.

`LIST_SCRIPT` is a standalone Python 3 program (stdlib only) that runs where the job ran:
`python3 -c LIST_SCRIPT BASE LIMITS PATTERN...` prints one JSON object
`{"found": [{"path", "size", "sha256"}], "refused": [{"path", "size", "why"}],
"missing": [pattern, ...]}`. It is `vibesys.osutil.artifact_walk` with the descriptor-relative
primitives of `vibesys.osutil.beneath` in place of its import, so the node and the local
bridge (which calls `collect()` in process) walk by one rule, within the same `Limits`.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Final

from vibesys.adapters.base import ArtifactInfo
from vibesys.errors import UsageError
from vibesys.osutil.artifact_walk import Limits

__all__ = ["DEFAULT_LIMITS", "LIST_SCRIPT", "check_pattern", "list_argv", "parse_listing"]

#: The limits of every evaluation that records none (docs/bridge.md, "Artifacts").
DEFAULT_LIMITS: Final = Limits()

_BENEATH_IMPORT: Final = "from vibesys.osutil.beneath import "


def _script() -> str:
    osutil = importlib.resources.files("vibesys.osutil")
    text = osutil.joinpath("artifact_walk.py").read_text(encoding="utf-8")
    rules = osutil.joinpath("beneath.py").read_text(encoding="utf-8")
    # The node has no vibesys: the primitives go as their own text.
    before, line, after = text.partition(_BENEATH_IMPORT)
    if not line or _BENEATH_IMPORT in after:
        raise AssertionError("artifact_walk.py imports beneath once, on a line of its own")
    return before + rules + after.split("\n", 1)[1]


LIST_SCRIPT: Final = _script()


def list_argv(base: str, patterns: Sequence[str], limits: Limits) -> list[str]:
    """The listing program's arguments after the program itself."""
    return [base, limits.argument(), *patterns]


def check_pattern(pattern: str) -> str:
    """A declared artifact must stay inside the job's working directory."""
    path = PurePosixPath(pattern)
    if not pattern or path.is_absolute() or ".." in path.parts or "\0" in pattern:
        raise UsageError(
            f"--artifact {pattern!r}: must be a relative path or glob inside the "
            "job's working directory"
        )
    return pattern


def parse_listing(text: str) -> tuple[list[ArtifactInfo], list[str]]:
    """The files listed (a refused one has `refused` set and no digest) and the patterns
    nothing matched."""
    data = json.loads(text)
    infos = [ArtifactInfo(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in data["found"]]
    infos += [
        ArtifactInfo(str(f["path"]), int(f["size"]), "", refused=str(f["why"]))
        for f in data.get("refused", ())
    ]
    return infos, [str(p) for p in data["missing"]]
