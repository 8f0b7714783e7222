"""Run one command as a Slurm batch job through vibesys, from Python (the sbatch adapter).

This is what `vibesys run --adapter sbatch --slurm-config PATH -- CMD...` does, with the public
API:

1. read the site configuration (slurm.toml) and check the resource request against it;
2. open (or create) the journal and build an Engine that finds adapters by name
   (`vibesys.adapters.get_backend`), which builds the sbatch adapter from the recorded options;
3. `prepare` records the invocation with those options (PREPARED);
4. `drive` names the job, submits it with sbatch, polls squeue/sacct, streams its output and
   returns once the invocation is DONE (or UNRESOLVED).

The slurm.toml comes from the first argument, else $VIBESYS_SLURM_CONFIG. Without either, one
for the project's local cluster (`scripts/local-slurm up`) is written to
./.vibesys/slurm.toml. The journal goes to ./.vibesys/journal.db unless VIBESYS_JOURNAL says
otherwise:

    python examples/slurm_sbatch.py [SLURM_TOML]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vibesys.adapters import get_backend
from vibesys.config import SlurmRequest, check_request, load_slurm_config
from vibesys.engine import DriveOptions, Engine, LogTail, RetryPolicy, drive
from vibesys.journal_schema import journal_path, open_journal, verify_journal
from vibesys.render import exit_status

#: The "evaluation": reports where it ran. Any argv works here.
COMMAND = ["sh", "-c", 'echo "accuracy 0.93 (job $SLURM_JOB_ID in $SLURM_JOB_PARTITION)"']

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


def main(argv: list[str]) -> int:
    config_path = site_config(argv)
    config = load_slurm_config(config_path)
    # The same check `vibesys run` makes: over-limit requests are refused, never clamped.
    request = check_request(SlurmRequest(gpus=0, time_minutes=5), config.agent_gpu)
    options = {
        "site_config": str(config_path),
        "gpus": request.gpus,
        "time_minutes": request.time_minutes,
        "partitions": list(request.partitions),
    }

    journal = open_journal(journal_path())
    try:
        engine = Engine(journal, get_backend, retry=RetryPolicy(max_retries=2))
        invocation = engine.prepare(
            adapter="sbatch", command=COMMAND, options=options, label="slurm-sbatch-example"
        )
        print(f"invocation {invocation.id} {invocation.state}", flush=True)

        tail = LogTail(sys.stdout.buffer, sys.stderr.buffer)  # live output, as `vibesys run`
        invocation = drive(engine, invocation, DriveOptions(tail=tail))

        print(f"state {invocation.state}")
        print(f"outcome {invocation.outcome}")
        print(f"exit code {invocation.exit_code}")
        for attempt in journal.attempts(invocation.id):
            print(f"attempt {attempt.attempt}: Slurm job {attempt.job_id} ({attempt.job_name})")
        for row in journal.history(invocation.id):
            print(f"  {row.seq}  {row.from_state} -> {row.to_state}  {row.event}")
        problems = verify_journal(journal)
        print("journal verify: " + ("ok" if not problems else str(problems[0])))
        return exit_status(invocation) if not problems else 1
    finally:
        journal.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
