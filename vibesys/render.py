"""Text renderings for the CLI (pure: strings in, strings out)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from typing import Any

from vibesys.journal_schema import ArtifactRow, Attempt, HistoryRow, Invocation
from vibesys.states import JobState, Outcome

#: Exit statuses of `run` and `wait` besides the command's own.
EXIT_INFRA_FAILED = 75
EXIT_UNRESOLVED = 4
EXIT_INTERRUPTED = 130
EXIT_BAD_INPUT = 2


def exit_status(inv: Invocation) -> int:
    """The contract of `vibesys run` and `vibesys wait`."""
    if inv.state is JobState.UNRESOLVED:
        return EXIT_UNRESOLVED
    if inv.state is not JobState.DONE:
        return 0  # detached: the job is running
    match inv.outcome:
        case Outcome.COMPLETED:
            return 0
        case Outcome.APPLICATION_FAILED:
            return inv.exit_code if inv.exit_code not in (None, 0) else 1
        case Outcome.INFRA_FAILED:
            return EXIT_INFRA_FAILED
        case Outcome.CANCELLED:
            return EXIT_INTERRUPTED
        case Outcome.REJECTED:
            return EXIT_BAD_INPUT
    return 1


def summary(inv: Invocation) -> str:
    parts = [f"vibesys: {inv.id} {inv.state}"]
    if inv.outcome:
        parts.append(str(inv.outcome))
    if inv.exit_code is not None:
        parts.append(f"exit {inv.exit_code}")
    parts.append(f"attempt {inv.attempt}")
    if inv.failure_class and inv.outcome is Outcome.INFRA_FAILED:
        parts.append(f"last failure {inv.failure_class}")
    return " ".join(parts)


def _evidence_text(evidence: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in evidence.items() if v not in ("", None))


def show(
    inv: Invocation,
    attempts: Sequence[Attempt],
    history: Sequence[HistoryRow],
    artifacts: Sequence[ArtifactRow] = (),
) -> str:
    lines = [
        f"invocation  {inv.id}" + (f"  ({inv.label})" if inv.label else ""),
        f"state       {inv.state}"
        + (f"  outcome {inv.outcome}" if inv.outcome else "")
        + (f"  exit {inv.exit_code}" if inv.exit_code is not None else ""),
        f"adapter     {inv.adapter}",
        f"command     {shlex.join(inv.command)}",
        f"run dir     {inv.run_dir}",
        *([f"snapshot    sha256:{inv.snapshot_digest}"] if inv.snapshot_digest else []),
        f"retries     {inv.retries} of {inv.max_retries}",
        "attempts",
    ]
    for a in attempts:
        lines.append(
            f"  {a.attempt}  {a.job_name}  job {a.job_id or '-'}  {a.failure_class or ''}".rstrip()
        )
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
            f"  {h.seq:>3}  {h.at}  {h.from_state} -> {h.to_state}  {h.event}  "
            f"{_evidence_text(h.evidence)}".rstrip()
        )
    return "\n".join(lines)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    body = [list(map(str, r)) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    return "\n".join(fmt.format(*r).rstrip() for r in [list(headers), *body])
