"""The shell program every SkyPilot attempt runs: claim the attempt, run the command, leave the
exit code. Pure text; `task.run_section` puts it into a task's `run:`.

It is a `bash -c` program whose positional arguments are the attempt's run directory D (on the
cluster's shared file system, under the profile's `remote_artifact_root`) and the command argv,
so the command is never re-parsed by a shell. In D:
- `claim`     written to a temporary file, then `ln`ed to D/claim before anything runs (link is
              atomic and fails if D/claim exists, also on NFS). Its first line is `kind=job`.
              If the link fails, the claim is someone else's (an engine fence, or a duplicate
              exec): the program runs nothing, writes `refused` (why, and that claim) and exits
              REFUSED_EXIT;
- `work/`     a private copy of the synced workdir, where the command runs and leaves artifacts;
- `stdout`, `stderr` the command's output;
- `exit_code` written atomically (temporary file, rename) after the command ends: its own
              status, or 128+N when signal N killed it. SkyPilot only reports 0/100..103, so
              the same number is also printed as the job's last line (`vibesys: exit_code=N`);
- `setup_failed` when the copy into work/ failed (the command never ran; exit SETUP_FAILED_EXIT).
When the whole job is killed (cancel, allocation end) no exit_code is written.

CLAIM_SNIPPET is this adapter's copy of the shared claim protocol; `vibesys.adapters.claim`
(issue 8) replaces it, which is why `attempt_program` takes the snippet as an argument.
"""

from __future__ import annotations

from typing import Final

from vibesys.adapters.skypilot.parse import EXIT_LINE_PREFIX

__all__ = [
    "CLAIM_FILE",
    "CLAIM_SNIPPET",
    "EXIT_CODE_FILE",
    "REFUSED_EXIT",
    "REFUSED_FILE",
    "SETUP_FAILED_EXIT",
    "SETUP_FAILED_FILE",
    "STDERR_FILE",
    "STDOUT_FILE",
    "WORK_DIR",
    "attempt_program",
]

CLAIM_FILE: Final = "claim"
REFUSED_FILE: Final = "refused"
EXIT_CODE_FILE: Final = "exit_code"
SETUP_FAILED_FILE: Final = "setup_failed"
STDOUT_FILE: Final = "stdout"
STDERR_FILE: Final = "stderr"
WORK_DIR: Final = "work"
REFUSED_EXIT: Final = 85
SETUP_FAILED_EXIT: Final = 86

#: Expects `D` (the run directory) and `claim_ids` (printf-ready `key=value` lines of ids).
#: `uname -n`, not $HOSTNAME: srun exports the submitter's environment, HOSTNAME included.
CLAIM_SNIPPET: Final = (
    'mkdir -p "$D" || exit ' + str(SETUP_FAILED_EXIT) + "\n"
    'claim_tmp="$D/.claim.$(uname -n).$$"\n'
    "printf 'kind=job\\nhost=%s\\nstarted_at=%s\\n%s\\n' \"$(uname -n)\""
    ' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$claim_ids" > "$claim_tmp" || exit '
    + str(SETUP_FAILED_EXIT)
    + "\n"
    f'if ! ln "$claim_tmp" "$D/{CLAIM_FILE}" 2>/dev/null; then\n'
    '  rm -f "$claim_tmp"\n'
    f"  {{ printf 'refused: the attempt is claimed already; its claim:\\n'; "
    f'cat "$D/{CLAIM_FILE}"; }} > "$D/{REFUSED_FILE}.tmp.$$"'
    f' && mv -f "$D/{REFUSED_FILE}.tmp.$$" "$D/{REFUSED_FILE}"\n'
    '  echo "vibesys: refused: this attempt is claimed already" >&2\n'
    f"  exit {REFUSED_EXIT}\n"
    "fi\n"
    'rm -f "$claim_tmp"\n'
)

#: Runs after a successful claim: the command, in a private copy of the workdir.
_RUN: Final = (
    f'work="$D/{WORK_DIR}"\n'
    'mkdir -p "$work" && cp -a . "$work/" || {\n'
    "  rc=$?\n"
    f'  printf \'%s\\n\' "$rc" > "$D/{SETUP_FAILED_FILE}.tmp"'
    f' && mv -f "$D/{SETUP_FAILED_FILE}.tmp" "$D/{SETUP_FAILED_FILE}"\n'
    f"  exit {SETUP_FAILED_EXIT}\n"
    "}\n"
    'cd "$work" || exit ' + str(SETUP_FAILED_EXIT) + "\n"
    f'"$@" < /dev/null > "$D/{STDOUT_FILE}" 2> "$D/{STDERR_FILE}"\n'
    "rc=$?\n"
    f'printf \'%s\\n\' "$rc" > "$D/{EXIT_CODE_FILE}.tmp"'
    f' && mv -f "$D/{EXIT_CODE_FILE}.tmp" "$D/{EXIT_CODE_FILE}"\n'
    f'echo "{EXIT_LINE_PREFIX}$rc"\n'
    'exit "$rc"\n'
)

# Ids the job sees: SkyPilot's job id and the Slurm allocation it runs in.
_IDS: Final = (
    "claim_ids=$(printf 'sky_job_id=%s\\nslurm_job_id=%s\\nsky_cluster=%s\\n'"
    ' "${SKYPILOT_INTERNAL_JOB_ID:-}" "${SLURM_JOB_ID:-}" "${VIBESYS_SKY_CLUSTER:-}")\n'
)


def attempt_program(claim_snippet: str = CLAIM_SNIPPET) -> str:
    """The `bash -c` program: `bash -c PROGRAM vibesys-sky D CMD...`."""
    return "D=$1\nshift\n" + _IDS + claim_snippet + _RUN
