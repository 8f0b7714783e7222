"""What the two Slurm examples share: finding the site config, and driving one command through
an adapter (sbatch or srun) to the end while printing what the journal recorded.

Not an example itself: `slurm_sbatch.py` and `slurm_srun.py` import it (Python puts a script's
own directory on `sys.path`, so this works from any working directory).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vibesys.adapters.slurm.request import SbatchRequest, SrunRequest
from vibesys.config.sizing import CheckedSizing, TrustedSizing
from vibesys.engine import DriveOptions, Engine, LogTail, RetryPolicy, drive
from vibesys.journal_schema import journal_path, open_journal, verify_journal
from vibesys.states.exits import exit_status

LOCAL_CLUSTER_TOML = """\
[slurm]
name = "local"
remote_workspace_root = "{root}"
poll_initial_seconds = 0.2
poll_max_seconds = 2

[slurm.transport]
kind = "local"

[vibesys.agent_gpu]
partitions = ["main", "priority"]
max_gpus = 2
max_time_minutes = 120
default_time_minutes = 5
"""


def site_config(argv: list[str]) -> Path:
    """The slurm.toml to use: argv, then $VIBESYS_SLURM_CONFIG, else one for the local cluster."""
    given = argv[0] if argv else os.environ.get("VIBESYS_SLURM_CONFIG")
    if given:
        return Path(given).expanduser().resolve()
    state = Path(".vibesys").resolve()
    state.mkdir(exist_ok=True)
    path = state / "slurm.toml"
    path.write_text(LOCAL_CLUSTER_TOML.format(root=state / "remote"))
    return path


def run_on_slurm(
    *,
    adapter: str,
    command: list[str],
    label: str,
    config_path: Path,
    sizing: CheckedSizing | TrustedSizing,
) -> int:
    """Prepare and drive `command` through `adapter` with the checked `sizing`, print the
    outcome, the Slurm jobs and the journal's history, and return the exit status to use."""
    model = SbatchRequest if adapter == "sbatch" else SrunRequest
    typed = model(
        site_config=str(config_path),
        gpus=sizing.gpus,
        time_minutes=sizing.time_minutes,
        partitions=sizing.partitions,
    )

    journal = open_journal(journal_path())
    try:
        engine = Engine(journal, retry=RetryPolicy(max_retries=2))
        invocation = engine.prepare(adapter=adapter, command=command, request=typed, label=label)
        print(f"invocation {invocation.id} {invocation.state}", flush=True)

        tail = LogTail(sys.stdout.buffer, sys.stderr.buffer)  # live output, as `vibesys run`
        invocation = drive(engine, invocation, DriveOptions(tail=tail))

        print(f"state {invocation.state}")
        print(f"outcome {invocation.outcome}")
        print(f"exit code {invocation.exit_code}")
        for attempt in journal.invocations.attempts(invocation.id):
            print(f"attempt {attempt.attempt}: Slurm job {attempt.job_id} ({attempt.job_name})")
        for row in journal.invocations.history(invocation.id):
            print(f"  {row.seq}  {row.from_state} -> {row.to_state}  {row.event}")
        problems = verify_journal(journal)
        print("journal verify: " + ("ok" if not problems else str(problems[0])))
        return exit_status(invocation) if not problems else 1
    finally:
        journal.close()
