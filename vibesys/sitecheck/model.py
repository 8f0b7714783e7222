"""The rows of a site check and the report they make: pure data, JSON and text, no I/O.

One row per check: its name, a status (ok / warn / fail / skipped), what was found (`detail`)
and, for anything a person must act on, what to do (`fix`). A check skipped because one it
needs failed names that check in its fix; a check skipped because it does not apply (no GPU
commands configured, no certificate) needs none.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Final

from msgspec import Struct, field

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "CheckReport",
    "CheckRow",
    "Status",
    "render_text",
]

#: `vibesys check` exits 0 when no check failed (warnings included), 1 when one did, and 2 for
#: bad input (an unreadable configuration, an unknown profile): one line, nothing checked.
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_BAD_INPUT: Final = 2


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIPPED = "skipped"


class CheckRow(Struct, frozen=True):
    name: str
    status: Status
    detail: str
    #: what the operator should do; required for warn and fail
    fix: str = ""
    #: how long the check took (wall clock)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if not self.name or any(ch.isspace() for ch in self.name):
            raise ValueError(f"check name {self.name!r}: one word")
        if self.status in (Status.WARN, Status.FAIL) and not self.fix:
            raise ValueError(f"check {self.name}: a {self.status} row must say what to do")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": str(self.status),
            "detail": self.detail,
            "fix": self.fix or None,
            "seconds": round(self.seconds, 3),
        }


class CheckReport(Struct, frozen=True):
    """Every row of one site's check, in the order they ran."""

    #: "slurm" (a slurm.toml) or "skypilot" (a profile of clusters.toml)
    kind: str
    #: the site's name: [slurm] name, or the profile's name
    site: str
    #: the configuration file it came from
    source: str
    rows: tuple[CheckRow, ...] = field(default_factory=tuple)

    @property
    def failed(self) -> tuple[CheckRow, ...]:
        return tuple(row for row in self.rows if row.status is Status.FAIL)

    @property
    def warnings(self) -> tuple[CheckRow, ...]:
        return tuple(row for row in self.rows if row.status is Status.WARN)

    @property
    def ok(self) -> bool:
        """No check failed (warnings and skipped checks do not count against the site)."""
        return not self.failed

    @property
    def overall(self) -> Status:
        if self.failed:
            return Status.FAIL
        return Status.WARN if self.warnings else Status.OK

    @property
    def exit_status(self) -> int:
        return EXIT_OK if self.ok else EXIT_FAILED

    def row(self, name: str) -> CheckRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    def failure_summary(self) -> str:
        """One line naming the first failed check and its fix ('' when none failed), for a
        caller that refuses to start on a failure."""
        if not self.failed:
            return ""
        first = self.failed[0]
        more = f" (and {len(self.failed) - 1} more)" if len(self.failed) > 1 else ""
        return f"site check {first.name} failed{more}: {first.detail}; fix: {first.fix}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "site": self.site,
            "source": self.source,
            "overall": str(self.overall),
            "rows": [row.to_json() for row in self.rows],
        }


def render_text(report: CheckReport) -> str:
    """The report for people: a heading, one line per row (its fix indented below it), and the
    overall verdict."""
    lines = [f"{report.kind} site {report.site} ({report.source})"]
    width = max([len(row.name) for row in report.rows] + [4])
    status_width = max(len(str(status)) for status in Status)
    for row in report.rows:
        lines.append(f"  {row.status:<{status_width}}  {row.name:<{width}}  {row.detail}")
        if row.fix and row.status in (Status.WARN, Status.FAIL):
            lines.append(f"  {'':<{status_width}}  {'':<{width}}  fix: {row.fix}")
    lines.append(f"overall: {report.overall} ({_counts(report.rows)})")
    return "\n".join(lines) + "\n"


def _counts(rows: Iterable[CheckRow]) -> str:
    found = {status: 0 for status in Status}
    for row in rows:
        found[row.status] += 1
    return ", ".join(f"{count} {status}" for status, count in found.items() if count) or "no checks"
