"""The shell program every SkyPilot attempt runs: claim the attempt, run the command, leave the
exit code. Pure text; `task.run_section` puts it into a task's `run:`.

It is a `bash -c` program whose positional arguments are the remote attempt directory D (on the
cluster's shared file system, under the profile's `remote_artifact_root`), the setup (a shell
line: copy the candidate's staged snapshot into D/work and verify its digest; empty without a
candidate) and the command argv, so the command is never re-parsed by a shell. In D:
- `claim`     written to a temporary file, then `ln`ed to D/claim before anything runs (link is
              atomic and fails if D/claim exists, also on NFS). Its first line is `kind=job`.
              If the link fails, the claim is someone else's (an engine fence, or a duplicate
              exec): the program runs nothing, writes `refused` (why, and that claim) and exits
              REFUSED_EXIT;
- `work/`     a private copy of the candidate's snapshot, verified against the digest recorded at
              PREPARED (empty without a candidate), where the command runs and leaves artifacts;
- `stdout`, `stderr` the command's output;
- `exit_code` written atomically (temporary file, rename) after the command ends: its own
              status, or 128+N when signal N killed it. SkyPilot only reports 0/100..103, so
              the same number is also printed as the job's last line (`vibesys: exit_code=N`);
- `setup_failed` when the copy into work/ or its verification failed (the command never ran;
              exit SETUP_FAILED_EXIT).
When the whole job is killed no exit_code is written; when only the command is signalled (a
real scancel of the allocation lets the wrapper outlive it) it records 128+N, which the
classifier reads with what became of the allocation (`classify.py`).

The claim is the shared protocol's (`vibesys.adapters.rundir.claim.claim_shell`): the same claim and
fence files, the same atomic link and the same refusal (exit REFUSED_EXIT) as every adapter.
"""

from __future__ import annotations

from typing import Final

from vibesys.adapters.rundir.claim import REFUSED_EXIT, claim_shell
from vibesys.adapters.rundir.names import (
    CLAIM_FILE,
    EXIT_CODE_FILE,
    REFUSED_FILE,
    SETUP_FAILED_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    WORK_DIR,
)
from vibesys.adapters.skypilot.parse import EXIT_LINE_PREFIX

__all__ = [
    "ATTEMPT_JOB_ID",
    "CLAIM_FILE",
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

SETUP_FAILED_EXIT: Final = 86
#: The claim's first `*_job_id` field, which the engine adopts as the attempt's job id when a
#: fence finds the job's claim: "<SkyPilot job id>@<allocation>", as the adapter records it.
ATTEMPT_JOB_ID: Final = "attempt_job_id"

#: Ids the job sees: SkyPilot's job id, the Slurm allocation it runs in, its cluster.
_CLAIM_IDS: Final = {
    ATTEMPT_JOB_ID: '"${SKYPILOT_INTERNAL_JOB_ID:-}@${SLURM_JOB_ID:-}"',
    "sky_job_id": '"${SKYPILOT_INTERNAL_JOB_ID:-}"',
    "slurm_job_id": '"${SLURM_JOB_ID:-}"',
    "sky_cluster": '"${VIBESYS_SKY_CLUSTER:-}"',
}

#: Runs after a successful claim: the setup (it makes $work the verified copy of the
#: candidate), or an empty $work without one; then the command there.
_RUN: Final = (
    f'work="$D/{WORK_DIR}"\n'
    'if [ -n "$setup" ]; then sh -c "$setup"; else rm -rf "$work" && mkdir -p "$work"; fi || {\n'
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


def attempt_program() -> str:
    """The `bash -c` program: `bash -c PROGRAM vibesys-sky D SETUP CMD...`."""
    return (
        f'D=$1\nsetup=$2\nshift 2\nmkdir -p "$D" || exit {SETUP_FAILED_EXIT}\n'
        + claim_shell("D", _CLAIM_IDS)
        + _RUN
    )
