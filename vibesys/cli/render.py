"""Text renderings for the CLI (pure: strings in, strings out). The exit statuses are
`vibesys.states.exits`."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from typing import Any

from vibesys.journal_schema import ArtifactRow, Attempt, ClusterLease, HistoryRow, Invocation, iso
from vibesys.states import JobState, Outcome
from vibesys.states.exits import EXIT_UNRESOLVED, EXIT_WAITING


def reconcile_status(failed: bool, waiting: bool) -> int:
    """`vibesys reconcile`'s exit status: an UNRESOLVED invocation (or a failed row) comes
    first, then one left waiting out its scheduler's outage."""
    if failed:
        return EXIT_UNRESOLVED
    return EXIT_WAITING if waiting else 0


def stopped_line(inv: Invocation) -> str:
    """A follower stopped before the end: nothing was cancelled."""
    return (
        f"vibesys: stopped waiting for {inv.id} ({inv.state}); nothing was cancelled: "
        f"`vibesys wait {inv.id}` follows it again"
    )


def summary(inv: Invocation, last: HistoryRow | None = None, timed_out: bool = False) -> str:
    """The final line of `run`/`wait`/`cancel`: the state, and when the outcome is not the
    command's own, the cause (and the fix) from the last recorded event. `timed_out`: the
    cancel was the invocation's timeout's, and says so (TIMEOUT, as its JobResult)."""
    parts = [f"vibesys: {inv.id} {inv.state}"]
    if inv.outcome is Outcome.CANCELLED and timed_out:
        parts.append("TIMEOUT")
    elif inv.outcome:
        parts.append(str(inv.outcome))
    if inv.exit_code is not None:
        parts.append(f"exit {inv.exit_code}")
    parts.append(f"attempt {inv.attempt}")
    if inv.failure_class and inv.outcome is Outcome.INFRA_FAILED:
        parts.append(f"last failure {inv.failure_class}")
    line = " ".join(parts)
    explain = inv.state in (JobState.UNRESOLVED, JobState.COLLECTING) or inv.outcome in (
        Outcome.INFRA_FAILED,
        Outcome.MISCONFIGURED,
        Outcome.REJECTED,
        Outcome.CANCELLED,
        Outcome.DEPENDENCY_FAILED,
    )
    if inv.outcome is Outcome.CANCELLED and timed_out:
        line += ": its timeout cancelled it"
    elif last is not None and explain:
        cause = _cause(last)
        if cause:
            line += f": {cause}"
    if inv.state is JobState.COLLECTING:
        line += " (the job ended; its results could not be brought home yet: vibesys reconcile)"
    return line


def _cause(row: HistoryRow) -> str:
    evidence = row.evidence
    text = str(evidence.get("reason") or evidence.get("observation") or "")
    fix = evidence.get("fix")
    return " ".join(f"{text}; fix: {fix}".split()) if fix else " ".join(text.split())


def _evidence_text(evidence: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in evidence.items() if v not in ("", None, [], {}))


def show(
    inv: Invocation,
    attempts: Sequence[Attempt],
    history: Sequence[HistoryRow],
    artifacts: Sequence[ArtifactRow] = (),
    leases: Sequence[tuple[int, ClusterLease]] = (),
) -> str:
    used = min(inv.retries, inv.max_retries)
    failures = f" ({inv.retries} infrastructure failures)" if inv.retries > used else ""
    lines = [
        _field("invocation", inv.id + (f"  ({one_line(inv.label)})" if inv.label else "")),
        _field("state", inv.state)
        + (f"  outcome {inv.outcome}" if inv.outcome else "")
        + (f"  exit {inv.exit_code}" if inv.exit_code is not None else ""),
        _field("adapter", inv.adapter),
        _field("command", shlex.join(inv.command)),
        *([_field("cwd", inv.cwd)] if inv.cwd else []),
        _field("invocation dir", inv.invocation_dir),
        _field("request", _evidence_text(inv.recorded_request) or "-"),
        *([_field("snapshot", f"sha256:{inv.snapshot_digest}")] if inv.snapshot_digest else []),
        *(
            [_field("site", f"sha256:{inv.site_digest}  (vibesys journal config {inv.id})")]
            if inv.site_digest
            else []
        ),
        _field("retries", f"{used} of {inv.max_retries}{failures}"),
        _field("settings", _evidence_text(inv.settings.to_json())),
        "attempts",
    ]
    for a in attempts:
        lines.append(
            f"  {a.attempt}  {a.job_name}  job {a.job_id or '-'}  {a.failure_class or ''}".rstrip()
        )
        if a.provenance:
            lines.append(f"     ran on  {_evidence_text(a.provenance)}")
        if a.claim:
            lines.append(f"     claim   {' '.join(a.claim.split())}")
        for attempt, lease in leases:
            if attempt == a.attempt:
                lines.append(f"     cluster {lease_line(lease)}")
    if artifacts:
        lines.append("artifacts")
        for art in artifacts:
            size = "-" if art.size is None else f"{art.size} bytes"
            lines.append(
                f"  {art.attempt}  {art.path}  {art.state}  {size}  {art.detail or ''}".rstrip()
            )
    lines.append("history")
    for h in history:
        lines.append(
            f"  {h.seq:>3}  {iso(h.at)}  {h.from_state} -> {h.to_state}  {h.event}  "
            f"{_evidence_text(h.evidence)}".rstrip()
        )
    return "\n".join(lines)


def _field(label: str, value: object) -> str:
    """One line of the invocation's fields, its value in the column after the longest label."""
    return f"{label:<14}  {value}"


def lease_line(lease: ClusterLease) -> str:
    """One cluster lease in a line: name, lease id, state, allocation, profile."""
    allocation = f"allocation {lease.allocation_job}" if lease.allocation_job else "no allocation"
    return f"{lease.name}  lease {lease.id}  {lease.state}  {allocation}  profile {lease.profile}"


def clusters_table(leases: Sequence[ClusterLease]) -> str:
    """`vibesys clusters`: one line per lease, newest last."""
    if not leases:
        return "no cluster leases"
    headers = ("LEASE", "CLUSTER", "STATE", "ALLOCATION", "PROFILE", "CAMPAIGN", "UPDATED")
    rows = [
        (
            str(lease.id),
            lease.name,
            lease.state,
            lease.allocation_job or "-",
            lease.profile,
            lease.campaign or "-",
            iso(lease.updated_at),
        )
        for lease in leases
    ]
    return table(headers, rows)


def one_line(text: str) -> str:
    """`text` safe inside a line of a table: what is not printable (a newline, a tab, an
    escape sequence, a byte that was not UTF-8) is shown as its escape, so a label can
    neither break a row nor move the terminal's cursor."""
    if text.isprintable():
        return text
    shown = []
    for char in text:
        code = ord(char)
        if char.isprintable():
            shown.append(char)
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            shown.append(f"\\x{code - 0xDC00:02x}")
        else:
            shown.append(char.encode("unicode_escape").decode("ascii"))
    return "".join(shown)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    body = [[one_line(str(cell)) for cell in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    return "\n".join(fmt.format(*r).rstrip() for r in [list(headers), *body])
