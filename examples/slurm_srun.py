"""Run one GPU command in the foreground with srun through vibesys, from Python (the srun
adapter: an agent's own GPU commands on a Slurm submit node).

This is what `vibesys run --adapter srun --slurm-config PATH --gpus 1 -- CMD...` does, with the
public API:

1. read the site configuration (slurm.toml) and check the resource ask against its
   `[vibesys.agent_gpu]` limits (GPUs, time; the partition preference list);
2. open (or create) the journal and build an Engine that finds adapters by name
   (`vibesys.adapters.get_backend`);
3. `prepare` records the invocation with those options (PREPARED);
4. `drive` picks the first preferred partition whose sinfo time limit fits, starts
   `srun --job-name=<stable name> ...`, streams its output and returns once the invocation is
   DONE (or UNRESOLVED).

The slurm.toml comes from the first argument, else $VIBESYS_SLURM_CONFIG. Without either, one
for the project's local cluster (`scripts/local-slurm up`) is written to
./.vibesys/slurm.toml. The journal goes to ./.vibesys/journal.db unless VIBESYS_JOURNAL says
otherwise:

    python examples/slurm_srun.py [SLURM_TOML]

The config lookup and steps 2-4 are shared with slurm_sbatch.py, in _slurm_common.py.
"""

from __future__ import annotations

import sys

from _slurm_common import run_on_slurm, site_config

from vibesys.config.load import load_slurm_config
from vibesys.config.sizing import AskedSizing, check_sizing

#: The agent's GPU command: reports the GPU it was given and where it ran.
COMMAND = [
    "sh",
    "-c",
    'echo "gpu ${CUDA_VISIBLE_DEVICES:-none} (job $SLURM_JOB_ID in $SLURM_JOB_PARTITION)"',
]


def main(argv: list[str]) -> int:
    config_path = site_config(argv)
    config = load_slurm_config(config_path)
    # One GPU, the configured default time, the configured partition preference list.
    sizing = check_sizing(AskedSizing(gpus=1), config.agent_gpu)
    return run_on_slurm(
        adapter="srun",
        command=COMMAND,
        label="slurm-srun-example",
        config_path=config_path,
        sizing=sizing,
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
