"""What a candidate snapshot leaves out: `SnapshotPolicy` and its pattern rules.

Patterns are a small, documented subset of gitignore's, matched case-sensitively:
- `NAME` (no "/"): any entry whose base name matches, at any depth (`*.pem`, `.env`);
- a trailing "/" restricts a pattern to real directories (`.git/`); a symbolic link to a
  directory is a link, not a directory, and is never walked;
- a "/" anywhere else (or a leading "/") anchors the pattern at the candidate's root and it is
  matched against the whole relative path (`/build/`, `data/raw/*.csv`);
- `*` and `?` never match "/"; `**` matches across directories (`docs/**/*.pdf`);
  `[abc]`, `[a-z]` and `[!abc]` are character classes.
An excluded directory is not walked, so nothing below it can be included again (as in git):
to keep a file inside `node_modules/`, include `node_modules/` itself and exclude the rest.
`include` patterns win over every pattern exclusion (the defaults and `exclude`), never over the
size limit or the structural rules (special files, names that are not UTF-8, symbolic links
leaving the tree, the marker name).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Final

import msgspec
from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DEFAULT_EXCLUSIONS",
    "DEFAULT_MAX_FILE_BYTES",
    "ExclusionReason",
    "SnapshotPolicy",
]


class ExclusionReason(StrEnum):
    """Why an entry is not in the snapshot (shown by `vibesys snapshot --dry-run`)."""

    CREDENTIALS = "credentials"
    VCS = "vcs"
    VIBESYS_STATE = "vibesys-state"
    CACHE = "cache"
    LOG = "log"
    #: one of the policy's own `exclude` patterns
    PATTERN = "pattern"
    #: a regular file over `max_file_bytes`
    TOO_LARGE = "too-large"
    #: a symbolic link whose target is absolute or resolves outside the candidate
    EXTERNAL_SYMLINK = "external-symlink"
    #: a FIFO, socket or device
    SPECIAL_FILE = "special-file"
    #: a name (or link target) that is not valid UTF-8
    BAD_NAME = "bad-name"
    #: `.vibesys-snapshot` at the top level, the snapshot's own marker
    RESERVED = "reserved"


DEFAULT_EXCLUSIONS: Final[Mapping[ExclusionReason, tuple[str, ...]]] = {
    ExclusionReason.CREDENTIALS: (
        ".ssh/",
        "id_rsa*",
        "id_dsa*",
        "id_ed25519*",
        "id_ecdsa*",
        "*.pem",
        "*.key",
        "*.p12",
        "*.pfx",
        ".env",
        ".env.*",
        ".netrc",
        ".pypirc",
        ".git-credentials",
        "credentials*",
    ),
    # `.git` is a directory, or a file in a worktree or submodule
    ExclusionReason.VCS: (".git", ".hg/", ".svn/"),
    ExclusionReason.VIBESYS_STATE: (".vibesys/",),
    ExclusionReason.CACHE: (
        "__pycache__/",
        ".pytest_cache/",
        ".mypy_cache/",
        ".ruff_cache/",
        ".hypothesis/",
        "node_modules/",
        ".venv/",
        "venv/",
        "*.pyc",
    ),
    ExclusionReason.LOG: ("*.log",),
}

#: 50 MiB: model weights and data sets belong on the cluster's persistent storage.
DEFAULT_MAX_FILE_BYTES: Final = 50 * 1024 * 1024

#: TOML arrays arrive as lists; lax for the container only (items stay strict).
_Patterns = Annotated[tuple[str, ...], Field(strict=False)]


class SnapshotPolicy(BaseModel):
    """What to leave out of a candidate snapshot, on top of `DEFAULT_EXCLUSIONS`.

    Strict and frozen like the rest of the configuration: `max_file_bytes = "5"` is an error.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    #: more patterns to leave out (reason `pattern`)
    exclude: _Patterns = ()
    #: patterns kept even when an exclusion pattern (a default included) matches them
    include: _Patterns = ()
    #: regular files larger than this are left out (reason `too-large`)
    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, ge=0)
    #: keep symbolic links that point outside the candidate (recorded as links, never followed)
    allow_external_symlinks: bool = False

    @field_validator("exclude", "include")
    @classmethod
    def _check_patterns(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            _check_pattern(pattern)
        return patterns


def _check_pattern(pattern: str) -> None:
    body = pattern.strip("/")
    if not body or "\0" in pattern or "\n" in pattern:
        raise ValueError(f"{pattern!r} is not a pattern")
    if pattern.startswith("!"):
        raise ValueError(f"{pattern!r}: negation is not supported; use `include` instead")
    if any(part in (".", "..", "") for part in body.split("/")):
        raise ValueError(f"{pattern!r}: use plain relative components (no '.', '..', '//')")


class Rule(msgspec.Struct, frozen=True):
    pattern: str
    reason: ExclusionReason


def _translate(glob: str) -> str:
    """A glob (one of the forms above, without its leading or trailing "/") as a regex."""
    out: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if glob.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := glob.find("]", index + 2)) != -1:
            body = glob[index + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
            out.append(f"[^/{escaped}]" if negate else f"[{escaped}]")
            index = end + 1
            continue
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


class _Alternation:
    """Several patterns as one compiled regex; a match names the first pattern that matched."""

    def __init__(self, patterns: list[tuple[int, str]]) -> None:
        self.regex = (
            re.compile("|".join(f"(?P<r{index}>{body})" for index, body in patterns))
            if patterns
            else None
        )

    def first(self, subject: str) -> int | None:
        if self.regex is None:
            return None
        match = self.regex.fullmatch(subject)
        if match is None or match.lastgroup is None:
            return None
        return int(match.lastgroup[1:])


class Matcher:
    """A policy's patterns compiled: four alternations per list (base name or whole path, any
    entry or directories only), so each entry costs a handful of regex matches however many
    patterns there are."""

    def __init__(self, rules: list[Rule], includes: tuple[str, ...]) -> None:
        self.rules = rules
        self._exclude = self._compile([rule.pattern for rule in rules])
        self._include = self._compile(list(includes))

    @staticmethod
    def _compile(patterns: list[str]) -> tuple[_Alternation, ...]:
        groups: list[list[tuple[int, str]]] = [[], [], [], []]
        for index, pattern in enumerate(patterns):
            dir_only = pattern.endswith("/")
            anchored = "/" in pattern.strip("/") or pattern.startswith("/")
            body = _translate(pattern.strip("/"))
            # groups: 0 base name (files), 1 base name (dirs), 2 path (files), 3 path (dirs)
            offset = 2 if anchored else 0
            groups[offset + 1].append((index, body))
            if not dir_only:
                groups[offset].append((index, body))
        return tuple(_Alternation(group) for group in groups)

    @staticmethod
    def _first(alternations: tuple[_Alternation, ...], path: str, is_dir: bool) -> int | None:
        name = path.rsplit("/", 1)[-1]
        found = [
            alternations[1 if is_dir else 0].first(name),
            alternations[3 if is_dir else 2].first(path),
        ]
        hits = [index for index in found if index is not None]
        return min(hits) if hits else None

    def excluded_by(self, path: str, is_dir: bool) -> Rule | None:
        """The first rule that leaves out the entry at relative `path`, unless included."""
        index = self._first(self._exclude, path, is_dir)
        if index is None or self._first(self._include, path, is_dir) is not None:
            return None
        return self.rules[index]


@functools.lru_cache(maxsize=32)
def matcher(policy: SnapshotPolicy) -> Matcher:
    rules = [Rule(p, reason) for reason, patterns in DEFAULT_EXCLUSIONS.items() for p in patterns]
    rules += [Rule(pattern, ExclusionReason.PATTERN) for pattern in policy.exclude]
    return Matcher(rules, policy.include)
