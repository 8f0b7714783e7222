"""Run one command as a Slurm batch job through vibesys, from Python (the sbatch adapter).

This is what `vibesys run --adapter sbatch --slurm-config PATH -- CMD...` does, with the public
API:

1. read the site configuration (slurm.toml) and check the resource ask against it;
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

The config lookup and steps 2-4 are shared with slurm_srun.py, in _slurm_common.py.
"""

from __future__ import annotations

import sys

from _slurm_common import run_on_slurm, site_config

from vibesys.config.sizing import AskedSizing, check_trusted

#: The "evaluation": reports where it ran. Any argv works here.
COMMAND = ["sh", "-c", 'echo "accuracy 0.93 (job $SLURM_JOB_ID in $SLURM_JOB_PARTITION)"']


def main(argv: list[str]) -> int:
    config_path = site_config(argv)
    # The same sizing `vibesys run --adapter sbatch` gives: a trusted evaluation asks for what
    # it needs ([vibesys.agent_gpu] limits only the agents' own jobs); Slurm refuses what the
    # site cannot give. The engine records the site's rendering with the invocation.
    sizing = check_trusted(AskedSizing(gpus=0, time_minutes=5), None)
    return run_on_slurm(
        adapter="sbatch",
        command=COMMAND,
        label="slurm-sbatch-example",
        config_path=config_path,
        sizing=sizing,
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
