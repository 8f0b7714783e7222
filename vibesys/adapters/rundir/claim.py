"""Fenced attempts: the claim every job wrapper makes before its command starts.

Each attempt has a job's attempt directory on the file system the job sees (the local attempt
directory for the local adapter, the remote attempt directory on a cluster). Before the command
starts, the job's wrapper writes its claim into a temporary file there and `link(2)`s it to
`claim`.
`link` is atomic and fails when the target exists (on local file systems and on NFS alike), and
the claim's content is complete before it becomes visible. Whoever links first owns the attempt:

- the job (`kind=job`): its command may run;
- the engine (`kind=fence`): the attempt is retired, its command can never start.

A wrapper that finds the claim taken runs nothing, leaves `refused` saying why, and exits
`REFUSED_EXIT`. So an attempt whose submission is ambiguous (a timeout, a lost connection, a
stalled process) is proven dead by a fence that won, or proven alive by the job's claim, and
never by silence. Pure: strings in, strings out; the adapters run the commands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from msgspec import Struct, field

from vibesys.adapters.rundir.names import CANCEL_FILE, CLAIM_FILE, EXIT_CODE_FILE, REFUSED_FILE

__all__ = [
    "CANCEL_FILE",
    "CLAIM_FILE",
    "EXIT_CODE_FILE",
    "FENCE_SCRIPT",
    "REFUSED_EXIT",
    "REFUSED_FILE",
    "Claim",
    "claim_shell",
    "fence_text",
    "parse_claim",
]

#: The exit status of a job whose wrapper found its attempt claimed by someone else.
REFUSED_EXIT: Final = 85

ClaimKind = Literal["job", "fence"]


class Claim(Struct, frozen=True):
    """Who holds an attempt: its job (the command may run) or a fence (it never will)."""

    kind: ClaimKind
    fields: Mapping[str, str] = field(default_factory=dict)
    text: str = ""

    @property
    def fenced(self) -> bool:
        return self.kind == "fence"

    def get(self, key: str) -> str:
        return self.fields.get(key, "")

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.fields.items() if k != "kind" and v)
        return f"claim kind={self.kind}" + (f" ({shown})" if shown else "")


def parse_claim(text: str) -> Claim | None:
    """The claim written in `text`, or None when it is not one (missing or unreadable)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            fields[key.strip()] = value.strip()
    kind = fields.get("kind")
    if kind == "job":
        return Claim("job", fields, text)
    if kind == "fence":
        return Claim("fence", fields, text)
    return None


def fence_text(owner: str, at: str, reason: str) -> str:
    """The content of a fence: who wrote it, when and why (one line each, no newlines)."""
    lines = {"kind": "fence", "by": owner, "at": at, "reason": reason}
    return "".join(f"{k}={' '.join(str(v).split())}\n" for k, v in lines.items())


def claim_shell(remote_attempt_dir_var: str, id_fields: Mapping[str, str]) -> str:
    """Shell lines (POSIX sh) that claim the attempt in `"$<remote_attempt_dir_var>"` or exit
    REFUSED_EXIT.

    `id_fields` maps claim keys to shell expressions (for example `slurm_job_id` to
    `"${SLURM_JOB_ID:-}"`); host and start time are always recorded.
    """
    d = f'"${remote_attempt_dir_var}"'
    printf_keys = ["kind=job", "host=%s", "started_at=%s", *(f"{k}=%s" for k in id_fields)]
    values = ['"$(uname -n)"', '"$(date -u +%Y-%m-%dT%H:%M:%SZ)"', *id_fields.values()]
    fmt = "\\n".join(printf_keys) + "\\n"
    return (
        f"vibesys_claim={d}/{CLAIM_FILE}.$$.tmp\n"
        f"printf '{fmt}' {' '.join(values)} > \"$vibesys_claim\"\n"
        f'if ! ln "$vibesys_claim" {d}/{CLAIM_FILE} 2>/dev/null; then\n'
        f'  rm -f "$vibesys_claim"\n'
        f"  {{ echo 'vibesys: this attempt is claimed by someone else; nothing was run'; "
        f"cat {d}/{CLAIM_FILE}; }} > {d}/{REFUSED_FILE}.$$ 2>/dev/null\n"
        f"  mv {d}/{REFUSED_FILE}.$$ {d}/{REFUSED_FILE} 2>/dev/null\n"
        f"  exit {REFUSED_EXIT}\n"
        "fi\n"
        'rm -f "$vibesys_claim"\n'
    )


#: `sh -c FENCE_SCRIPT vibesys-fence ATTEMPT_DIR TEXT`: create ATTEMPT_DIR/claim holding TEXT
#: unless a claim exists, then print whatever claim is there. Exit 0 when a claim was printed.
FENCE_SCRIPT: Final = (
    'd=$1; mkdir -p "$d" || exit 3\n'
    f'tmp="$d/{CLAIM_FILE}.fence.$$.tmp"\n'
    'printf \'%s\' "$2" > "$tmp" || exit 3\n'
    f'ln "$tmp" "$d/{CLAIM_FILE}" 2>/dev/null\n'
    'rm -f "$tmp"\n'
    f'cat "$d/{CLAIM_FILE}"\n'
)
